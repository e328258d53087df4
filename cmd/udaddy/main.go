// Command udaddy is rdma-core's udaddy over rdma-go: UD endpoints resolved
// with SIDR through the RDMA connection manager that exchange
// SEND_WITH_IMM messages, with the C tool's flags, output and exit status,
// interoperating with it.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/cmtools"
)

func main() {
	os.Exit(cmtools.Udaddy(&cmtools.Env{Prog: os.Args[0], Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
