// Command ibv_ud_pingpong is rdma-core's ibv_ud_pingpong over rdma-go: the
// same flags, defaults, output, exit codes and TCP exchange, so it talks to
// the C tool across a network.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/pingpong"
)

func main() {
	os.Exit(pingpong.Main(pingpong.UD, os.Args[1:], os.Stdout, os.Stderr))
}
