//go:build cgo && linux && rdmago_capi

package main

// #include "capi.h"
import "C"

import (
	"sync"

	"github.com/rdma-go/rdma-go/verbs"
)

// cstrings holds the C copies of the phrases the *_str functions return:
// one per phrase, never freed, as static strings are.
var cstrings sync.Map // string -> *C.char

func cstring(s string) *C.char {
	if p, ok := cstrings.Load(s); ok {
		return p.(*C.char)
	}
	p, _ := cstrings.LoadOrStore(s, C.CString(s))
	return p.(*C.char)
}

//export rgo_ibv_wc_status_str
func rgo_ibv_wc_status_str(s C.enum_ibv_wc_status) *C.char {
	return cstring(verbs.WCStatus(s).String())
}

//export rgo_ibv_event_type_str
func rgo_ibv_event_type_str(e C.enum_ibv_event_type) *C.char {
	return cstring(verbs.EventType(e).String())
}

//export rgo_ibv_node_type_str
func rgo_ibv_node_type_str(n C.enum_ibv_node_type) *C.char {
	return cstring(verbs.NodeType(n).String())
}

//export rgo_ibv_port_state_str
func rgo_ibv_port_state_str(s C.enum_ibv_port_state) *C.char {
	if s < C.IBV_PORT_NOP || s > C.IBV_PORT_ACTIVE_DEFER {
		return cstring("unknown")
	}
	return cstring(verbs.PortState(s).String())
}
