package engine

import (
	"testing"
	"unsafe"
)

// TestPostBytesCoverPost: every field a post reads lies in the first
// PostBytes of a QP, which a provider asks the CPU for at once (see
// PostBytes). A field moved past it makes a post to a QP not used for a
// while wait for one more cache miss.
func TestPostBytesCoverPost(t *testing.T) {
	var qp QP
	base := uintptr(unsafe.Pointer(&qp))
	for _, f := range []struct {
		name string
		p    unsafe.Pointer
		size uintptr
	}{
		{"sq1", unsafe.Pointer(&qp.sq1), unsafe.Sizeof(qp.sq1)},
		{"sq", unsafe.Pointer(&qp.sq), unsafe.Sizeof(qp.sq)},
		{"sendCQ", unsafe.Pointer(&qp.sendCQ), unsafe.Sizeof(qp.sendCQ)},
		{"sends", unsafe.Pointer(&qp.sends), unsafe.Sizeof(qp.sends)},
		{"req", unsafe.Pointer(&qp.req), unsafe.Sizeof(qp.req)},
		{"deadline", unsafe.Pointer(&qp.deadline), unsafe.Sizeof(qp.deadline)},
		{"mu", unsafe.Pointer(&qp.mu), unsafe.Sizeof(qp.mu)},
		{"st", unsafe.Pointer(&qp.st), unsafe.Sizeof(qp.st)},
		{"sigAll", unsafe.Pointer(&qp.sigAll), unsafe.Sizeof(qp.sigAll)},
		{"ackPending", unsafe.Pointer(&qp.ackPending), unsafe.Sizeof(qp.ackPending)},
		{"rung", unsafe.Pointer(&qp.rung), unsafe.Sizeof(qp.rung)},
		{"sport", unsafe.Pointer(&qp.sport), unsafe.Sizeof(qp.sport)},
		{"host", unsafe.Pointer(&qp.host), unsafe.Sizeof(qp.host)},
		{"mtu", unsafe.Pointer(&qp.mtu), unsafe.Sizeof(qp.mtu)},
		{"icrc", unsafe.Pointer(&qp.icrc), unsafe.Sizeof(qp.icrc)},
		{"sent", unsafe.Pointer(&qp.sent), unsafe.Sizeof(qp.sent)},
		{"keys", unsafe.Pointer(&qp.keys), unsafe.Sizeof(qp.keys)},
		{"onDeadline", unsafe.Pointer(&qp.onDeadline), unsafe.Sizeof(qp.onDeadline)},
		{"attr", unsafe.Pointer(&qp.attr), unsafe.Sizeof(qp.attr)},
	} {
		if end := uintptr(f.p) - base + f.size; end > PostBytes {
			t.Errorf("QP.%s ends %d bytes into the QP, past PostBytes (%d)", f.name, end, PostBytes)
		}
	}
	if PostBytes > unsafe.Sizeof(qp) {
		t.Errorf("PostBytes %d, past the QP's %d bytes", PostBytes, unsafe.Sizeof(qp))
	}
}
