package verbs_test

import (
	"github.com/rdma-go/rdma-go/engine"
	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// stats returns the live counters of the soft device c is open on.
func stats(c *verbs.Context) *engine.Stats { return c.Provider().(*soft.Context).Stats() }
