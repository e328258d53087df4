package madclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestCall sends MADs from a UD QP on one soft device to QP1 of another:
// the PerfMgt responder answers ClassPortInfo, the agent answers a Get of
// a class nobody serves with status 0x000C, an address with no device
// never answers, and the client still works after that.
func TestCall(t *testing.T) {
	a, b := testdev.Device(t, "mca"), testdev.Device(t, "mcb")
	cl, err := Open(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Port() != 1 || cl.GID() != verbs.GIDFromIP(a.Device().Addr()) || cl.QPN() == mad.GSIQPN {
		t.Fatalf("port %d, GID %s, QPN %d", cl.Port(), cl.GID(), cl.QPN())
	}
	ctx := context.Background()
	dst := verbs.GIDFromIP(b.Device().Addr())
	opt := Options{Timeout: 5 * time.Second}

	resp, err := cl.Call(ctx, dst, mad.New(mad.ClassPerfMgt, mad.PerfMgtVersion, mad.MethodGet, mad.AttrClassPortInfo, 0), opt)
	if err != nil {
		t.Fatal(err)
	}
	cpi := mad.ClassPortInfo(resp.PerfAttr())
	if resp.Method() != mad.MethodGetResp || resp.Status() != 0 || cpi.ClassVersion() != mad.PerfMgtVersion ||
		cpi.CapabilityMask() != mad.PerfCapExtendedWidth || uint32(resp.TID()>>32) != cl.tidHi {
		t.Fatalf("ClassPortInfo answer: %s, CapabilityMask %#x", resp, cpi.CapabilityMask())
	}

	resp, err = cl.Call(ctx, dst, mad.New(mad.ClassBM, 1, mad.MethodGet, 0x0010, 0), opt)
	if err != nil || resp.Status() != mad.StatusMethodAttrUnsupported || resp.MgmtClass() != mad.ClassBM {
		t.Fatalf("BM Get: %v, %v", resp, err)
	}

	retries := 0
	nobody := verbs.GIDFromIP(testdev.Addr())
	_, err = cl.Call(ctx, nobody, mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrClassPortInfo, 0),
		Options{Timeout: 20 * time.Millisecond, Retries: 2, OnRetry: func(n int) { retries = n }})
	if !errors.Is(err, ErrTimeout) || retries != 1 {
		t.Fatalf("to nobody: %v after %d retries", err, retries)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cl.Call(cctx, nobody, mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrClassPortInfo, 0), opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call: %v", err)
	}

	// PortSelect 0: the port the MAD came in on, as on a NIC.
	resp, err = cl.Call(ctx, dst, mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCounters, 0), opt)
	if err != nil || resp.Status() != 0 {
		t.Fatalf("PortCounters of port 0: %v, %v", resp, err)
	}
	// PortSelect 2: not a port of b.
	m := mad.New(mad.ClassPerfMgt, 1, mad.MethodGet, mad.AttrPortCounters, 0)
	mad.PortCounters(m.PerfAttr()).SetPortSelect(2)
	resp, err = cl.Call(ctx, dst, m, opt)
	if err != nil || resp.Status() != mad.StatusInvalidAttrValue {
		t.Fatalf("PortCounters of port 2: %v, %v", resp, err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
}
