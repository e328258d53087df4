// Command rdma_client is rdma-core's rdma_client over rdma-go: the
// rdma_verbs.h example client, rdma_server's peer, with the C tool's
// flags, output and exit status, interoperating with it.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/cmtools"
)

func main() {
	os.Exit(cmtools.RdmaClient(&cmtools.Env{Prog: os.Args[0], Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
