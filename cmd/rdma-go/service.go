package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/rdma-go/rdma-go/provider/soft/service"
)

// service runs the host service in the foreground until ctx ends (SIGINT):
// processes that find its socket run their soft devices through it, so
// that many of them share one address and its RoCE port.
func (c *cli) service(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("rdma-go service", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	path := fs.String("socket", service.SocketPath(), "Unix socket to listen on ("+service.SocketEnv+" sets the default)")
	quarantine := fs.Duration("quarantine", service.DefaultQuarantine, "how long a dead process's QP numbers are not given to another")
	verbose := fs.Bool("v", false, "log each process that attaches and detaches")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "rdma-go service: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	srv, err := service.Listen(service.Config{Path: *path, Quarantine: *quarantine, Logger: log})
	if err != nil {
		fmt.Fprintf(c.stderr, "rdma-go service: %v\n", err)
		return 1
	}
	fmt.Fprintf(c.stdout, "rdma-go service: listening on %s\n", srv.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	select {
	case <-ctx.Done():
		srv.Close()
		<-done
		return 0
	case err := <-done:
		srv.Close()
		if err != nil {
			fmt.Fprintf(c.stderr, "rdma-go service: %v\n", err)
			return 1
		}
		return 0
	}
}
