package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// devSeq makes every test device's name unique in the process (a name can
// be registered once), so that -count=N works.
var devSeq atomic.Int64

// testOptions gives the example soft devices on loopback addresses that
// no other test process takes.
func testOptions() *exdev.Options {
	return &exdev.Options{Add: func(name string) (*verbs.Device, error) {
		return verbs.AddDevice(fmt.Sprintf("%s%d", name, devSeq.Add(1)), testdev.Addr())
	}}
}

// rateLine matches one mode's line and captures its counts and last WR.
var rateLine = regexp.MustCompile(`^\((a|b|c)\) .*: +(\d+) PostSend calls, +(\d+) completions, .* ms, .* k WR/s, .*x vs \(a\); data verified through WR (\d+)$`)

// TestBatch runs the example with a WRITE count that is not a multiple of
// the list length (the last list is short) and checks, for each of the
// three modes, the PostSend calls and completions it reports and that the
// data was verified. It asserts nothing about speed.
func TestBatch(t *testing.T) {
	for _, tc := range []struct{ n, size int }{{1000, 64}, {37, 8}} {
		t.Run(fmt.Sprintf("n=%d,s=%d", tc.n, tc.size), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(&out, testOptions(), config{N: tc.n, Size: tc.size}); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			t.Logf("output:\n%s", out.String())
			lists := (tc.n + listLen - 1) / listLen
			want := map[string][2]int{ // PostSend calls, completions
				"a": {tc.n, tc.n},
				"b": {lists, tc.n},
				"c": {lists, lists},
			}
			seen := map[string]bool{}
			for line := range strings.SplitSeq(out.String(), "\n") {
				m := rateLine.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				posts, _ := strconv.Atoi(m[2])
				comps, _ := strconv.Atoi(m[3])
				last, _ := strconv.Atoi(m[4])
				if w := want[m[1]]; posts != w[0] || comps != w[1] {
					t.Errorf("mode (%s): %d PostSend calls and %d completions, want %d and %d", m[1], posts, comps, w[0], w[1])
				}
				if last != tc.n-1 {
					t.Errorf("mode (%s): data verified up to WR %d, want %d", m[1], last, tc.n-1)
				}
				seen[m[1]] = true
			}
			if len(seen) != 3 {
				t.Errorf("rate lines for modes %v, want (a), (b) and (c)", seen)
			}
		})
	}
}

// TestBatchBadFlags checks that sizes the example cannot use are refused
// with an error that names the flag.
func TestBatchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		want string
	}{
		{config{N: 10, Size: 4}, "-s 4:"},
		{config{N: 0, Size: 64}, "-n 0:"},
		{config{N: 10, Size: 1 << 20}, "-s 1048576:"},
	} {
		err := run(&bytes.Buffer{}, testOptions(), tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("run(%+v) = %v, want an error starting %q", tc.cfg, err, tc.want)
		}
	}
}

// TestVerifyCatchesBadData checks that verify, which every mode's "data
// verified" rests on, fails on a target whose last WRITE is missing or
// whose bytes are corrupt.
func TestVerifyCatchesBadData(t *testing.T) {
	cfg := config{N: 300, Size: 16}
	target := make([]byte, slots*cfg.Size)
	for i := range cfg.N {
		stamp(target[i%slots*cfg.Size:][:cfg.Size], uint64(i))
	}
	if last, err := verify(target, cfg); err != nil || last != cfg.N-1 {
		t.Fatalf("verify of a correct target = %d, %v; want %d, nil", last, err, cfg.N-1)
	}
	stale := bytes.Clone(target)
	stamp(stale[10*cfg.Size:][:cfg.Size], 10) // WR 266's slot holds WR 10
	if _, err := verify(stale, cfg); err == nil {
		t.Error("verify accepted a slot that missed its last WRITE")
	}
	corrupt := bytes.Clone(target)
	corrupt[5*cfg.Size+12] ^= 1
	if _, err := verify(corrupt, cfg); err == nil {
		t.Error("verify accepted a corrupted byte")
	}
}
