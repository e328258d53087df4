package engine

import "sync/atomic"

// qpTable maps QP numbers (24 bits) to QPs. The receive path looks up a QP
// for every packet, so a look-up takes no lock and touches two words: a
// directory entry (the directory stays in cache) and the QP's slot in a
// page of 4096. With 100,000 QPs spread over a hash map, each look-up cost
// a few cache misses and a shared read lock's atomic counter; WRITEs spread
// over all QPs ran measurably slower than over a few for that alone.
//
// Writers (create, destroy) are serialised by the Host's mutex. Pages are
// made on first use and kept: 32 KiB for every 4096 consecutive numbers in
// use, and a device numbers its QPs consecutively.
type qpTable struct {
	dir [1 << (24 - qpPageBits)]atomic.Pointer[qpPage]
}

const qpPageBits = 12

type qpPage [1 << qpPageBits]atomic.Pointer[QP]

// get returns the QP numbered qpn, or nil. Safe without any lock.
func (t *qpTable) get(qpn uint32) *QP {
	p := t.dir[(qpn>>qpPageBits)&(1<<(24-qpPageBits)-1)].Load()
	if p == nil {
		return nil
	}
	return p[qpn&(1<<qpPageBits-1)].Load()
}

// set stores qp under qpn (nil removes it). The caller serialises writers.
func (t *qpTable) set(qpn uint32, qp *QP) {
	d := &t.dir[(qpn>>qpPageBits)&(1<<(24-qpPageBits)-1)]
	p := d.Load()
	if p == nil {
		if qp == nil {
			return
		}
		p = new(qpPage)
		d.Store(p)
	}
	p[qpn&(1<<qpPageBits-1)].Store(qp)
}
