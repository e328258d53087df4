package softdev

// readSizer sizes Poll's reads of the link. A read asking for more
// datagrams than the socket holds costs the kernel one more look at the
// empty queue: for a ping-pong, whose polls find one datagram each (a SEND
// and the ACK it carries, which UDP GRO hands over as one), about 4 % of a
// round trip in one process. So a read asks for as many as the last read
// that found any brought, and twice that after growAfter reads in a row
// filled their batch. A read that fills its batch cannot tell whether more
// was queued, so a ping-pong's full reads of one would double the size
// every other read: each doubling that the next read does not fill doubles
// growAfter instead (up to maxGrowAfter), and one it fills puts growAfter
// back to 1, so a stream's reads are back at full size within a few reads
// of growing again.
type readSizer struct {
	want, max int
	full      int  // reads in a row that filled a batch of want
	growAfter int  // full reads that make want grow
	grew      bool // want grew after the last read
}

// maxGrowAfter bounds growAfter: a stream that starts after a long
// ping-pong reads one datagram at a time for at most this many reads.
const maxGrowAfter = 64

func newReadSizer(max int) readSizer {
	return readSizer{want: max, max: max, growAfter: 1}
}

// observe records that a read asking for r.want datagrams got got.
func (r *readSizer) observe(got int) {
	switch {
	case got >= r.want:
		if r.grew {
			r.growAfter = 1
		}
		r.grew = false
		if r.full++; r.full >= r.growAfter && r.want < r.max {
			r.want, r.full, r.grew = min(2*r.want, r.max), 0, true
		}
	case got > 0:
		if r.grew {
			r.growAfter = min(2*r.growAfter, maxGrowAfter)
		}
		r.want, r.full, r.grew = got, 0, false
	}
}
