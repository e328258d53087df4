//go:build !linux

package service

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/rdma-go/rdma-go/link"
)

// ErrNoService is returned by Attach when no service answers: here always,
// since the host service runs on Linux only.
var ErrNoService = errors.New("service: no host service (it runs on Linux only)")

// AttachOptions configure a Client.
type AttachOptions struct {
	Port   uint16
	Logger *slog.Logger
	OnDown func()
	OnUp   func(slot uint8)
	UDP    link.UDPOptions
}

// Client is a device's attachment to the host service (Linux only).
type Client struct{ link.Link }

// Probe returns ErrNoService: the host service runs on Linux only.
func Probe(string) error { return ErrNoService }

// Attach returns ErrNoService: the host service runs on Linux only.
func Attach(context.Context, string, netip.Addr, AttachOptions) (*Client, error) {
	return nil, ErrNoService
}

// Slot returns 0.
func (*Client) Slot() uint8 { return 0 }

// GUID returns 0.
func (*Client) GUID() uint64 { return 0 }

// Claim always succeeds.
func (*Client) Claim(uint64) error { return nil }

// Release does nothing.
func (*Client) Release(uint64) {}

// DefaultQuarantine is how long a dead process's slot is not reused.
const DefaultQuarantine = 2 * time.Minute

// Config configures a Server.
type Config struct {
	Path       string
	StateFile  string
	Quarantine time.Duration
	Logger     *slog.Logger
	Now        func() time.Time
}

// Server is the host service (Linux only).
type Server struct{}

// Listen fails: the host service runs on Linux only.
func Listen(Config) (*Server, error) {
	return nil, errors.New("service: the host service runs on Linux only")
}

// Addr returns "".
func (*Server) Addr() string { return "" }

// Serve returns nil.
func (*Server) Serve() error { return nil }

// Close returns nil.
func (*Server) Close() error { return nil }
