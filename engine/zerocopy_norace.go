//go:build !race

package engine

// raceReadPayload is a no-op without the race detector (zerocopy_race.go).
func raceReadPayload([]byte) {}
