package main

import (
	"bytes"
	"fmt"
	"regexp"
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

// TestRDMAStream runs the example and checks its report: both GETs
// answered, the POST body echoed with matching SHA-256 sums, all three
// requests on one kept-alive rdmanet connection, a clean shutdown, and
// every gob request answered on a connection of network "rdma".
func TestRDMAStream(t *testing.T) {
	for _, cfg := range []config{{BodySize: 1 << 20, Messages: 50}, {BodySize: 0, Messages: 1}, {BodySize: 3<<20 + 7, Messages: 10}} {
		t.Run(fmt.Sprintf("size=%d,m=%d", cfg.BodySize, cfg.Messages), func(t *testing.T) {
			var out bytes.Buffer
			if err := run(&out, testOptions(), cfg); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			t.Logf("output:\n%s", out.String())
			for _, re := range []string{
				`(?m)^GET /hello: "hello, 127\.[0-9.]+:\d+, from an HTTP server on 127\.[0-9.]+:\d+"$`,
				fmt.Sprintf(`(?m)^POST /echo: %d bytes there and back in .* ms, SHA-256 [0-9a-f]{16}… matches on both ends$`, cfg.BodySize),
				`(?m)^GET /hello again: "hello, `,
				`(?m)^http: 3 requests over 1 rdmanet connection\(s\) .*; server shut down cleanly$`,
				`(?m)^gob: connected 127\.[0-9.]+:\d+ -> 127\.[0-9.]+:\d+ \(network "rdma"\), RC QP 0x[0-9a-f]{6} -> 0x[0-9a-f]{6}$`,
				fmt.Sprintf(`(?m)^gob: %d requests answered and checked in `, cfg.Messages),
				`(?m)^gob: connection closed by both ends$`,
			} {
				if !regexp.MustCompile(re).MatchString(out.String()) {
					t.Errorf("output has no line matching %s", re)
				}
			}
		})
	}
}

// TestRDMAStreamBadFlags checks that values the example cannot use are
// refused with an error naming the flag.
func TestRDMAStreamBadFlags(t *testing.T) {
	for _, tc := range []struct {
		cfg  config
		want string
	}{
		{config{BodySize: -1, Messages: 10}, "-size -1:"},
		{config{BodySize: maxBody + 1, Messages: 10}, fmt.Sprintf("-size %d:", maxBody+1)},
		{config{BodySize: 10, Messages: 0}, "-m 0:"},
	} {
		err := run(&bytes.Buffer{}, testOptions(), tc.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("run(%+v) = %v, want an error starting %q", tc.cfg, err, tc.want)
		}
	}
}
