package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdma-go/rdma-go/internal/cli/clitest"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// waitFor polls buf until it holds want, for at most 10 s.
func waitFor(t *testing.T, buf *clitest.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output:\n%s", want, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestUsageAndErrors: -h prints asyncwatch.c's usage (testdata/usage.golden
// was recorded from ibv_asyncwatch 44.0) on stdout with status 0; a bad
// option prints getopt's message, the usage and status 1; a device that
// does not exist "IB device <dev> not found" and status 1.
func TestUsageAndErrors(t *testing.T) {
	want, err := os.ReadFile("testdata/usage.golden")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		args           []string
		rc             int
		stdout, stderr string
	}{
		{[]string{"-h"}, 0, string(want), ""},
		{[]string{"-d", "x", "--help"}, 0, string(want), ""},
		{[]string{"-x"}, 1, string(want), "ibv_asyncwatch: invalid option -- 'x'\n"},
		{[]string{"--ib-dev"}, 1, string(want), "ibv_asyncwatch: option '--ib-dev' requires an argument\n"},
		{[]string{"-d", "nosuchdev"}, 1, "", "IB device nosuchdev not found\n"},
	} {
		var out, errb bytes.Buffer
		rc := run(ctx, append([]string{"ibv_asyncwatch"}, c.args...), &out, &errb)
		if rc != c.rc || out.String() != c.stdout || errb.String() != c.stderr {
			t.Errorf("ibv_asyncwatch %q: status %d, stdout:\n%s\nstderr: %q; want status %d, stderr %q",
				c.args, rc, out.String(), errb.String(), c.rc, c.stderr)
		}
	}
}

// TestStartAndStop: on a soft device the program prints its start line,
// with -1 for the descriptor a soft device does not have, and ends with
// status 0 when its context ends (as a signal ends it).
func TestStartAndStop(t *testing.T) {
	dev := testdev.Device(t, "aw").Device().Name()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out clitest.Buffer
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"ibv_asyncwatch", "-d", dev}, &out, &errb) }()
	waitFor(t, &out, dev+": async event FD -1\n")
	cancel()
	select {
	case rc := <-done:
		if rc != 0 || out.String() != dev+": async event FD -1\n" || errb.Len() != 0 {
			t.Fatalf("status %d, stdout %q, stderr %q", rc, out.String(), errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ibv_asyncwatch did not end when its context did")
	}
}

// TestQPAccessError: a real asynchronous event. Two RC QPs of the watched
// context are connected to each other through the device's address; an
// RDMA WRITE with a wrong rkey makes the responder QP fail with a remote
// access error, and the device reports IBV_EVENT_QP_ACCESS_ERR (3) for it
// on port 1, which asyncwatch.c names "unexpected".
func TestQPAccessError(t *testing.T) {
	vc := testdev.Device(t, "awqp")
	gidIndex, err := testdev.GIDIndex(vc)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := vc.QueryGID(1, gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := vc.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := vc.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	// Local write for the requester's buffer, remote write for the
	// responder's: the WRITE fails on the rkey, not on the access flags.
	mr, err := pd.RegMR(make([]byte, 4096), verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	var qps [2]*verbs.QP
	for i := range qps {
		qps[i], err = pd.CreateQP(verbs.QPInitAttr{Type: verbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer qps[i].Destroy()
	}
	const psn = 0x1000
	for i, qp := range qps {
		if err := connect(qp, qps[1-i].QPN(), psn, gid, uint8(gidIndex)); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out clitest.Buffer
	done := make(chan error, 1)
	go func() { done <- watch(ctx, vc, &out) }()

	if err := qps[0].PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{mr.SGE(0, 64)}, RemoteAddr: mr.Addr() + 2048, RKey: mr.RKey() ^ 0x1}); err != nil {
		t.Fatal(err)
	}
	// The requester learns of it from its completion...
	if err := cq.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var wc [1]verbs.WC
	if n, err := cq.Poll(wc[:]); err != nil || n != 1 || wc[0].Status != verbs.WCRemAccessErr {
		t.Fatalf("requester completion: n %d, err %v, status %s; want REM_ACCESS_ERR", n, err, wc[0].Status)
	}
	// ...the responder's context from the event the watcher prints.
	waitFor(t, &out, "  event_type unexpected (3), port 1\n")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end when its context did")
	}
	if got := out.String(); got != "  event_type unexpected (3), port 1\n" {
		t.Fatalf("watch printed:\n%s", got)
	}
}

// connect moves qp through INIT and RTR to RTS, connected to the QP
// destQPN at gid, both sides starting at psn.
func connect(qp *verbs.QP, destQPN, psn uint32, gid verbs.GID, sgid uint8) error {
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateInit, PortNum: 1, AccessFlags: verbs.AccessRemoteWrite},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return err
	}
	if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPN: destQPN,
		RQPSN: psn, MaxDestRDAtomic: 1, MinRNRTimer: 12,
		AH: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GlobalRoute{DGID: gid, SGIDIndex: sgid, HopLimit: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRDAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return err
	}
	return qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1},
		verbs.QPAttrState|verbs.QPAttrSQPSN|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|verbs.QPAttrMaxQPRDAtomic)
}

// TestEventName: the names asyncwatch.c 44.0 knows, "unexpected" for the
// rest.
func TestEventName(t *testing.T) {
	for ev, want := range map[verbs.EventType]string{
		verbs.EventPortActive: "IBV_EVENT_PORT_ACTIVE", verbs.EventPortErr: "IBV_EVENT_PORT_ERR",
		verbs.EventDeviceFatal: "IBV_EVENT_DEVICE_FATAL", verbs.EventLIDChange: "IBV_EVENT_LID_CHANGE",
		verbs.EventPKeyChange: "IBV_EVENT_PKEY_CHANGE", verbs.EventSMChange: "IBV_EVENT_SM_CHANGE",
		verbs.EventClientReregister: "IBV_EVENT_CLIENT_REREGISTER", verbs.EventGIDChange: "IBV_EVENT_GID_CHANGE",
		verbs.EventQPFatal: "unexpected", verbs.EventCQErr: "unexpected", verbs.EventSRQLimitReached: "unexpected",
		verbs.EventDeviceSpeedChange: "unexpected", verbs.EventType(99): "unexpected",
	} {
		if got := eventName(ev); got != want {
			t.Errorf("eventName(%d) = %q, want %q", ev, got, want)
		}
	}
}

// TestNewFD: the async_fd is the lowest event descriptor that opening the
// device added.
func TestNewFD(t *testing.T) {
	if fd := newFD(map[int]bool{7: true}, map[int]bool{7: true, 9: true, 8: true}); fd != 8 {
		t.Errorf("newFD = %d, want 8", fd)
	}
	if fd := newFD(map[int]bool{7: true}, map[int]bool{7: true}); fd != -1 {
		t.Errorf("newFD with nothing new = %d, want -1", fd)
	}
}
