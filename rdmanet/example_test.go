package rdmanet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rdma-go/rdma-go/rdmanet"
	"github.com/rdma-go/rdma-go/verbs"
)

// loopbackAddr returns a random loopback address for an example's soft
// device: 127.x.y.z outside 127.0.0.0/24, where the automatically addressed
// devices of other processes live (the range of internal/testdev's
// devices). A program of your own would rather use configured devices (see
// verbs.Devices) or verbs.AddLoopbackDevice; Listen and Dial open the
// device that holds the address they are given.
func loopbackAddr() netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(254)), byte(rand.IntN(256)), byte(1 + rand.IntN(254))})
}

// Dial returns a net.Conn: code written for TCP works unchanged, here a
// line protocol with bufio. The server answers each line in upper case.
func ExampleDial() {
	srv, err := verbs.AddDevice("dial-server", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	cli, err := verbs.AddDevice("dial-client", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}

	// The server, in a goroutine here (in another program normally).
	l, err := rdmanet.Listen("rdma", netip.AddrPortFrom(srv.Addr(), 0).String())
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		c, err := l.Accept()
		if err != nil {
			log.Print(err)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second)) // nothing waits forever
		lines := bufio.NewScanner(c)
		for lines.Scan() {
			fmt.Fprintln(c, strings.ToUpper(lines.Text()))
		}
	}()

	// The client. ctx bounds the connection set-up; deadlines bound
	// reads and writes, as with TCP.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rdmanet.Dial(ctx, "rdma", l.Addr().String(), rdmanet.WithSource(cli.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Println("network:", c.RemoteAddr().Network())
	r := bufio.NewReader(c)
	for _, line := range []string{"hello", "over rdma"} {
		fmt.Fprintln(c, line)
		answer, err := r.ReadString('\n')
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(answer)
	}
	c.Close() // the server's Scan ends
	<-serverDone
	// Output:
	// network: rdma
	// HELLO
	// OVER RDMA
}

// Listen returns a net.Listener: an echo server, written as for TCP, serves
// each connection in a goroutine of its own. The client sends a message,
// closes its writing side (the server then reads io.EOF) and reads the echo
// to the end.
func ExampleListen() {
	srv, err := verbs.AddDevice("echo-server", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}
	cli, err := verbs.AddDevice("echo-client", loopbackAddr())
	if err != nil {
		log.Fatal(err)
	}

	l, err := rdmanet.Listen("rdma", netip.AddrPortFrom(srv.Addr(), 0).String())
	if err != nil {
		log.Fatal(err)
	}
	var conns sync.WaitGroup
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := l.Accept()
			if err != nil {
				return // the listener was closed
			}
			conns.Add(1)
			go func(c net.Conn) {
				defer conns.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				io.Copy(c, c) // echo until the client's end of stream
			}(c)
		}
	}()
	defer func() {
		l.Close()
		<-acceptDone
		conns.Wait()
	}()

	// A client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rdmanet.Dial(ctx, "rdma", l.Addr().String(), rdmanet.WithSource(cli.Addr()))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "echo over RDMA"); err != nil {
		log.Fatal(err)
	}
	// End the stream, as (*net.TCPConn).CloseWrite does: the server reads
	// io.EOF after the message, its io.Copy returns, and it closes.
	if err := c.(*rdmanet.Conn).CloseWrite(); err != nil {
		log.Fatal(err)
	}
	echo, err := io.ReadAll(c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes: %s\n", len(echo), echo)
	// Output:
	// 14 bytes: echo over RDMA
}
