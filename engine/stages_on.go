//go:build rdmago_stages

package engine

import (
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/wire"
)

const stagesOn = true

// stageEpoch is what stageStart measures from.
var stageEpoch = time.Now()

// stageStart returns the time a stage starts.
func stageStart() time.Duration { return time.Since(stageEpoch) }

// stageClock accumulates one stage.
type stageClock struct{ total, count atomic.Int64 }

// done adds the time since t0 to the stage.
func (c *stageClock) done(t0 time.Duration) {
	c.total.Add(int64(time.Since(stageEpoch) - t0))
	c.count.Add(1)
}

func (c *stageClock) read() StageTime {
	return StageTime{Total: time.Duration(c.total.Load()), Count: uint64(c.count.Load())}
}

// rxDone adds the time since t0 to the received request or response
// stage, as the datagram's BTH says.
func rxDone(buf []byte, t0 time.Duration) {
	if len(buf) > 0 && wire.Opcode(buf[0]).Flags()&wire.IsResponse != 0 {
		stages.rxResponse.done(t0)
		return
	}
	stages.rxRequest.done(t0)
}
