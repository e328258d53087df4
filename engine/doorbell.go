package engine

import "time"

// The doorbell: posts that wait for the device's next flush, so that a
// stream's work requests, on one QP or many, leave in one batch.

// PostSendDeferred queues work requests as PostSendList does but, while
// earlier ones are still outstanding, leaves sending them to the next
// Host.FlushPosts (or to anything else that moves the QP's send queue: an
// ACK that opens its window, a later PostSendList). A caller that knows it
// will flush soon — a device whose application is polling a CQ — lets a
// stream's posts, on one QP or many, go out in one batch: one system call
// and, for a run of same-size packets, one GSO send, where each
// PostSendList makes its own. A post to an idle queue (a ping-pong's next
// message) is sent at once: nothing would join it. deferred reports
// whether work requests now wait for FlushPosts.
func (qp *QP) PostSendDeferred(now time.Time, wrs []SendWR) (n int, deferred bool, err error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	idle := qp.sq.empty()
	n, err = qp.queueSends(now, wrs)
	if idle {
		qp.sendNow(now)
		return n, false, err
	}
	if n > 0 && !qp.rung {
		qp.rung = true
		h := qp.host
		h.dbMu.Lock()
		h.doorbell = append(h.doorbell, qp)
		h.dbMu.Unlock()
	}
	return n, qp.rung, err
}

// FlushPosts sends what PostSendDeferred queued, every QP's in one batch.
func (h *Host) FlushPosts(now time.Time) {
	h.dbFlush.Lock()
	defer h.dbFlush.Unlock()
	h.dbMu.Lock()
	qps := h.doorbell
	h.doorbell = h.dbSpare[:0]
	h.dbMu.Unlock()
	if len(qps) == 0 {
		h.dbSpare = qps
		return
	}
	tx := h.getTx()
	for _, qp := range qps {
		qp.mu.Lock()
		qp.rung = false
		qp.startSends(now, tx)
		qp.mu.Unlock()
	}
	h.flush(tx)
	h.putTx(tx)
	clear(qps)
	h.dbSpare = qps[:0]
}
