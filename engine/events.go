package engine

// EventType is an asynchronous event type; values equal ibv_event_type.
type EventType uint8

// Asynchronous events the engine raises.
const (
	EventCQErr            EventType = 0
	EventQPFatal          EventType = 1
	EventQPReqErr         EventType = 2
	EventQPAccessErr      EventType = 3
	EventCommEst          EventType = 4
	EventSRQErr           EventType = 14
	EventSRQLimitReached  EventType = 15
	EventQPLastWQEReached EventType = 16
)

// Event is an asynchronous event for one QP, SRQ or CQ.
type Event struct {
	Type EventType
	QP   *QP
	SRQ  *SRQ
	CQ   CompletionQueue
}

// event hands ev to HostConfig.OnEvent, if set. It may be called with QP or
// SRQ locks held: the hook must only queue the event.
func (h *Host) event(ev Event) {
	if h.cfg.OnEvent != nil {
		h.cfg.OnEvent(ev)
	}
}
