package main

import (
	"path/filepath"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/link/capture"
	"github.com/rdma-go/rdma-go/verbs"
)

// TestQuickstartCapture runs the quickstart with RDMA_GO_PCAP set: it
// succeeds, and its capture holds its SEND, WRITE, READ and atomic, every
// packet with a valid ICRC and, where tshark is installed, decoded by
// Wireshark with none malformed.
func TestQuickstartCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quickstart.pcap")
	t.Setenv(capture.Env, path)
	// Devices on addresses of their own (testdev.Addr), not the
	// automatically addressed loopback ones that other test processes
	// take and leave.
	add := func(name string) (*verbs.Device, error) { return verbs.AddDevice(name, testdev.Addr()) }
	if err := run(add); err != nil {
		t.Fatal(err)
	}
	if err := capture.Stop(); err != nil {
		t.Fatal(err)
	}
	ops, total := testdev.CheckPcap(t, path)
	// RC SEND ONLY 0x04 (0x05 with immediate), RDMA WRITE ONLY 0x0A (or
	// FIRST 0x06), READ REQUEST 0x0C, COMPARE&SWAP 0x13 or FETCH&ADD 0x14.
	if ops[0x04]+ops[0x05] == 0 || ops[0x0A]+ops[0x06] == 0 || ops[0x0C] == 0 || ops[0x13]+ops[0x14] == 0 {
		t.Fatalf("quickstart capture of %d packets: opcodes %v, want a SEND, a WRITE, a READ and an atomic", total, ops)
	}
}
