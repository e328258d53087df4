package rdmacm_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The kernel's rdma_cm has one event goroutine for the life of the
	// process, started by the first id on a kernel device.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/rdma-go/rdma-go/provider/kernel.(*CM).run"))
}
