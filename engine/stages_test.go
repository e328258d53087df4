package engine

import (
	"testing"
	"time"
)

// TestStageTimes sends one WRITE of three packets and its ACK between two
// hosts and checks the stages counted what happened: with rdmago_stages,
// at least one post made and sent, three requests and one response
// received, and a send after each received batch; without it, nothing.
func TestStageTimes(t *testing.T) {
	p := newPair(t, AccessRemoteWrite)
	before := ReadStageTimes()
	must(t, p.a.PostSend(p.now, &SendWR{ID: 1, Op: WRWrite, Flags: SendSignaled, SGL: p.sge(p.mra, 0, 3000),
		RemoteAddr: p.mrb.Addr, RKey: p.mrb.RKey}))
	p.run(time.Second)
	if c := p.acq.take(); len(c) != 1 || c[0].Status != StatusSuccess {
		t.Fatalf("completions %+v", c)
	}
	d := ReadStageTimes().Sub(before)
	if !StageTimesEnabled {
		if d != (StageTimes{}) {
			t.Fatalf("stage times counted without rdmago_stages: %+v", d)
		}
		return
	}
	for _, c := range []struct {
		name string
		s    StageTime
		min  uint64
	}{
		{"PostBuild", d.PostBuild, 1}, {"PostSend", d.PostSend, 1},
		{"RxRequest", d.RxRequest, 3}, {"RxResponse", d.RxResponse, 1}, {"RxFlush", d.RxFlush, 2},
	} {
		// Other tests of the package may run meanwhile: at least.
		if c.s.Count < c.min || c.s.Total <= 0 {
			t.Errorf("%s: %d runs in %v, want at least %d and some time", c.name, c.s.Count, c.s.Total, c.min)
		}
	}
}

func TestStageTimePer(t *testing.T) {
	s := StageTime{Total: 900 * time.Nanosecond, Count: 3}
	if got := s.Per(0); got != 300*time.Nanosecond {
		t.Errorf("Per(0) = %v, want 300ns", got)
	}
	if got := s.Per(9); got != 100*time.Nanosecond {
		t.Errorf("Per(9) = %v, want 100ns", got)
	}
	if got := (StageTime{}).Per(0); got != 0 {
		t.Errorf("zero Per(0) = %v", got)
	}
	if got := s.Sub(StageTime{Total: 100, Count: 1}); got != (StageTime{Total: 800, Count: 2}) {
		t.Errorf("Sub = %+v", got)
	}
	u := StageTimes{PostBuild: s, RxFlush: StageTime{Total: 5, Count: 1}}
	if got := u.Add(u).Sub(u); got != u {
		t.Errorf("Add then Sub = %+v, want %+v", got, u)
	}
	if got := u.Add(u).RxFlush; got != (StageTime{Total: 10, Count: 2}) {
		t.Errorf("Add: RxFlush %+v", got)
	}
}
