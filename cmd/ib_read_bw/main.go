// Command ib_read_bw is perftest's ib_read_bw (6.06) over rdma-go: the same flags,
// defaults, TCP exchange and output, so it runs against the C tool across a
// network. See internal/perftest.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/perftest"
	"github.com/rdma-go/rdma-go/internal/perftest/plot"
)

func main() {
	os.Exit(perftest.Main(perftest.Test{Verb: perftest.Read, Kind: perftest.BW}, os.Args[1:], os.Stdout, os.Stderr,
		perftest.Options{Plot: plot.WritePNG}))
}
