package pingpong

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/rdma-go/rdma-go/internal/spin"
	"github.com/rdma-go/rdma-go/verbs"
)

// Kind selects the pingpong variant.
type Kind int

// The four pingpongs.
const (
	RC Kind = iota
	UC
	UD
	SRQ
)

// Work request ids, as the C tools use them.
const (
	recvWRID = 1
	sendWRID = 2
)

// udQKey is the Q_Key ud_pingpong uses on both sides.
const udQKey = 0x11111111

// grhLen is the GRH area at the start of every UD receive buffer.
const grhLen = 40

// pageSize is what -c uses to pick the bytes it checks.
const pageSize = 4096

// Config holds a pingpong's options, with the C tools' meanings.
type Config struct {
	Kind      Kind
	Host      string // server to connect to; empty for the server side
	Port      int
	Device    string // empty: first device
	IBPort    int
	Size      int
	MTU       verbs.MTU
	RxDepth   int
	Iters     int
	SL        int
	Events    bool
	GIDIndex  int // -1: none
	Check     bool
	NumQP     int // srq only
	Stdout    io.Writer
	Stderr    io.Writer
	Exchanged func() // test hook: called once the exchange is over
	// Listener, on the server side, is a listening socket to accept the
	// client on instead of listening on Port (tests hand in one bound to
	// port 0, so that the port is theirs before the client dials it).
	Listener net.Listener
}

// Defaults returns the C tools' defaults for kind.
func Defaults(k Kind) Config {
	c := Config{Kind: k, Port: 18515, IBPort: 1, Size: 4096, MTU: verbs.MTU1024, RxDepth: 500,
		Iters: 1000, GIDIndex: -1, NumQP: 16, Stdout: os.Stdout, Stderr: os.Stderr}
	if k == UD {
		c.Size = 1024
	}
	return c
}

// maxSRQQPs is srq_pingpong's compile-time MAX_QP: it always exchanges this
// many records, zeros for QPs beyond -q.
const maxSRQQPs = 256

// state is one run's resources.
type state struct {
	cfg     Config
	ctx     *verbs.Context
	pd      *verbs.PD
	mr      *verbs.MR
	buf     []byte
	ch      *verbs.CompChannel
	cq      *verbs.CQ
	srq     *verbs.SRQ
	qps     []*verbs.QP
	ah      *verbs.AH
	local   []Dest
	remote  []Dest
	routs   int // receives posted (per QP, or on the SRQ)
	gid     verbs.GID
	portMTU int
	roce    bool // the port's link layer is Ethernet (RoCE): GIDs are required
}

// Run runs one side of the pingpong. Errors carry the C tools' messages.
func Run(ctx context.Context, cfg Config) (err error) {
	s := &state{cfg: cfg}
	defer s.close()
	if err := s.open(); err != nil {
		return err
	}
	if err := s.setup(); err != nil {
		return err
	}
	for i := range s.qps {
		s.printAddr("local address: ", s.local[i])
	}
	records := s.local
	if cfg.Kind == SRQ {
		records = make([]Dest, maxSRQQPs)
		copy(records, s.local)
	}
	if cfg.Host != "" {
		if s.remote, err = ClientExchange(ctx, cfg.Host, cfg.Port, records); err != nil {
			if errors.Is(err, io.EOF) {
				// The server hung up after it read our address: it
				// could not connect to it, which without -g on RoCE is
				// the GID it did not get.
				return s.gidHint(verbs.AHAttr{IsGlobal: true}, err)
			}
			return err
		}
		if err := s.connect(); err != nil {
			return err
		}
	} else {
		ln := cfg.Listener
		if ln == nil {
			if ln, err = Listen(ctx, cfg.Port); err != nil {
				return err
			}
		}
		s.remote, err = ServerExchange(ctx, ln, len(records), func(r []Dest) ([]Dest, error) {
			s.remote = r
			return records, s.connect()
		})
		if err != nil {
			return err
		}
	}
	if cfg.Exchanged != nil {
		cfg.Exchanged()
	}
	for i := range s.qps {
		s.printAddr("remote address:", s.remote[i])
	}
	return s.dataPhase(ctx)
}

func (s *state) open() error {
	devs, err := verbs.Devices()
	if err != nil {
		return fmt.Errorf("Failed to get IB devices list: %w", err)
	}
	if len(devs) == 0 {
		return errors.New("No IB devices found")
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
			return fmt.Errorf("IB device %s not found", s.cfg.Device)
		}
	}
	if s.ctx, err = dev.Open(); err != nil {
		return fmt.Errorf("Couldn't get context for %s: %w", dev.Name(), err)
	}
	return nil
}

// recvLen is the size of a receive: UD receives get room for the GRH.
//
// Unlike the C tools, which send from and receive into the same bytes, the
// buffer has a receive area [0, recvLen) and a send area after it, so a
// message landing never races with one being sent (for example on another
// QP of srq_pingpong). Nothing of this is visible on the wire.
func (s *state) recvLen() int {
	if s.cfg.Kind == UD {
		return s.cfg.Size + grhLen
	}
	return s.cfg.Size
}

func (s *state) setup() error {
	cfg := s.cfg
	var err error
	port, err := s.ctx.QueryPort(uint8(cfg.IBPort))
	if err != nil {
		return fmt.Errorf("Couldn't get port info: %w", err)
	}
	s.portMTU = port.ActiveMTU.Bytes()
	s.roce = port.LinkLayer == verbs.LinkLayerEthernet
	if cfg.Kind == UD && cfg.Size > s.portMTU {
		return fmt.Errorf("Requested size larger than port MTU (%d)", s.portMTU)
	}
	nqp := 1
	if cfg.Kind == SRQ {
		nqp = cfg.NumQP
		if cfg.RxDepth < nqp {
			return fmt.Errorf("rx_depth %d is too small for %d QPs -- must have at least one receive per QP", cfg.RxDepth, nqp)
		}
	}
	s.buf = make([]byte, s.recvLen()+cfg.Size)
	for i := range s.buf {
		s.buf[i] = 0x7b
	}
	if cfg.Check && cfg.Host != "" {
		send := s.buf[s.recvLen():]
		for i := 0; i < cfg.Size; i += pageSize {
			send[i] = 0 // i / page_size % sizeof(char), as the C tool computes it
		}
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return fmt.Errorf("Couldn't allocate PD: %w", err)
	}
	if s.mr, err = s.pd.RegMR(s.buf, verbs.AccessLocalWrite); err != nil {
		return fmt.Errorf("Couldn't register MR: %w", err)
	}
	if cfg.Events {
		if s.ch, err = s.ctx.CreateCompChannel(); err != nil {
			return fmt.Errorf("Couldn't create completion channel: %w", err)
		}
	}
	cqe := cfg.RxDepth + 1
	if cfg.Kind == SRQ {
		cqe = cfg.RxDepth + nqp
	}
	if s.cq, err = s.ctx.CreateCQ(cqe, s.ch); err != nil {
		return fmt.Errorf("Couldn't create CQ: %w", err)
	}
	if cfg.Kind == SRQ {
		if s.srq, err = s.pd.CreateSRQ(verbs.SRQAttr{MaxWR: uint32(cfg.RxDepth), MaxSGE: 1}); err != nil {
			return fmt.Errorf("Couldn't create SRQ: %w", err)
		}
	}
	qt := map[Kind]verbs.QPType{RC: verbs.QPTypeRC, UC: verbs.QPTypeUC, UD: verbs.QPTypeUD, SRQ: verbs.QPTypeRC}[cfg.Kind]
	if cfg.GIDIndex >= 0 {
		if s.gid, err = s.ctx.QueryGID(uint8(cfg.IBPort), cfg.GIDIndex); err != nil {
			return fmt.Errorf("can't read sgid of index %d", cfg.GIDIndex)
		}
	}
	for i := 0; i < nqp; i++ {
		qp, err := s.pd.CreateQP(verbs.QPInitAttr{Type: qt, SendCQ: s.cq, RecvCQ: s.cq, SRQ: s.srq,
			Cap: verbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(cfg.RxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return fmt.Errorf("Couldn't create QP[%d]: %w", i, err)
		}
		s.qps = append(s.qps, qp)
		a := verbs.QPAttr{State: verbs.QPStateInit, PortNum: uint8(cfg.IBPort)}
		mask := verbs.QPAttrState | verbs.QPAttrPKeyIndex | verbs.QPAttrPort
		if cfg.Kind == UD {
			a.QKey, mask = udQKey, mask|verbs.QPAttrQKey
		} else {
			mask |= verbs.QPAttrAccessFlags
		}
		if err := qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to INIT: %w", err)
		}
		s.local = append(s.local, Dest{QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF, GID: s.gid})
	}
	if s.routs, err = s.postRecv(cfg.RxDepth); err != nil || s.routs < cfg.RxDepth {
		return fmt.Errorf("Couldn't post receive (%d)", s.routs)
	}
	// Armed before the peers connect, as the C tools do: a completion
	// queued before arming raises no event, so arming after the first
	// message may have arrived would wait for ever.
	if cfg.Events {
		if err := s.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("Couldn't request CQ notification")
		}
	}
	return nil
}

// postRecv posts n receives: on the SRQ, or on the one QP.
func (s *state) postRecv(n int) (int, error) {
	wr := verbs.RecvWR{ID: recvWRID, SGL: []verbs.SGE{s.mr.SGE(0, s.recvLen())}}
	for i := 0; i < n; i++ {
		var err error
		if s.srq != nil {
			err = s.srq.PostRecv(wr)
		} else {
			err = s.qps[0].PostRecv(wr)
		}
		if err != nil {
			return i, err
		}
	}
	return n, nil
}

// gidHint adds a hint to err when a connection failed on a RoCE port
// (Ethernet link layer) for want of a GID: this side was started without
// -g, or ah (the address vector that failed) has no GRH because the other
// side was. The C tool fails the same way, and says less.
func (s *state) gidHint(ah verbs.AHAttr, err error) error {
	who := ""
	switch {
	case !s.roce:
		return err
	case s.cfg.GIDIndex < 0:
		who = "this side"
	case !ah.IsGlobal:
		who = "the other side"
	default:
		return err
	}
	return fmt.Errorf("%w\nhint: %s was started without -g: on a RoCE device both sides need a GID, as in "+
		"-g 1 (on rxe and rdma-go devices GID 1 is the device's IP address; GID 0 is link-local)", err, who)
}

// connect moves the QPs to RTR and RTS aimed at the remote records (UD:
// creates the address handle instead).
func (s *state) connect() error {
	cfg := s.cfg
	for i, qp := range s.qps {
		r := s.remote[i]
		ah := verbs.AHAttr{DLID: r.LID, SL: uint8(cfg.SL), PortNum: uint8(cfg.IBPort)}
		gid := r.GID
		if cfg.Kind == SRQ {
			gid = s.remote[0].GID // the C tool uses record 0's GID for every QP
		}
		if !gid.InterfaceIDZero() {
			ah.IsGlobal = true
			ah.GRH = verbs.GlobalRoute{HopLimit: 1, DGID: gid, SGIDIndex: uint8(cfg.GIDIndex)}
		}
		if cfg.Kind == UD {
			if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTR}, verbs.QPAttrState); err != nil {
				return fmt.Errorf("Failed to modify QP to RTR: %w", err)
			}
			if err := qp.Modify(&verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: s.local[i].PSN}, verbs.QPAttrState|verbs.QPAttrSQPSN); err != nil {
				return fmt.Errorf("Failed to modify QP to RTS: %w", err)
			}
			ah.GRH.HopLimit = 64
			var err error
			if s.ah, err = s.pd.CreateAH(ah); err != nil {
				return s.gidHint(ah, fmt.Errorf("Failed to create AH: %w", err))
			}
			continue
		}
		a := verbs.QPAttr{State: verbs.QPStateRTR, PathMTU: cfg.MTU, DestQPN: r.QPN, RQPSN: r.PSN,
			MaxDestRDAtomic: 1, MinRNRTimer: 12, AH: ah}
		mask := verbs.QPAttrState | verbs.QPAttrAV | verbs.QPAttrPathMTU | verbs.QPAttrDestQPN | verbs.QPAttrRQPSN
		if cfg.Kind != UC {
			mask |= verbs.QPAttrMaxDestRDAtomic | verbs.QPAttrMinRNRTimer
		}
		if err := qp.Modify(&a, mask); err != nil {
			return s.gidHint(ah, fmt.Errorf("Failed to modify QP to RTR: %w", err))
		}
		a = verbs.QPAttr{State: verbs.QPStateRTS, SQPSN: s.local[i].PSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRDAtomic: 1}
		mask = verbs.QPAttrState | verbs.QPAttrSQPSN
		if cfg.Kind != UC {
			mask |= verbs.QPAttrTimeout | verbs.QPAttrRetryCnt | verbs.QPAttrRNRRetry | verbs.QPAttrMaxQPRDAtomic
		}
		if err := qp.Modify(&a, mask); err != nil {
			return fmt.Errorf("Failed to modify QP to RTS: %w", err)
		}
	}
	return nil
}

func (s *state) postSend(i int) error {
	wr := verbs.SendWR{ID: sendWRID, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGL: []verbs.SGE{s.mr.SGE(s.recvLen(), s.cfg.Size)}}
	if s.cfg.Kind == UD {
		wr.AH, wr.RemoteQPN, wr.RemoteQKey = s.ah, s.remote[0].QPN, udQKey
	}
	return s.qps[i].PostSend(wr)
}

// qpIndex finds the QP a completion belongs to.
func (s *state) qpIndex(qpn uint32) int {
	for i, qp := range s.qps {
		if qp.QPN() == qpn {
			return i
		}
	}
	return -1
}

// dataPhase is the C tools' loop: each QP sends its next message once its
// previous send and a receive have both completed.
func (s *state) dataPhase(ctx context.Context) error {
	cfg := s.cfg
	pending := make([]int, len(s.qps))
	for i := range s.qps {
		pending[i] = recvWRID
		if cfg.Host != "" {
			if err := s.postSend(i); err != nil {
				return fmt.Errorf("Couldn't post send")
			}
			pending[i] |= sendWRID
		}
	}
	refill := 1
	if cfg.Kind == SRQ {
		refill = len(s.qps)
	}
	start := time.Now()
	rcnt, scnt := 0, 0
	events := 0
	sp := spin.For(s.ctx)
	// Poll as many completions at once as the C tools do: rc/uc/ud_pingpong
	// two, srq_pingpong num_qp + rx_depth. With -e this matters: a CQ event
	// comes only for a completion added after the CQ was armed, so
	// completions left in the CQ after a short poll get no event of their
	// own, and with 16 QPs on one CQ both sides then wait for ever.
	nwc := 2
	if cfg.Kind == SRQ {
		nwc = len(s.qps) + cfg.RxDepth
	}
	wc := make([]verbs.WC, nwc)
	for rcnt < cfg.Iters || scnt < cfg.Iters {
		if cfg.Events {
			cq, err := s.ch.GetEvent(ctx)
			if err != nil {
				return fmt.Errorf("Failed to get cq_event: %w", err)
			}
			events++
			if cq != s.cq {
				return fmt.Errorf("CQ event for unknown CQ %p", cq)
			}
			if err := s.cq.ReqNotify(false); err != nil {
				return fmt.Errorf("Couldn't request CQ notification")
			}
		}
		n, err := s.cq.Poll(wc)
		if err != nil {
			return fmt.Errorf("poll CQ failed %d", n)
		}
		if n == 0 {
			// Poll without pause like the C tool (with -e, back to
			// the channel); on a soft device, once nothing has come
			// for a while, block until a completion arrives (package
			// spin).
			if !sp.Empty() || !sp.Block(time.Now()) {
				continue
			}
			sp.Reset()
			if err := s.cq.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		sp.Reset()
		for i := 0; i < n; i++ {
			w := &wc[i]
			if w.Status != verbs.WCSuccess {
				return fmt.Errorf("Failed status %s (%d) for wr_id %d", w.Status, int(w.Status), w.WRID)
			}
			q := s.qpIndex(w.QPNum)
			if q < 0 {
				return fmt.Errorf("Completion for unknown QPN 0x%06x", w.QPNum)
			}
			switch w.WRID {
			case sendWRID:
				scnt++
			case recvWRID:
				s.routs--
				if s.routs <= refill {
					k, _ := s.postRecv(cfg.RxDepth - s.routs)
					s.routs += k
					if s.routs < cfg.RxDepth {
						return fmt.Errorf("Couldn't post receive (%d)", s.routs)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("Completion for unknown wr_id %d", w.WRID)
			}
			pending[q] &^= int(w.WRID)
			if scnt < cfg.Iters && pending[q] == 0 {
				if err := s.postSend(q); err != nil {
					return fmt.Errorf("Couldn't post send")
				}
				pending[q] = recvWRID | sendWRID
			}
		}
	}
	elapsed := time.Since(start)
	if cfg.Events {
		s.cq.AckEvents(events)
	}
	usec := float64(elapsed.Microseconds())
	if usec <= 0 {
		usec = 1
	}
	bytes := int64(cfg.Size) * int64(cfg.Iters) * 2
	fmt.Fprintf(cfg.Stdout, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, float64(bytes)*8/usec)
	fmt.Fprintf(cfg.Stdout, "%d iters in %.2f seconds = %.2f usec/iter\n", cfg.Iters, usec/1e6, usec/float64(cfg.Iters))
	if cfg.Check && cfg.Host == "" {
		off := 0
		if cfg.Kind == UD {
			off = grhLen
		}
		for i := 0; i < cfg.Size; i += pageSize {
			if s.buf[off+i] != 0 {
				fmt.Fprintf(cfg.Stderr, "invalid data in page %d\n", i/pageSize)
			}
		}
	}
	return nil
}

func (s *state) printAddr(label string, d Dest) {
	sep := ","
	if s.cfg.Kind == UD && label == "local address: " {
		sep = ":"
	}
	fmt.Fprintf(s.cfg.Stdout, "  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", label, d.LID, d.QPN, d.PSN, sep, d.GID)
}

func (s *state) close() {
	for _, qp := range s.qps {
		qp.Destroy()
	}
	if s.ah != nil {
		s.ah.Destroy()
	}
	if s.srq != nil {
		s.srq.Destroy()
	}
	if s.mr != nil {
		s.mr.Dereg()
	}
	if s.cq != nil {
		s.cq.Destroy()
	}
	if s.ch != nil {
		s.ch.Destroy()
	}
	if s.pd != nil {
		s.pd.Dealloc()
	}
	if s.ctx != nil {
		s.ctx.Close()
	}
}
