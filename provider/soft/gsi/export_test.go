package gsi

// SetTestHookDelivered sets the hook Poll runs after each MAD it delivers
// (nil: none).
func SetTestHookDelivered(f func()) { testHookDelivered = f }
