package rdmanet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rdma-go/rdma-go/internal/testdev"
	"github.com/rdma-go/rdma-go/verbs"
)

// devAddrs are the addresses of two soft loopback devices: [0] listens,
// [1] dials.
var devAddrs [2]netip.Addr

// childEnv makes the test binary a child that dials the address it holds
// (TestPeerKilled).
const childEnv = "RDMANET_TEST_CHILD"

// TestMain runs the tests over two loopback devices, then fails the run
// if a goroutine is left over; in a child process it runs the child.
func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		os.Exit(runChild(addr))
	}
	var ctxs []*verbs.Context
	for i := range devAddrs {
		// Not a shared 127.0.0.x: TestPeerKilled's keepalives must not
		// reach another test process's device.
		c, err := testdev.Open("rdmanet")
		if err == nil {
			ctxs = append(ctxs, c)
			devAddrs[i] = c.Device().Addr()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rdmanet test: loopback device:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	for _, c := range ctxs {
		c.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runChild dials addr from a device of its own, writes "hello", and waits
// to be killed (at most a minute).
func runChild(addr string) int {
	// An address no other process's device takes once this one is
	// killed: the parent's keepalives must find nobody there.
	vc, err := testdev.Open("rdmanet-child")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer vc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, "rdma", addr, WithSource(vc.Device().Addr()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	return 0
}

// tctx returns a context that ends with the test (or after 30 s).
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// listen listens on the server device, on a free port.
func listen(t testing.TB, opts ...Option) net.Listener {
	t.Helper()
	l, err := Listen("rdma", netip.AddrPortFrom(devAddrs[0], 0).String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// connect dials l from the client device and accepts the connection.
func connect(t testing.TB, l net.Listener, opts ...Option) (client, server *Conn, err error) {
	type res struct {
		c   net.Conn
		err error
	}
	acc := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		acc <- res{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cc, err := Dial(ctx, "rdma", l.Addr().String(), append([]Option{WithSource(devAddrs[1])}, opts...)...)
	if err != nil {
		l.Close()
		if r := <-acc; r.c != nil {
			r.c.Close()
		}
		return nil, nil, err
	}
	select {
	case r := <-acc:
		if r.err != nil {
			cc.Close()
			return nil, nil, r.err
		}
		return cc.(*Conn), r.c.(*Conn), nil
	case <-time.After(20 * time.Second):
		cc.Close()
		l.Close()
		<-acc
		return nil, nil, fmt.Errorf("accept timed out")
	}
}

// pipe returns a connected pair, closed when the test ends.
func pipe(t testing.TB, opts ...Option) (client, server *Conn) {
	t.Helper()
	l := listen(t, opts...)
	defer l.Close()
	c, s, err := connect(t, l, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c, s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
