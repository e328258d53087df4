package engine

import (
	"errors"
	"fmt"
)

// The General Services Interface (docs/spec/cm-mad.md §1): management datagrams
// travel between QP1s as UD SEND-only packets with the well-known Q_Key.
const (
	// GSIQPN is the QP number of the General Services Interface.
	GSIQPN = 1
	// GSIQKey is the Q_Key of QP1 (IB_QP1_QKEY). A send work request on
	// QP1 whose RemoteQKey has bit 31 set uses it.
	GSIQKey = 0x80010000
)

// ErrGSIExists is returned by CreateGSI when the host already has QP1.
var ErrGSIExists = errors.New("engine: the GSI QP (QP1) already exists")

// CreateGSI creates the host's GSI QP: a UD QP in RESET numbered 1 whose
// Q_Key is already GSIQKey. It receives every packet addressed to QPN 1 and
// sends with DETH source QP 1. Take it to RTS like any UD QP (the Q_Key need
// not be set again); destroy it with DestroyQP. A host has at most one.
func (h *Host) CreateGSI(cfg QPConfig) (*QP, error) {
	if cfg.Type != QPTypeUD {
		return nil, fmt.Errorf("engine: the GSI QP must be UD, not type %d", cfg.Type)
	}
	qp := new(QP)
	if err := h.initQP(qp, cfg); err != nil {
		return nil, err
	}
	qp.qpn = GSIQPN
	qp.attr.QKey = GSIQKey
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.qps.get(GSIQPN) != nil {
		return nil, ErrGSIExists
	}
	h.qps.set(GSIQPN, qp)
	return qp, nil
}
