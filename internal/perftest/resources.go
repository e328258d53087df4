package perftest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/rdma-go/rdma-go/internal/spin"
	"github.com/rdma-go/rdma-go/verbs"
)

// udAddition is the GRH room at the head of every UD receive buffer.
const udAddition = 40

// udQKey is perftest's DEF_QKEY.
const udQKey = 0x11111111

// minRNRTimer is perftest's MIN_RNR_TIMER.
const minRNRTimer = 12

// cacheLineSize is what sysconf(_SC_LEVEL1_DCACHE_LINESIZE) gives, or 64.
func cacheLineSize() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return n
		}
	}
	return 64
}

// buffSize is BUFF_SIZE(size, cycle_buffer).
func buffSize(size uint64, cycle int) uint64 { return max(size, uint64(cycle)) }

// inc is INC(size, cache_line_size): the stride of consecutive messages.
func inc(size uint64, cl int) uint64 {
	if size > uint64(cl) {
		return roundUp(size, uint64(cl))
	}
	return uint64(cl)
}

// openDevice finds and opens the device (ctx_find_dev, ibv_open_device).
func (s *session) openDevice() error {
	devs, err := verbs.Devices()
	if err != nil || len(devs) == 0 {
		fmt.Fprintf(s.stderr, " Did not detect devices \n")
		fmt.Fprintf(s.stderr, " If device exists, check if driver is up\n")
		return errQuiet(" Unable to find the Infiniband/RoCE device")
	}
	dev := devs[0]
	if s.cfg.Device != "" {
		dev = nil
		for _, d := range devs {
			if d.Name() == s.cfg.Device {
				dev = d
			}
		}
		if dev == nil {
			fmt.Fprintf(s.stderr, "IB device %s not found\n", s.cfg.Device)
			return errQuiet(" Unable to find the Infiniband/RoCE device")
		}
	}
	s.dev = dev
	s.cfg.Device = dev.Name()
	if s.vctx, err = dev.Open(); err != nil {
		fmt.Fprintf(s.stderr, " Couldn't get context for the device: %v\n", err)
		return errQuiet("")
	}
	if s.ownsProcess {
		spin.OneP(s.vctx)
	}
	s.spinner = spin.For(s.vctx)
	s.turns = spin.TurnsFor(s.vctx, stampTime)
	return nil
}

// checkLink is check_link: the port must be active; Ethernet without -x
// gets GID index 0 (refined by pickGID); inline and outstanding reads are
// settled.
func (s *session) checkLink() error {
	c := s.cfg
	if c.EQNum > 1 && c.Events {
		fmt.Fprintf(s.stderr, " Completion vector specified is invalid\n Max completion vector = %d\n", 0)
		return errQuiet("")
	}
	pa, err := s.vctx.QueryPort(uint8(c.IBPort))
	if err != nil {
		fmt.Fprintf(s.stderr, " Unable to query port %d attributes\n", c.IBPort)
		fmt.Fprintf(s.stderr, " Couldn't set the link layer\n")
		return errQuiet(" Couldn't get context for the device")
	}
	if pa.State != verbs.PortActive {
		fmt.Fprintf(s.stderr, " Port number %d state is %s\n", c.IBPort, pa.State)
		return errQuiet(" Couldn't get context for the device")
	}
	s.port = pa
	s.linkType = "Ethernet"
	if pa.LinkLayer == verbs.LinkLayerInfiniBand {
		s.linkType = "IB"
	}
	if c.ForceLink != "" {
		s.linkType = c.ForceLink
	}
	s.gidIndex = c.GIDIndex
	if s.linkType == "Ethernet" && s.gidIndex == -1 {
		s.gidIndex = 0
	}
	// The soft device, like rxe, is no device perftest knows: inline is
	// off and an explicit -I only draws a warning.
	if c.Inline != defInline {
		fmt.Fprint(s.stdout, ResultLine)
		fmt.Fprintf(s.stderr, "Device not recognized to implement inline feature. Disabling it\n")
	}
	s.inline = 0
	s.outReads = 1
	if c.Test.Verb == Read || c.Test.Verb == Atomic {
		da, err := s.vctx.QueryDevice()
		if err != nil {
			return err
		}
		maxReads := da.MaxQPRDAtom
		s.outReads = c.OutReads
		if s.outReads > maxReads {
			fmt.Fprint(s.stdout, ResultLine)
			fmt.Fprintf(s.stderr, " Number of outstanding reads is above max = %d\n", maxReads)
			fmt.Fprintf(s.stderr, " Changing to that max value\n")
			s.outReads = maxReads
		} else if s.outReads <= 0 {
			s.outReads = maxReads
		}
	}
	if c.PKeyIndex > 0 {
		fmt.Fprint(s.stdout, ResultLine)
		fmt.Fprintf(s.stderr, " Specified PKey Index, %d, greater than allowed max, %d\n", c.PKeyIndex, 0)
		fmt.Fprintf(s.stderr, " Changing to 0\n")
		c.PKeyIndex = 0
	}
	return nil
}

// setMTU is set_mtu: the port's active MTU, or the requested one if valid
// and not above it.
func (s *session) setMTU() verbs.MTU {
	active := s.port.ActiveMTU
	if s.cfg.MTU == 0 {
		return active
	}
	m, ok := verbs.MTUFromBytes(s.cfg.MTU)
	if !ok {
		fmt.Fprintf(s.stderr, " Invalid MTU - %d \n", s.cfg.MTU)
		fmt.Fprintf(s.stderr, " Please choose mtu from {256,512,1024,2048,4096}\n")
		fmt.Fprintf(s.stderr, " Will run with the port active mtu - %d\n", active)
		return active
	}
	if m > active {
		fmt.Fprintf(s.stdout, "Requested mtu is higher than active mtu \n")
		fmt.Fprintf(s.stdout, "Changing to active mtu - %d\n", active)
		return active
	}
	return m
}

func isV4Mapped(g verbs.GID) bool {
	for i := 0; i < 10; i++ {
		if g[i] != 0 {
			return false
		}
	}
	return g[10] == 0xff && g[11] == 0xff
}

func isLinkLocal(g verbs.GID) bool { return g[0] == 0xfe && g[1]&0xc0 == 0x80 }

// pickGID is get_best_gid_index: prefer an IPv4-mapped GID (IPv6 with
// --ipv6) and, as perftest 6.29 does, a non-link-local one.
func (s *session) pickGID() error {
	if s.gidIndex == -1 {
		return nil
	}
	if s.cfg.UseGIDUser {
		g, err := s.vctx.QueryGID(uint8(s.cfg.IBPort), s.gidIndex)
		if err != nil {
			return fmt.Errorf(" Unable to set up socket connection: GID index %d: %v", s.gidIndex, err)
		}
		s.gid = g
		return nil
	}
	best := 0
	bg, err := s.vctx.QueryGID(uint8(s.cfg.IBPort), 0)
	if err != nil {
		return err
	}
	for i := 1; i < s.port.GIDTblLen; i++ {
		g, err := s.vctx.QueryGID(uint8(s.cfg.IBPort), i)
		if err != nil || g.IsZero() {
			continue
		}
		v4, bv4 := isV4Mapped(g), isV4Mapped(bg)
		switch {
		case v4 && !bv4 && !s.cfg.IPv6, !v4 && bv4 && s.cfg.IPv6:
			best, bg = i, g
		case v4 == bv4 && isLinkLocal(bg) && !isLinkLocal(g):
			best, bg = i, g
		}
	}
	s.gidIndex, s.gid = best, bg
	return nil
}

// createResources is ctx_init: PD, memory, CQs, QPs in INIT.
func (s *session) createResources() error {
	c := s.cfg
	t := c.Test
	var err error
	if s.pd, err = s.vctx.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	s.half = inc(buffSize(s.size, s.cycle), s.cacheLine)
	nq := c.NumQPs
	access := verbs.AccessLocalWrite
	switch t.Verb {
	case Write:
		access |= verbs.AccessRemoteWrite
	case Read:
		access |= verbs.AccessRemoteRead
	case Atomic:
		access |= verbs.AccessRemoteAtomic
	}
	if !c.NoPCIeRO {
		access |= verbs.AccessRelaxedOrdering
	}
	nbuf, perBuf := 1, s.half*2*uint64(nq)
	if c.MRPerQP {
		nbuf, perBuf = nq, s.half*2
	}
	if c.Conn == UD {
		perBuf += uint64(s.cacheLine)
	}
	for i := 0; i < nbuf; i++ {
		b := make([]byte, perBuf)
		if !(t.Verb == Write && t.Kind == LAT) {
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for k := 0; k < len(b); k += 8 {
				v := r.Uint64()
				for j := 0; j < 8 && k+j < len(b); j++ {
					b[k+j] = byte(v >> (8 * j))
				}
			}
		}
		mr, err := s.pd.RegMR(b, access)
		if err != nil {
			return fmt.Errorf("Couldn't allocate MR: %w", err)
		}
		s.bufs = append(s.bufs, b)
		s.mrs = append(s.mrs, mr)
	}
	if c.Events {
		if s.ch, err = s.vctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	cqe := c.TxDepth * nq
	if t.Verb == Send && c.Duplex {
		// ib_send_bw -b polls sends and receives on one CQ here.
		cqe += c.RxDepth * nq
	}
	if s.sendCQ, err = s.vctx.CreateCQ(cqe, s.ch); err != nil {
		return fmt.Errorf("Couldn't create CQ: %w", err)
	}
	s.recvCQ = s.sendCQ
	if t.Verb == Send && !c.Duplex {
		if s.recvCQ, err = s.vctx.CreateCQ(c.RxDepth*nq, s.ch); err != nil {
			return fmt.Errorf("Couldn't create a receiver CQ: %w", err)
		}
	}
	qt := map[ConnType]verbs.QPType{RC: verbs.QPTypeRC, UC: verbs.QPTypeUC, UD: verbs.QPTypeUD}[c.Conn]
	for i := 0; i < nq; i++ {
		qp, err := s.pd.CreateQP(verbs.QPInitAttr{Type: qt, SendCQ: s.sendCQ, RecvCQ: s.recvCQ,
			Cap: verbs.QPCap{MaxSendWR: uint32(c.TxDepth), MaxRecvWR: uint32(c.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1,
				MaxInlineData: uint32(s.inline)}})
		if err != nil {
			return fmt.Errorf("Couldn't create QP: %w", err)
		}
		s.qps = append(s.qps, qp)
		a := verbs.QPAttr{State: verbs.QPStateInit, PKeyIndex: uint16(c.PKeyIndex), PortNum: uint8(c.IBPort)}
		mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
		if c.Conn == UD {
			a.QKey, mask = udQKey, mask|verbs.QPAttrQKey
		} else {
			switch t.Verb {
			case Atomic:
				a.AccessFlags = verbs.AccessRemoteAtomic
			case Read:
				a.AccessFlags = verbs.AccessRemoteRead
			case Write:
				a.AccessFlags = verbs.AccessRemoteWrite
			case Send:
				a.AccessFlags = verbs.AccessRemoteWrite | verbs.AccessLocalWrite
			}
			mask |= verbs.QPAttrAccessFlags
		}
		if err := qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to INIT, ret=%v", err)
		}
	}
	return nil
}

// mrFor returns the MR and buffer holding QP i's memory and the offsets of
// its local (send) half and of the half the peer targets.
func (s *session) mrFor(i int) (mr *verbs.MR, buf []byte, local, remote uint64) {
	if s.cfg.MRPerQP {
		return s.mrs[i], s.bufs[i], 0, s.half
	}
	nq := uint64(s.cfg.NumQPs)
	return s.mrs[0], s.bufs[0], uint64(i) * s.half, (nq + uint64(i)) * s.half
}

// setUpConnection is set_up_connection: the local key records.
func (s *session) setUpConnection() {
	s.my = make([]Dest, len(s.qps))
	for i, qp := range s.qps {
		mr, _, _, remote := s.mrFor(i)
		s.my[i] = Dest{LID: s.port.LID, OutReads: uint32(s.outReads), QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF,
			RKey: mr.RKey(), VAddr: mr.Addr() + remote, GID: s.gid, GIDIndex: s.gidIndex}
	}
}

// connectQPs is ctx_connect: RTR then RTS for each QP, or the address
// handles of UD.
func (s *session) connectQPs() error {
	c := s.cfg
	for i, qp := range s.qps {
		r := &s.rem[i]
		ah := verbs.AHAttr{DLID: r.LID, SL: uint8(c.SL), PortNum: uint8(c.IBPort)}
		if c.DLID != 0 {
			ah.DLID = uint16(c.DLID)
		}
		if s.gidIndex != -1 {
			ah.IsGlobal = true
			ah.GRH = verbs.GlobalRoute{DGID: r.GID, SGIDIndex: uint8(s.gidIndex), HopLimit: 0xFF,
				TrafficClass: uint8(c.TClass)}
		}
		if c.Conn == UD {
			if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState); err != nil {
				return fmt.Errorf("Failed to modify QP %d to RTR: %v", qp.QPN(), err)
			}
			if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: s.my[i].PSN}, verbs.QPAttrState|verbs.QPAttrSQPSN); err != nil {
				return fmt.Errorf("Failed to modify QP to RTS: %v", err)
			}
			a, err := s.pd.CreateAH(ah)
			if err != nil {
				return fmt.Errorf("Failed to create AH: %v", err)
			}
			s.ahs = append(s.ahs, a)
			continue
		}
		a := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: s.mtu, DestQPN: r.QPN, RQPSN: r.PSN, AH: ah}
		mask := verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
		if c.Conn == RC {
			a.MaxDestRDAtomic, a.MinRNRTimer = uint8(min(s.my[i].OutReads, 255)), minRNRTimer
			mask |= verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
		}
		if err := qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP %d to RTR: %v", qp.QPN(), err)
		}
		a = verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: s.my[i].PSN}
		mask = verbs.QPAttrState | verbs.QPAttrSQPSN
		if c.Conn == RC {
			a.Timeout, a.RetryCnt, a.RNRRetry = uint8(c.QPTimeout), 7, 7
			a.MaxRDAtomic = uint8(min(r.OutReads, 255))
			mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic
		}
		if err := qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %v", err)
		}
	}
	return nil
}

func (s *session) destroy() {
	for _, qp := range s.qps {
		qp.Destroy()
	}
	for _, ah := range s.ahs {
		ah.Destroy()
	}
	for _, mr := range s.mrs {
		mr.Dereg()
	}
	if s.sendCQ != nil {
		s.sendCQ.Destroy()
	}
	if s.recvCQ != nil && s.recvCQ != s.sendCQ {
		s.recvCQ.Destroy()
	}
	if s.ch != nil {
		s.ch.Destroy()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	if s.vctx != nil {
		s.vctx.Close()
	}
}

// quietError is an error whose message perftest prints as is (after what
// was already printed); an empty one prints nothing.
type quietError struct{ msg string }

func (e quietError) Error() string { return e.msg }

func errQuiet(msg string) error { return quietError{msg} }

// exitCodeError carries a status other than 1.
type exitCodeError struct {
	err  error
	code int
}

func (e exitCodeError) Error() string { return e.err.Error() }
func (e exitCodeError) Unwrap() error { return e.err }

func withCode(err error, code int) error {
	if err == nil {
		return nil
	}
	var q exitCodeError
	if errors.As(err, &q) {
		return err
	}
	return exitCodeError{err, code}
}
