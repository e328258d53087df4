package verbs

import "unsafe"

// noescape returns s hidden from the compiler's escape analysis, as the
// runtime's and strings.Builder's noescape do for a pointer.
//
// The work requests and completions verbs hands a provider go through an
// interface call, and the compiler must assume that an interface method
// keeps what it is given: without this, every PostSend with a work request
// literal (and its SGL literal), every PostRecv and every Poll into a local
// array would move the caller's memory to the heap, one allocation per
// call. Providers never keep these slices or what they point to after the
// call returns (the provider package's contract), so the caller's memory
// may stay on its stack. The pointer is a pointer again before anything
// can move the stack (no call in between), and is only ever converted back
// to the object it came from; checkptr cannot follow the uintptr round
// trip, hence nocheckptr.
//
//go:nocheckptr
func noescape[T any](s []T) []T {
	u := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return unsafe.Slice((*T)(unsafe.Pointer(uintptr(unsafe.Pointer(nil))+u)), len(s))
}
