//go:build race

package softdev

const raceEnabled = true
