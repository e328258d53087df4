//go:build race

package link

// raceEnabled is true under the race detector, where sync.Pool drops items
// at random and allocation counts are meaningless.
const raceEnabled = true
