package rdmanet

import (
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Network is the network name of rdmanet addresses.
const Network = "rdma"

// Addr is the address of an rdmanet endpoint: the IP address of an RDMA
// device and an rdma_cm port (RDMA_PS_TCP port space). It implements
// net.Addr.
type Addr struct {
	AddrPort netip.AddrPort
}

// Network returns "rdma".
func (a *Addr) Network() string { return Network }

// String returns "host:port".
func (a *Addr) String() string {
	if a == nil {
		return "<nil>"
	}
	return a.AddrPort.String()
}

// checkNetwork accepts "rdma", "rdma4", "rdma6" and the TCP names as
// synonyms; for the 4/6 variants a literal host must be of that family.
func checkNetwork(network, address string) error {
	var fam byte
	switch network {
	case "rdma", "tcp":
	case "rdma4", "tcp4":
		fam = '4'
	case "rdma6", "tcp6":
		fam = '6'
	default:
		return net.UnknownNetworkError(network)
	}
	if fam == 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a = a.Unmap(); (fam == '4') != a.Is4() {
			return &net.AddrError{Err: "address family does not match network " + network, Addr: address}
		}
	}
	return nil
}

// Option configures Dial and Listen.
type Option func(*config)

type config struct {
	ring        int
	source      netip.Addr
	kaInterval  time.Duration
	kaTimeout   time.Duration
	linger      time.Duration
	cmCloseWait time.Duration
}

// Limits and defaults of the options.
const (
	// MinRingSize and MaxRingSize bound WithRingSize. The upper bound
	// comes from the 24-bit byte acknowledgement of the wire protocol.
	MinRingSize = 4 << 10
	MaxRingSize = 8 << 20
	// DefaultRingSize is the receive ring of each end.
	DefaultRingSize = 1 << 20
)

func newConfig(opts []Option) (*config, error) {
	c := &config{ring: DefaultRingSize, kaInterval: time.Second, kaTimeout: 5 * time.Second,
		linger: 5 * time.Second, cmCloseWait: time.Second}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.ring < MinRingSize || c.ring > MaxRingSize {
		return nil, fmt.Errorf("rdmanet: ring size %d outside %d..%d", c.ring, MinRingSize, MaxRingSize)
	}
	if c.kaInterval > 0 && c.kaTimeout < c.kaInterval {
		return nil, fmt.Errorf("rdmanet: keepalive timeout %v shorter than its interval %v", c.kaTimeout, c.kaInterval)
	}
	return c, nil
}

// WithRingSize sets the size in bytes of the receive ring each end
// registers (MinRingSize..MaxRingSize; DefaultRingSize if not given). It
// bounds the bytes in flight in each direction, and the memory a
// connection holds: its own ring plus a staging ring of the peer's size.
func WithRingSize(n int) Option { return func(c *config) { c.ring = n } }

// WithSource makes Dial connect from the device bound to addr; without it
// the device is chosen by route, as rdma_resolve_addr does.
func WithSource(addr netip.Addr) Option { return func(c *config) { c.source = addr } }

// WithKeepAlive sets how often an idle end sends a keepalive (interval)
// and after how long without hearing from the peer it gives the
// connection up (timeout). An interval ≤ 0 turns keepalives off: a peer
// that vanishes without disconnecting is then noticed only when a send
// exhausts its transport retries. Defaults: 1 s and 5 s.
func WithKeepAlive(interval, timeout time.Duration) Option {
	return func(c *config) { c.kaInterval, c.kaTimeout = interval, timeout }
}

// WithLinger bounds how long Close waits for the bytes written and the
// end-of-stream marker to be acknowledged by the peer (default 5 s).
func WithLinger(d time.Duration) Option { return func(c *config) { c.linger = d } }

// WithDisconnectTimeout bounds how long Close waits for the CM's
// disconnect reply from the peer (default 1 s).
func WithDisconnectTimeout(d time.Duration) Option {
	return func(c *config) { c.cmCloseWait = d }
}
