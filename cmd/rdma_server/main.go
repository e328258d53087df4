// Command rdma_server is rdma-core's rdma_server over rdma-go: the
// rdma_verbs.h example server, one RC connection and a 16-byte message
// each way, with the C tool's flags, output and exit status,
// interoperating with it.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/cmtools"
)

func main() {
	os.Exit(cmtools.RdmaServer(&cmtools.Env{Prog: os.Args[0], Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
