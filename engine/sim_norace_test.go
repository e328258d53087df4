//go:build !race

package engine

// How many seeds TestSim runs by default and how many send WRs each posts;
// how many send WRs each determinism run posts.
const (
	simDefaultSeeds   = 6
	simDefaultWRs     = 12000
	simDeterminismWRs = 3000
)

var simDeterminismSeeds = []uint64{101, 102} // one IPv4, one IPv6 run
