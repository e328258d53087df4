package plot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-go/rdma-go/internal/perftest"
)

func TestWritePNG(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []*perftest.Result{
		{Tool: "ib_write_bw", Role: "client", BWUnit: "MiB/s", Test: perftest.Test{Verb: perftest.Write, Kind: perftest.BW},
			Rows: []perftest.Row{{Bytes: 2, BWAvg: 1, BWPeak: 2}, {Bytes: 4, BWAvg: 2.5, BWPeak: 3}, {Bytes: 8, BWAvg: 5}}},
		{Tool: "ib_send_lat", Role: "server", Test: perftest.Test{Verb: perftest.Send, Kind: perftest.LAT},
			Rows: []perftest.Row{{Bytes: 2, TTypical: 10, TAvg: 11, P99: 20}, {Bytes: 4, TTypical: 12, TAvg: 12, P99: 25}}},
	} {
		path := filepath.Join(dir, r.Tool+".png")
		if err := WritePNG(path, r); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("%s: not a PNG (%v)", path, err)
		}
	}
	if err := WritePNG(filepath.Join(dir, "x.png"), &perftest.Result{}); err == nil {
		t.Fatal("empty result plotted")
	}
}
