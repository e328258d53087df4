//go:build !rdmago_stages

package engine

import "time"

const stagesOn = false

// Without rdmago_stages every call below is empty and inlined away.

func stageStart() time.Duration { return 0 }

type stageClock struct{}

func (*stageClock) done(time.Duration) {}

func (*stageClock) read() StageTime { return StageTime{} }

func rxDone([]byte, time.Duration) {}
