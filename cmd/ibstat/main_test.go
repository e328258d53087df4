package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rdma-go/rdma-go/internal/testdev"
)

// TestUsageAndErrors: -h prints infiniband-diags' usage (recorded from
// ibstat 44.0) on stderr with status 2; a device that does not exist, or a
// port it lacks, ends with ibpanic and status 255, as ibstat does.
func TestUsageAndErrors(t *testing.T) {
	want, err := os.ReadFile("testdata/usage.golden")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"ibstat", "-h"}, &out, &errb); rc != 2 || out.Len() != 0 || errb.String() != string(want) {
		t.Fatalf("ibstat -h: rc %d, stdout %q, stderr:\n%s", rc, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := run([]string{"ibstat", "nosuchdev"}, &out, &errb); rc != 255 ||
		!regexp.MustCompile(`^ibpanic: \[\d+\] main: 'nosuchdev' IB device can't be found: Success\n$`).MatchString(errb.String()) {
		t.Fatalf("ibstat nosuchdev: rc %d, stderr %q", rc, errb.String())
	}
	dev := testdev.Device(t, "ibstat").Device().Name()
	out.Reset()
	errb.Reset()
	if rc := run([]string{"ibstat", dev, "2"}, &out, &errb); rc != 255 || !strings.Contains(errb.String(), "has no port number 2 - max (1)") {
		t.Fatalf("ibstat %s 2: rc %d, stderr %q", dev, rc, errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := run([]string{"ibstat", dev, "1"}, &out, &errb); rc != 0 || !strings.HasPrefix(out.String(), "CA: '"+dev+"'\nPort 1:\nState: Active\n") {
		t.Fatalf("ibstat %s 1: rc %d, stdout:\n%s", dev, rc, out.String())
	}
}
