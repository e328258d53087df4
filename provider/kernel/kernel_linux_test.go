//go:build linux

package kernel

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/rdma-go/rdma-go/provider"
)

func haveLib(t testing.TB) *lib {
	l, err := getLib()
	if err != nil {
		if _, serr := os.Stat("/usr/lib/x86_64-linux-gnu/" + libName); serr == nil {
			t.Fatalf("%s is installed but does not load: %v", libName, err)
		}
		t.Skipf("no %s: %v", libName, err)
	}
	return l
}

// TestLoad loads libibverbs.so.1 and resolves every function used.
func TestLoad(t *testing.T) {
	l := haveLib(t)
	if l.getDeviceList == 0 || l.queryPort == 0 || l.regMR == 0 || l.getCQEvent == 0 {
		t.Fatal("symbols not resolved")
	}
	var n int32
	list := call(l.getDeviceList, uintptr(unsafe.Pointer(&n)))
	t.Logf("ibv_get_device_list: %d devices", n)
	if list != 0 {
		call(l.freeDeviceList, list)
	}
}

// TestNoDevicesSaysWhy: without kernel devices the provider lists none
// and logs the reason at debug level.
func TestNoDevicesSaysWhy(t *testing.T) {
	if ents, err := os.ReadDir(sysfsDir); err == nil && len(ents) > 0 {
		t.Skipf("%s has devices", sysfsDir)
	}
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	state.mu.Lock()
	state.logged = ""
	state.mu.Unlock()
	ds, err := Provider{}.Devices()
	if err != nil || len(ds) != 0 {
		t.Fatalf("Devices = %v, %v; want none", ds, err)
	}
	if !strings.Contains(buf.String(), "level=DEBUG") || !strings.Contains(buf.String(), sysfsDir) {
		t.Fatalf("debug log %q does not say why", buf.String())
	}
	t.Log(strings.TrimSpace(buf.String()))
}

func TestAlloc(t *testing.T) {
	b, err := Alloc(5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 5000 || uintptr(unsafe.Pointer(&b[0]))%uintptr(os.Getpagesize()) != 0 {
		t.Fatalf("len %d, addr %p", len(b), &b[0])
	}
	for i := range b {
		b[i] = byte(i)
	}
	if err := Free(b); err != nil {
		t.Fatal(err)
	}
}

// fakeOps is a shared library standing in for a device's ops: post_send
// and post_recv that accept everything, poll_cq that returns as many
// (zeroed) completions as asked, and a loop that calls a function pointer
// n times from C (the cost of a direct call).
const fakeOps = `
struct ibv_qp; struct ibv_cq;
int fake_post(void *qp, void *wr, void **bad) { return 0; }
int fake_poll(void *cq, int n, void *wc) { return n; }
long fake_noop(long x) { return x; }
long c_loop_post(int (*fn)(void *, void *, void **), void *wr, long n) {
	long s = 0; void *bad;
	for (long i = 0; i < n; i++) s += fn(0, wr, &bad);
	return s;
}
long c_loop_poll(int (*fn)(void *, int, void *), void *wc, long n) {
	long s = 0;
	for (long i = 0; i < n; i++) s += fn(0, 1, wc);
	return s;
}
`

type fakeLib struct{ post, poll, noop, loopPost, loopPoll uintptr }

func loadFake(b testing.TB) fakeLib {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		b.Skip("no gcc")
	}
	dir := b.TempDir()
	src, so := filepath.Join(dir, "f.c"), filepath.Join(dir, "libfake.so")
	os.WriteFile(src, []byte(fakeOps), 0o644)
	if out, err := exec.Command(cc, "-O2", "-shared", "-fPIC", "-fno-inline", "-o", so, src).CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW)
	if err != nil {
		b.Fatal(err)
	}
	var f fakeLib
	for _, s := range []struct {
		p *uintptr
		n string
	}{{&f.post, "fake_post"}, {&f.poll, "fake_poll"}, {&f.noop, "fake_noop"}, {&f.loopPost, "c_loop_post"}, {&f.loopPoll, "c_loop_poll"}} {
		if *s.p, err = purego.Dlsym(h, s.n); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

//go:noinline
func goNoop(x uintptr) uintptr { return x }

// BenchmarkCall is the loader's per-call overhead: a trivial C function
// through purego against a Go function.
func BenchmarkCall(b *testing.B) {
	f := loadFake(b)
	b.Run("go", func(b *testing.B) {
		for b.Loop() {
			goNoop(1)
		}
	})
	b.Run("purego", func(b *testing.B) {
		for b.Loop() {
			call(f.noop, 1)
		}
	})
}

// BenchmarkHotPath compares PostSend and Poll through the provider (Go
// conversion into off-heap C structs, then the ops function through
// purego) with C calling the same ops function directly.
func BenchmarkHotPath(b *testing.B) {
	f := loadFake(b)
	c := &Context{postSend: f.post, postRecv: f.post, pollCQ: f.poll}
	q := &qp{p: &pd{c: c}}
	if err := q.initScratch(provider.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		b.Fatal(err)
	}
	cqq := &cq{c: c}
	var err error
	if cqq.wcs, err = newScratch(cqBatch * int(unsafe.Sizeof(cWC{}))); err != nil {
		b.Fatal(err)
	}
	wr := []provider.SendWR{{ID: 1, Opcode: provider.WRRDMAWrite, Flags: provider.SendSignaled,
		SGL: []provider.SGE{{Addr: 0x1000, Length: 64, LKey: 7}}, RemoteAddr: 0x2000, RKey: 9}}
	wc := make([]provider.WC, 1)
	b.Run("PostSend/direct-C", func(b *testing.B) {
		call(f.loopPost, f.post, q.smem.addr(q.swrOff), uintptr(b.N))
	})
	b.Run("PostSend/provider", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := q.PostSend(wr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PollCQ/direct-C", func(b *testing.B) {
		call(f.loopPoll, f.poll, cqq.wcs.addr(0), uintptr(b.N))
	})
	b.Run("PollCQ/provider", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if n, _ := cqq.Poll(wc); n != 1 {
				b.Fatal(n)
			}
		}
	})
}
