package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// rejInvalidServiceID is the IB CM reject reason for a REQ to a port nobody
// listens on (IBTA Table 112).
const (
	rejInvalidServiceID = 8
)

// peer walks an rdma_cm connection to c.Peer the way a client does —
// resolve the address (which local device reaches it), resolve the route,
// connect — and stops at the first step that fails, saying what that
// step's failure means.
func (r *report) peer(ctx context.Context, c Config) {
	const check = "peer"
	to := c.Timeout
	if to <= 0 {
		to = 2 * time.Second
	}
	id, err := rdmacm.CreateID(nil, nil, rdmacm.PSTCP)
	if err != nil {
		r.add(check, Error, "", "rdma_create_id: %v", err)
		return
	}
	defer id.Destroy()

	// Each step's context outlasts its own timeout a little, so that the
	// step's answer (a timeout included) arrives before the context ends.
	step, cancel := context.WithTimeout(ctx, to+time.Second)
	err = id.ResolveAddr(step, netip.AddrPort{}, c.Peer, to)
	cancel()
	switch {
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, context.DeadlineExceeded):
		r.add(check, Error, "check that the peer is up and on this link (ping "+c.Peer.Addr().String()+"; ip neigh show), or its gateway's",
			"resolving %s: the next hop did not answer ARP/neighbour discovery within %v: %v", c.Peer.Addr(), to, err)
		return
	case err != nil:
		r.add(check, Error, "give a local device an address on the peer's subnet, or add a route to it (ip route add "+c.Peer.Addr().String()+" via GATEWAY); rdma-go link show lists the devices and their addresses",
			"resolving %s: no local RDMA device reaches it: %v", c.Peer.Addr(), err)
		return
	}
	dev := id.Verbs().Device().Name()
	r.add(check, OK, "", "%s resolves to local device %s (source %s)", c.Peer.Addr(), dev, id.SrcAddr().Addr())

	step, cancel = context.WithTimeout(ctx, to+time.Second)
	err = id.ResolveRoute(step, to)
	cancel()
	if err != nil {
		r.add(check, Error, "check the route to the peer (ip route get "+c.Peer.Addr().String()+")",
			"resolving the route to %s: %v", c.Peer.Addr(), err)
		return
	}
	p := id.Route().Path
	r.add(check, OK, "", "route %s → %s, MTU enum %d, hop limit %d", p.Local, p.Remote, p.MTU, p.HopLimit)

	pd, err := id.Verbs().AllocPD()
	if err != nil {
		r.add(check, Error, "", "allocating a PD on %s: %v", dev, err)
		return
	}
	defer pd.Dealloc()
	if err := id.CreateQP(pd, &verbs.QPInitAttr{Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		r.add(check, Error, "", "creating a QP on %s: %v", dev, err)
		return
	}
	defer id.DestroyQP()
	// Re-send the REQ a few times within the timeout, not Linux's 15
	// times over a minute: the question is only whether anyone answers.
	id.SetCMTimeouts(16, 3)
	step, cancel = context.WithTimeout(ctx, to)
	start := time.Now()
	err = id.Connect(step, nil)
	cancel()
	took := time.Since(start).Round(time.Millisecond)
	var rej *rdmacm.RejectedError
	switch {
	case err == nil:
		r.add(check, OK, "", "connected to %s in %v: a listener answers on rdma_cm port %d", c.Peer, took, c.Peer.Port())
		id.Disconnect()
	case errors.As(err, &rej) && rej.Reason == rejInvalidServiceID && !c.PeerPortGiven:
		r.add(check, OK, "", "%s's connection manager answers over UDP 4791 (REJ invalid service ID for probe port %d) in %v", c.Peer.Addr(), c.Peer.Port(), took)
	case errors.As(err, &rej) && rej.Reason == rejInvalidServiceID:
		r.add(check, Error, fmt.Sprintf("start the server on port %d (for example rping -s -a %s -p %d), or connect to the port it listens on", c.Peer.Port(), c.Peer.Addr(), c.Peer.Port()),
			"%s's connection manager answers (UDP 4791 is reachable) but nothing listens on rdma_cm port %d (REJ reason %d, invalid service ID)", c.Peer.Addr(), c.Peer.Port(), rej.Reason)
	case errors.As(err, &rej):
		r.add(check, Warn, "the server refused the connection: see its log (private data, resources, backlog)",
			"%s rejected the connection (REJ reason %d) after %v", c.Peer, rej.Reason, took)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		r.add(check, Error, "check that the peer has an RDMA device on "+c.Peer.Addr().String()+" (rdma link show / ibv_devices there), that UDP port 4791 is open in both directions (firewall, security group), and that both ends use the same RoCE port ("+"RDMA_GO_PORT)",
			"no answer from %s's connection manager within %v: the REQ went out over UDP 4791 and nothing came back", c.Peer.Addr(), to)
	default:
		r.add(check, Error, "", "connecting to %s: %v", c.Peer, err)
	}
}
