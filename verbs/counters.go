package verbs

// QueryPortCounters returns the counters of port (the soft device has one
// port, number 1): what Linux exposes as rxe's hw counters plus the soft
// device's own (see Counters).
func (c *Context) QueryPortCounters(port uint8) (Counters, error) {
	if err := c.check(); err != nil {
		return Counters{}, err
	}
	return c.p.QueryPortCounters(port)
}

// Counters returns the QP's counters. They stay readable after Destroy.
func (qp *QP) Counters() Counters { return qp.p.Counters() }
