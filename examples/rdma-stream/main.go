// Command rdma-stream carries existing Go protocols over RDMA with package
// rdmanet, whose Dial and Listen return a net.Conn and a net.Listener:
//
//   - a net/http server Serves an rdmanet listener, and an http.Client
//     whose Transport dials with rdmanet.Dial makes a GET and a POST of
//     1 MiB that the server echoes (checked with SHA-256);
//   - encoding/gob messages go back and forth on a raw rdmanet connection.
//
// Neither net/http nor encoding/gob knows it runs over RDMA: underneath,
// every byte travels as an RDMA WRITE into the peer's registered ring
// (see package rdmanet's documentation for the protocol).
//
// Both ends live in this process, on the device's IP address; the ports
// are rdma_cm ports, not TCP ports.
//
//	go run ./examples/rdma-stream
//	go run ./examples/rdma-stream -size 16777216 -m 1000
//	go run ./examples/rdma-stream -d rxe0
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdma-go/rdma-go/examples/internal/exdev"
	"github.com/rdma-go/rdma-go/rdmanet"
	"github.com/rdma-go/rdma-go/verbs"
)

// config is what the flags choose.
type config struct {
	// BodySize is the size of the POST body the server echoes.
	BodySize int
	// Messages is the number of gob requests (each answered).
	Messages int
}

const (
	// maxBody bounds what the echo handler accepts.
	maxBody = 64 << 20
	// timeout bounds the whole program: nothing waits forever.
	timeout = 2 * time.Minute
)

func main() {
	o := exdev.Flags()
	var cfg config
	flag.IntVar(&cfg.BodySize, "size", 1<<20, "bytes of the POST body the server echoes (0 to 67108864)")
	flag.IntVar(&cfg.Messages, "m", 100, "gob requests to send (1 to 100000)")
	flag.Parse()
	if err := run(os.Stdout, o, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "rdma-stream:", err)
		os.Exit(1)
	}
}

// run opens the device o names (or a new soft device) and runs the HTTP
// and gob exchanges over rdmanet connections on its address.
func run(w io.Writer, o *exdev.Options, cfg config) (err error) {
	if cfg.BodySize < 0 || cfg.BodySize > maxBody {
		return fmt.Errorf("-size %d: the body must be 0 to %d bytes", cfg.BodySize, maxBody)
	}
	if cfg.Messages < 1 || cfg.Messages > 100000 {
		return fmt.Errorf("-m %d: send 1 to 100000 gob messages", cfg.Messages)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// The device context keeps a new soft device (and its address) alive
	// for the whole run; rdmanet finds the device by that address.
	dev, err := o.Open("stream")
	if err != nil {
		return err
	}
	defer closeWith(&err, "close the device", dev.Close)
	ip, _, err := exdev.Addr(dev)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "rdma-stream: device %s (%s)\n", dev.Device().Name(), ip)
	if err := httpOverRDMA(ctx, w, ip, cfg); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	if err := gobOverRDMA(ctx, w, ip, cfg); err != nil {
		return fmt.Errorf("gob: %w", err)
	}
	return nil
}

// httpOverRDMA serves HTTP on an rdmanet listener and makes requests with
// a client that dials with rdmanet.
func httpOverRDMA(ctx context.Context, w io.Writer, ip netip.Addr, cfg config) error {
	ln, err := rdmanet.Listen("rdma", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "hello, %s, from an HTTP server on %s", r.RemoteAddr, ln.Addr())
	})
	// /echo returns the body it received, and its SHA-256 in a header.
	mux.HandleFunc("POST /echo", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxBody))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		rw.Header().Set("X-Body-SHA256", fmt.Sprintf("%x", sum))
		rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
		rw.Write(body)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // Serve closes ln when it returns

	// The client: an ordinary http.Client whose Transport makes its
	// connections with rdmanet.Dial instead of a TCP dial. The address
	// it is given is the URL's host:port; the network ("tcp") is ignored.
	var dials atomic.Int32
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			dials.Add(1)
			return rdmanet.Dial(ctx, "rdma", addr, rdmanet.WithSource(ip))
		},
		MaxIdleConnsPerHost: 1,
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "http://" + ln.Addr().String()

	reqErr := requests(ctx, w, client, base, cfg)

	// Shut down: the server stops listening, closes idle connections and
	// waits (up to the deadline) for active ones; then the client drops
	// its idle connections too.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	shutErr := srv.Shutdown(sctx)
	tr.CloseIdleConnections()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		shutErr = errors.Join(shutErr, fmt.Errorf("serve: %w", err))
	}
	if reqErr != nil || shutErr != nil {
		return errors.Join(reqErr, shutErr)
	}
	fmt.Fprintf(w, "http: 3 requests over %d rdmanet connection(s) (HTTP keep-alive reuses one); server shut down cleanly\n", dials.Load())
	return nil
}

// requests makes the HTTP requests: a GET, a POST of cfg.BodySize random
// bytes echoed back and checked, and a second GET.
func requests(ctx context.Context, w io.Writer, client *http.Client, base string, cfg config) error {
	hello, err := get(ctx, client, base+"/hello")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET /hello: %q\n", hello)

	body := make([]byte, cfg.BodySize)
	rand.NewChaCha8([32]byte{'r', 'd', 'm', 'a'}).Read(body)
	sent := sha256.Sum256(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/echo", bytes.NewReader(body))
	if err != nil {
		return err
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("POST /echo: %w", err)
	}
	echoed, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("POST /echo: reading the response: %w", err)
	}
	elapsed := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /echo: %s", resp.Status)
	}
	got := sha256.Sum256(echoed)
	// Three checks: the server saw what was sent, and what came back is it.
	if serverSum := resp.Header.Get("X-Body-SHA256"); serverSum != fmt.Sprintf("%x", sent) {
		return fmt.Errorf("POST /echo: the server received SHA-256 %s, sent %x", serverSum, sent)
	}
	if got != sent || len(echoed) != len(body) {
		return fmt.Errorf("POST /echo: %d bytes came back with SHA-256 %x, sent %d with %x", len(echoed), got, len(body), sent)
	}
	fmt.Fprintf(w, "POST /echo: %d bytes there and back in %.1f ms, SHA-256 %x… matches on both ends\n",
		len(body), float64(elapsed.Microseconds())/1000, sent[:8])

	hello, err = get(ctx, client, base+"/hello")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET /hello again: %q\n", hello)
	return nil
}

// get fetches url and returns its body, failing on any status but 200.
func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// Request and Reply are the gob messages: the client asks the server to
// sum numbers and upper-case a word.
type Request struct {
	Seq  int
	Word string
	Nums []int64
}

// Reply answers a Request.
type Reply struct {
	Seq   int
	Upper string
	Sum   int64
}

// gobOverRDMA runs a gob request/reply exchange over one raw rdmanet
// connection: a server goroutine answers every Request until the client
// ends the stream.
func gobOverRDMA(ctx context.Context, w io.Writer, ip netip.Addr, cfg config) error {
	ln, err := rdmanet.Listen("rdma", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		return err
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- serveGob(ctx, ln) }()

	conn, err := rdmanet.Dial(ctx, "rdma", ln.Addr().String(), rdmanet.WithSource(ip))
	if err != nil {
		ln.Close() // ends the server's Accept
		return errors.Join(err, <-served)
	}
	cerr := clientGob(ctx, w, conn, cfg)
	// Close delivers what was written, then the end of the stream; the
	// server's decoder sees io.EOF and the server closes its end.
	if err := conn.Close(); cerr == nil && err != nil {
		cerr = fmt.Errorf("close: %w", err)
	}
	var serr error
	select {
	case serr = <-served:
	case <-ctx.Done():
		serr = fmt.Errorf("waiting for the server to finish: %w", ctx.Err())
	}
	if cerr != nil || serr != nil {
		return errors.Join(cerr, serr)
	}
	fmt.Fprintln(w, "gob: connection closed by both ends")
	return nil
}

// clientGob sends cfg.Messages requests on conn and checks each reply.
func clientGob(ctx context.Context, w io.Writer, conn net.Conn, cfg config) error {
	// Every Read and Write of the exchange ends by this deadline.
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	// Under the net.Conn is an RC queue pair, which *rdmanet.Conn shows.
	if rc, ok := conn.(*rdmanet.Conn); ok {
		qp := rc.RDMAConn().QP()
		fmt.Fprintf(w, "gob: connected %s -> %s (network %q), RC QP 0x%06x -> 0x%06x\n",
			conn.LocalAddr(), conn.RemoteAddr(), conn.LocalAddr().Network(), qp.QPN(), peerQPN(qp))
	}
	enc, dec := gob.NewEncoder(conn), gob.NewDecoder(conn)
	words := []string{"remote", "direct", "memory", "access"}
	start := time.Now()
	// Requests and replies alternate; gob buffers nothing across calls,
	// so each Encode is one Write and each Decode reads one reply.
	for i := range cfg.Messages {
		req := Request{Seq: i, Word: words[i%len(words)], Nums: []int64{int64(i), int64(i) * 2, 3}}
		if err := enc.Encode(req); err != nil {
			return fmt.Errorf("send request %d: %w", i, err)
		}
		var rep Reply
		if err := dec.Decode(&rep); err != nil {
			return fmt.Errorf("receive reply %d: %w", i, err)
		}
		if want := (Reply{Seq: i, Upper: strings.ToUpper(req.Word), Sum: int64(3*i + 3)}); rep != want {
			return fmt.Errorf("reply %d: got %+v, want %+v", i, rep, want)
		}
	}
	fmt.Fprintf(w, "gob: %d requests answered and checked in %.1f ms (one round trip each)\n",
		cfg.Messages, float64(time.Since(start).Microseconds())/1000)
	return nil
}

// peerQPN returns the number of the QP that qp is connected to, or 0 if
// the QP cannot be queried.
func peerQPN(qp *verbs.QP) uint32 {
	attr, _, err := qp.Query()
	if err != nil {
		return 0
	}
	return attr.DestQPN
}

// serveGob accepts one connection on ln and answers its requests until
// the peer ends the stream or ctx's deadline passes.
func serveGob(ctx context.Context, ln net.Listener) error {
	conn, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	enc, dec := gob.NewEncoder(conn), gob.NewDecoder(conn)
	for {
		var req Request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the client is done
			}
			return fmt.Errorf("server: receive: %w", err)
		}
		rep := Reply{Seq: req.Seq, Upper: strings.ToUpper(req.Word)}
		for _, n := range req.Nums {
			rep.Sum += n
		}
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("server: send: %w", err)
		}
	}
}

// closeWith calls close, as a deferred clean-up, and adds its error, if
// any, to *err: a leak or a failed teardown is reported, not hidden.
func closeWith(err *error, what string, close func() error) {
	if cerr := close(); cerr != nil {
		*err = errors.Join(*err, fmt.Errorf("%s: %w", what, cerr))
	}
}
