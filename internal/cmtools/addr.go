package cmtools

import (
	"context"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// afIB is AF_IB: -f gid asks for it; getaddrinfo refuses the family.
const afIB = 27

// rdmaGetAddrInfo is rdma_getaddrinfo: the first result, or the value it
// returns on failure (-1 when no RDMA device exists, an EAI_* code for a
// name that does not resolve).
func rdmaGetAddrInfo(ctx context.Context, node, service string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, int) {
	if ds, err := verbs.Devices(); err != nil || len(ds) == 0 {
		return nil, -1 // ucma_init: ENODEV
	}
	if hints != nil && hints.Family == afIB {
		return nil, eaiFamily
	}
	res, err := rdmacm.GetAddrInfo(ctx, node, service, hints)
	if err != nil {
		return nil, gaiCode(err)
	}
	return res[0], 0
}

// getRDMAAddr is common.c's get_rdma_addr: for a passive lookup, src (or
// every address) and port; otherwise dst and port, with src (if given)
// resolved first as the source address.
func getRDMAAddr(ctx context.Context, src, dst *string, port string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, int) {
	if hints.Flags&rdmacm.RAIPassive != 0 {
		node := ""
		if src != nil {
			node = *src
		}
		return rdmaGetAddrInfo(ctx, node, port, hints)
	}
	h := *hints
	if src != nil {
		h.Flags |= rdmacm.RAIPassive
		res, code := rdmaGetAddrInfo(ctx, *src, "", &h)
		if code != 0 {
			return nil, code
		}
		h.SrcAddr = res.SrcAddr
		h.Flags &^= rdmacm.RAIPassive
	}
	node := ""
	if dst != nil {
		node = *dst
	}
	return rdmaGetAddrInfo(ctx, node, port, &h)
}

// parseAddrFormat applies -f (name, ip, gid) to hints as cmatose.c and
// udaddy.c do; it reports whether the format was known.
func parseAddrFormat(v string, hints *rdmacm.AddrInfo) bool {
	switch {
	case hasPrefixFold(v, "ip"):
		hints.Flags = rdmacm.RAINumericHost
	case hasPrefixFold(v, "gid"):
		hints.Flags = rdmacm.RAINumericHost | rdmacm.RAIFamily
		hints.Family = afIB
	case !hasPrefixFold(v, "name"):
		return false
	}
	return true
}

// hasPrefixFold is strncasecmp(prefix, s, len(prefix)) == 0.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// pollCount polls cq until n completions have been taken (cmatose's and
// udaddy's poll_cqs loop), waiting on the CQ between polls; first, if
// set, sees the first batch. It fails only when polling fails or ctx ends.
func pollCount(ctx context.Context, cq *verbs.CQ, n int, first func(*verbs.WC) error) error {
	var wc [8]verbs.WC
	for done := 0; done < n; {
		k, err := cq.Poll(wc[:])
		if err != nil {
			return err
		}
		if k > 0 && first != nil {
			if err := first(&wc[0]); err != nil {
				return err
			}
		}
		done += k
		if k == 0 {
			if err := cq.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
