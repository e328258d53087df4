// Package exdev picks the device an example runs on: the device its -d flag
// names (a kernel device such as rxe0 or mlx5_0, or a configured soft
// device), or, by default, a new soft RoCEv2 device on a free loopback
// address, so that every example runs on a fresh machine.
package exdev

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"

	"github.com/rdma-go/rdma-go/rdmacm"
	"github.com/rdma-go/rdma-go/verbs"
)

// Options are what every example takes: the device to run on, and how to
// make a soft device when none is named.
type Options struct {
	// Device is the -d flag: a device name, or "" for a new soft device.
	Device string
	// Add makes a soft device when Device is "": verbs.AddLoopbackDevice
	// in the examples, a device on an address of its own in their tests.
	Add func(name string) (*verbs.Device, error)
}

// Flags registers -d on the default flag set and returns the options it
// fills once flag.Parse has run.
func Flags() *Options {
	o := &Options{Add: verbs.AddLoopbackDevice}
	flag.StringVar(&o.Device, "d", "", "the RDMA device to use (default: a new soft device on a loopback address)")
	return o
}

// Open opens the device the options name, or a new soft device called
// softName. The context keeps the device until it is closed.
func (o *Options) Open(softName string) (*verbs.Context, error) {
	var (
		d   *verbs.Device
		err error
	)
	if o.Device != "" {
		d, err = verbs.DeviceByName(o.Device)
	} else {
		d, err = o.Add(softName)
	}
	if err != nil {
		return nil, err
	}
	c, err := d.Open()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.Name(), err)
	}
	return c, nil
}

// Addr returns the IP address of an open device, the one rdmacm and its
// peers address it by, and the index of the port 1 GID that holds it (the
// RoCEv2 GID; index 0 is often the link-local one).
func Addr(c *verbs.Context) (netip.Addr, int, error) {
	ip := c.Device().Addr()
	if !ip.IsValid() {
		return ip, 0, fmt.Errorf("%s has no IP address: RoCE needs one", c.Device().Name())
	}
	want := verbs.GIDFromIP(ip)
	pa, err := c.QueryPort(1)
	if err != nil {
		return ip, 0, err
	}
	for i := range int(pa.GIDTblLen) {
		if g, err := c.QueryGID(1, i); err == nil && g == want {
			return ip, i, nil
		}
	}
	return ip, 0, fmt.Errorf("no GID of %s holds its address %s", c.Device().Name(), ip)
}

// Connect makes one RC connection inside this process, both ends on the
// device with address ip: a listener on it and a dialer from it, with
// opts for both (rdmacm.Listen and rdmacm.Dial; the examples that teach
// the connection itself, rc-write and atomics, spell it out).
func Connect(ctx context.Context, ip netip.Addr, opts *rdmacm.Options) (client, server *rdmacm.Conn, err error) {
	l, err := rdmacm.Listen(netip.AddrPortFrom(ip, 0).String(), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	type accepted struct {
		c   *rdmacm.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept(ctx)
		ch <- accepted{c, err}
	}()
	var dopts rdmacm.Options
	if opts != nil {
		dopts = *opts
	}
	dopts.Source = ip
	client, err = rdmacm.Dial(ctx, l.Addr().String(), &dopts)
	if err != nil {
		l.Close() // ends the Accept
	}
	a := <-ch
	l.Close()
	if err != nil || a.err != nil {
		if a.c != nil {
			a.c.Close()
		}
		if client != nil {
			client.Close()
		}
		return nil, nil, fmt.Errorf("connect: %w", errors.Join(err, a.err))
	}
	return client, a.c, nil
}
