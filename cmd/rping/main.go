// Command rping is rdma-core's rping over rdma-go: a client and a server
// that connect through the RDMA connection manager and ping each other
// with RDMA READ, RDMA WRITE and SEND, with rping's flags, output and exit
// codes, interoperating with the C rping.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/cmtools"
)

func main() {
	os.Exit(cmtools.Rping(&cmtools.Env{Prog: os.Args[0], Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
