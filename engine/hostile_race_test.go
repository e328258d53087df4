//go:build race

package engine

// hostilePackets is how many packets each hostile-peer test sends; the race
// detector slows the receive path about tenfold.
const hostilePackets = 50_000
