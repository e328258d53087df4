//go:build linux

package kernel

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libName is the library the provider loads; libcName gives errno.
const (
	libName  = "libibverbs.so.1"
	libcName = "libc.so.6"
)

// lib holds the addresses of the libibverbs functions the provider calls.
// The inline verbs of verbs.h (ibv_post_send, ibv_post_recv, ibv_poll_cq,
// ibv_req_notify_cq) are not here: they are function pointers in each
// context's ops (see ops).
type lib struct {
	errnoLocation uintptr

	getDeviceList, freeDeviceList, getDeviceName, getDeviceGUID uintptr
	openDevice, closeDevice, queryDevice, queryPort, queryGID   uintptr
	queryPKey, allocPD, deallocPD, regMR, deregMR               uintptr
	createCompChannel, destroyCompChannel                       uintptr
	createCQ, destroyCQ, resizeCQ, getCQEvent, ackCQEvents      uintptr
	createQP, modifyQP, queryQP, destroyQP                      uintptr
	createSRQ, modifySRQ, querySRQ, destroySRQ                  uintptr
	createAH, destroyAH, getAsyncEvent, ackAsyncEvent, forkInit uintptr
}

// load opens libibverbs.so.1 and resolves every function the provider
// uses. dlsym returns the default version of a versioned symbol
// (IBVERBS_1.1 for the 1.0/1.1 pairs), which is what a C program linked
// against rdma-core 44's verbs.h calls.
func load() (*lib, error) {
	h, err := purego.Dlopen(libName, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", libName, err)
	}
	hc, err := purego.Dlopen(libcName, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", libcName, err)
	}
	l := &lib{}
	var firstErr error
	sym := func(h uintptr, p *uintptr, name string) {
		a, err := purego.Dlsym(h, name)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", name, err)
		}
		*p = a
	}
	sym(hc, &l.errnoLocation, "__errno_location")
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.getDeviceList, "ibv_get_device_list"}, {&l.freeDeviceList, "ibv_free_device_list"},
		{&l.getDeviceName, "ibv_get_device_name"}, {&l.getDeviceGUID, "ibv_get_device_guid"},
		{&l.openDevice, "ibv_open_device"}, {&l.closeDevice, "ibv_close_device"},
		{&l.queryDevice, "ibv_query_device"}, {&l.queryPort, "ibv_query_port"},
		{&l.queryGID, "ibv_query_gid"}, {&l.queryPKey, "ibv_query_pkey"},
		{&l.allocPD, "ibv_alloc_pd"}, {&l.deallocPD, "ibv_dealloc_pd"},
		{&l.regMR, "ibv_reg_mr"}, {&l.deregMR, "ibv_dereg_mr"},
		{&l.createCompChannel, "ibv_create_comp_channel"}, {&l.destroyCompChannel, "ibv_destroy_comp_channel"},
		{&l.createCQ, "ibv_create_cq"}, {&l.destroyCQ, "ibv_destroy_cq"}, {&l.resizeCQ, "ibv_resize_cq"},
		{&l.getCQEvent, "ibv_get_cq_event"}, {&l.ackCQEvents, "ibv_ack_cq_events"},
		{&l.createQP, "ibv_create_qp"}, {&l.modifyQP, "ibv_modify_qp"},
		{&l.queryQP, "ibv_query_qp"}, {&l.destroyQP, "ibv_destroy_qp"},
		{&l.createSRQ, "ibv_create_srq"}, {&l.modifySRQ, "ibv_modify_srq"},
		{&l.querySRQ, "ibv_query_srq"}, {&l.destroySRQ, "ibv_destroy_srq"},
		{&l.createAH, "ibv_create_ah"}, {&l.destroyAH, "ibv_destroy_ah"},
		{&l.getAsyncEvent, "ibv_get_async_event"}, {&l.ackAsyncEvent, "ibv_ack_async_event"},
		{&l.forkInit, "ibv_fork_init"},
	} {
		sym(h, s.p, s.name)
	}
	if firstErr != nil {
		return nil, fmt.Errorf("%s: %w", libName, firstErr)
	}
	return l, nil
}

// call calls fn with args and returns its result. Its callers convert
// pointers to uintptr in the argument list: go:uintptrescapes keeps the
// objects on the heap and alive through the call. Without it an object on
// a goroutine's stack could move when the stack grows on the way into C,
// and C would write into the old stack (seen: a new goroutine's first
// ibv_get_cq_event and rdma_get_cm_event results read back as zero).
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// callArgs calls fn with args, a slice the caller keeps (in a heap
// object): SyscallN's arguments escape (go:uintptrescapes), so a fresh
// variadic slice would be allocated on every call.
func callArgs(fn uintptr, args []uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// callErrno calls fn and returns its result and the errno it left. Only
// for functions that report failure through errno (NULL returns); the
// thread is locked so that errno is read on the thread fn ran on.
//
//go:uintptrescapes
func (l *lib) callErrno(fn uintptr, args ...uintptr) (uintptr, syscall.Errno) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	loc := call(l.errnoLocation)
	*(*int32)(cptr(loc)) = 0
	r := call(fn, args...)
	return r, syscall.Errno(*(*int32)(cptr(loc)))
}

// cptr turns an address of C memory into a pointer. C memory does not
// move, and the Go garbage collector ignores pointers outside its heap.
func cptr(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }

// gostring copies a NUL-terminated C string.
func gostring(p uintptr) string {
	if p == 0 {
		return ""
	}
	n := 0
	for *(*byte)(cptr(p + uintptr(n))) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(cptr(p)), n))
}
