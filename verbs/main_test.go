package verbs_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine (a device's receive loop, a QP
// timer) outlives the tests that started it. The child processes of
// TestTwoProcesses run through here too, so they are checked the same way.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
