//go:build !race

package engine

// hostilePackets is how many packets each hostile-peer test sends.
const hostilePackets = 1_000_000
