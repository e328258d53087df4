package perftest

import (
	"encoding/json"
	"io"
	"runtime"

	"github.com/rdma-go/rdma-go/internal/version"
)

// Env describes where a run happened, for --json.
type Env struct {
	CPU       string `json:"cpu"`
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	RdmaGo    string `json:"rdma_go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

// Environment returns the CPU model, the kernel (uname) and the Go
// toolchain of this process, and rdma-go's version. Where the system does
// not say, CPU and Kernel are empty.
func Environment() Env {
	return Env{CPU: cpuModel(), CPUs: runtime.NumCPU(), Kernel: kernel(), GoVersion: runtime.Version(),
		RdmaGo: version.String(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// jsonReport is the object --json prints.
type jsonReport struct {
	Result
	Env        Env      `json:"environment"`
	Device     string   `json:"device"`
	DeviceAddr string   `json:"device_address"`
	Port       int      `json:"ib_port"`
	GIDIndex   int      `json:"gid_index"`
	GID        string   `json:"gid"`
	LinkType   string   `json:"link_type"`
	MTU        int      `json:"mtu"`
	Connection string   `json:"connection"`
	NumQPs     int      `json:"num_qps"`
	TxDepth    int      `json:"tx_depth,omitempty"`
	RxDepth    int      `json:"rx_depth,omitempty"`
	CQMod      int      `json:"cq_moderation,omitempty"`
	PostList   int      `json:"post_list,omitempty"`
	OutReads   int      `json:"outstanding_reads,omitempty"`
	Atomic     string   `json:"atomic_type,omitempty"`
	Sizes      []uint64 `json:"sizes"`
	Iterations int      `json:"iterations,omitempty"`
	Duration   int      `json:"duration_s,omitempty"`
	Bidir      bool     `json:"bidirectional,omitempty"`
	PeerVer    string   `json:"peer_version,omitempty"`
	Local      []Dest   `json:"local"`
	Remote     []Dest   `json:"remote"`
}

func (s *session) writeJSON(w io.Writer) error {
	c := s.cfg
	r := jsonReport{Result: s.result, Env: Environment(), Device: c.Device, Port: c.IBPort, GIDIndex: s.gidIndex,
		GID: s.gid.String(), LinkType: s.linkType, MTU: s.mtu.Bytes(), Connection: c.Conn.String(), NumQPs: c.NumQPs,
		CQMod: c.CQMod, PostList: c.PostList, Bidir: c.Duplex, PeerVer: s.peerVersion, Local: s.my, Remote: s.rem}
	if s.vctx != nil {
		r.DeviceAddr = s.vctx.Device().Addr().String()
	}
	if c.Client || c.Duplex {
		r.TxDepth = c.TxDepth
	}
	if c.Test.Verb == Send {
		r.RxDepth = c.RxDepth
	}
	if c.Test.Verb == Read || c.Test.Verb == Atomic {
		r.OutReads = s.outReads
	}
	if c.Test.Verb == Atomic {
		r.Atomic = c.AtomicType.String()
	}
	if c.TestDur {
		r.Duration = c.Duration
	} else {
		r.Iterations = c.Iters
	}
	for _, row := range s.result.Rows {
		r.Sizes = append(r.Sizes, row.Bytes)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
