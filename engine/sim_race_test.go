//go:build race

package engine

// The race detector slows the simulation down about tenfold: TestSim runs
// one full seed by default, and the determinism runs are shorter.
const (
	simDefaultSeeds   = 1
	simDefaultWRs     = 10000
	simDeterminismWRs = 1000
)

var simDeterminismSeeds = []uint64{102} // one IPv6 run
