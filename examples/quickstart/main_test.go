package main

import (
	"path/filepath"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/link/capture"
	"github.com/rdma-go/rdma-go/verbs"
)

// envCaptureUsed says a run of TestQuickstartCapture in this process
// already had the capture started by RDMA_GO_PCAP.
var envCaptureUsed bool

// TestQuickstartCapture runs the quickstart with RDMA_GO_PCAP set: it
// succeeds, and its capture holds its SEND, WRITE, READ and atomic, every
// packet with a valid ICRC and, where tshark is installed, decoded by
// Wireshark with none malformed.
func TestQuickstartCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quickstart.pcap")
	if !envCaptureUsed {
		t.Setenv(capture.Env, path)
		envCaptureUsed = true
	} else if err := capture.StartFile(path); err != nil {
		// The variable is read once per process: a run again (go test
		// -count N) starts the capture as code would.
		t.Fatal(err)
	}
	// Devices on addresses of their own (testdev.Addr), not the
	// automatically addressed loopback ones that other test processes
	// take and leave.
	add := func(name string) (*verbs.Device, error) { return verbs.AddDevice(testdev.Name(name), testdev.Addr()) }
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
