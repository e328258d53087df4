package engine

import "time"

// Stage timing is a diagnostic build: with the build tag rdmago_stages the
// engine times the parts of a post and of a received packet, so that a
// benchmark can tell which part got slower between two runs (for
// instance, WRITEs spread over 100,000 QPs against the same over 8: see
// BenchmarkQPScale). Without the tag the calls compile to nothing and
// ReadStageTimes returns zeros.
//
//	go test -tags rdmago_stages -run '^$' -bench QPScale -benchtime 1x -v ./verbs
//
// Each timed part costs two clock reads (~50 ns on a VM), so absolute
// times are inflated; compare stages between runs of the same build.

// StageTimesEnabled says whether this build times stages (rdmago_stages).
const StageTimesEnabled = stagesOn

// StageTime is the time spent in one stage and how many times it ran.
type StageTime struct {
	Total time.Duration
	Count uint64
}

// Per returns the stage's average time per count occurrences of
// something else (for instance per WRITE), or per run of the stage when
// count is 0.
func (s StageTime) Per(count uint64) time.Duration {
	if count == 0 {
		count = s.Count
	}
	if count == 0 {
		return 0
	}
	return s.Total / time.Duration(count)
}

// Sub returns s less an earlier reading of the same stage.
func (s StageTime) Sub(earlier StageTime) StageTime {
	return StageTime{Total: s.Total - earlier.Total, Count: s.Count - earlier.Count}
}

// StageTimes are the engine's stage totals since the process started,
// summed over every Host.
type StageTimes struct {
	// PostBuild is a post's work up to its packets' send: the requester
	// taking the WQE and making its packets (QP.sendNow before the send).
	PostBuild StageTime
	// PostSend is the send of a post's packets to the link.
	PostSend StageTime
	// RxRequest and RxResponse are a received request's and a received
	// response's (ACK, READ response) processing, each packet apart.
	RxRequest, RxResponse StageTime
	// RxFlush is the send of what a received batch made (ACKs, READ
	// responses).
	RxFlush StageTime
}

// Sub returns t less an earlier reading.
func (t StageTimes) Sub(earlier StageTimes) StageTimes {
	a, b := t.each(), earlier.each()
	for i := range a {
		*a[i] = a[i].Sub(*b[i])
	}
	return t
}

// Add returns t plus u (say, the totals of two runs).
func (t StageTimes) Add(u StageTimes) StageTimes {
	a, b := t.each(), u.each()
	for i := range a {
		a[i].Total += b[i].Total
		a[i].Count += b[i].Count
	}
	return t
}

// each lists t's stages.
func (t *StageTimes) each() [5]*StageTime {
	return [...]*StageTime{&t.PostBuild, &t.PostSend, &t.RxRequest, &t.RxResponse, &t.RxFlush}
}

// ReadStageTimes returns the stage totals so far.
func ReadStageTimes() StageTimes {
	return StageTimes{
		PostBuild:  stages.postBuild.read(),
		PostSend:   stages.postSend.read(),
		RxRequest:  stages.rxRequest.read(),
		RxResponse: stages.rxResponse.read(),
		RxFlush:    stages.rxFlush.read(),
	}
}

// stages holds the totals (empty without rdmago_stages).
var stages struct {
	postBuild, postSend, rxRequest, rxResponse, rxFlush stageClock
}
