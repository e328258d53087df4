// Command ucmatose is rdma-core's ucmatose (cmatose.c) over rdma-go: RC
// connections through the RDMA connection manager that exchange a number
// of SENDs, with the C tool's flags, output and exit status, interoperating
// with it.
package main

import (
	"os"

	"github.com/rdma-go/rdma-go/internal/cmtools"
)

func main() {
	os.Exit(cmtools.Ucmatose(&cmtools.Env{Prog: os.Args[0], Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:]))
}
