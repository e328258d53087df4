package ibcm_test

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/ibcm"
	"github.com/rdma-go/rdma-go/mad"
	"github.com/rdma-go/rdma-go/provider/soft/clock"
)

// queueTransport keeps the MADs sent, for the test to deliver.
type queueTransport struct{ sent []mad.MAD }

func (t *queueTransport) SendMAD(_ mad.Address, m mad.MAD) error {
	t.sent = append(t.sent, append(mad.MAD(nil), m...))
	return nil
}

// TestDebugRecords: a manager says in debug records when it starts and
// stops listening on a service ID and when it rejects a REQ for want of a
// listener; tools and tests (RDMA_GO_DEBUG=cm) wait on the first.
func TestDebugRecords(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := clock.NewFake(time.Unix(0, 0))
	ta, tb := &queueTransport{}, &queueTransport{}
	aa, ab := mad.NewAgent(mad.Config{Transport: ta, Clock: c}), mad.NewAgent(mad.Config{Transport: tb, Clock: c})
	ma, err := ibcm.New(aa, ibcm.Config{GUID: 1})
	if err != nil {
		t.Fatal(err)
	}
	mb, err := ibcm.New(ab, ibcm.Config{GUID: 2, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	defer mb.Close()
	nop := func(*ibcm.Conn, *ibcm.Event) error { return nil }

	l, err := mb.Listen(0x1060042, nop)
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, `msg="ibcm: listening"`) || !strings.Contains(got, "service_id=0x1060042") {
		t.Fatalf("after Listen: %q", got)
	}
	l.Close()
	if got := buf.String(); !strings.Contains(got, `msg="ibcm: stopped listening"`) {
		t.Fatalf("after Close: %q", got)
	}

	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	out, err := ma.Connect(&ibcm.ConnectParams{Path: ibcm.Path{Local: a, Remote: b, PacketLifeTime: 16},
		ServiceID: 0x1060042, QPN: 9, RemoteCMResponseTimeout: 20, MaxCMRetries: 2}, nop)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Destroy()
	if len(ta.sent) != 1 || ta.sent[0].AttrID() != mad.AttrREQ {
		t.Fatalf("Connect sent %d MADs, want one REQ", len(ta.sent))
	}
	ab.Deliver(c.Now(), ta.sent[0], mad.Address{Remote: a, Local: b, QPN: 1})
	if got := buf.String(); !strings.Contains(got, `msg="ibcm: REQ for a service ID nobody listens on: rejected"`) {
		t.Fatalf("after a REQ to nobody: %q", got)
	}
	if len(tb.sent) != 1 || tb.sent[0].AttrID() != mad.AttrREJ {
		t.Fatalf("the REQ to nobody got %d MADs back, want one REJ", len(tb.sent))
	}
}
