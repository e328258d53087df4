// Package debuglog switches the soft device's debug logs on per subsystem,
// without recompiling: RDMA_GO_DEBUG=cm,qp (or "all") makes those
// subsystems write their debug records to standard error, whatever the
// level of the program's own slog handler.
//
// The subsystems: qp (the transport engine: QP state changes, the reason a
// QP went to ERR), cm (the connection manager), mad (management datagrams
// on QP1), link (the UDP socket: options, drops), dev (the device runtime).
package debuglog

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// Env names the environment variable that lists the subsystems.
const Env = "RDMA_GO_DEBUG"

// Subsystems are the names Env takes, besides "all".
var Subsystems = []string{"qp", "cm", "mad", "link", "dev"}

var enabled = sync.OnceValue(func() map[string]bool { return parse(os.Getenv(Env)) })

// parse reads a comma- or space-separated list of subsystems.
func parse(v string) map[string]bool {
	on := map[string]bool{}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "all" {
			for _, s := range Subsystems {
				on[s] = true
			}
			continue
		}
		on[f] = true
	}
	return on
}

// stderr is the handler debug records of enabled subsystems go to.
var stderr = sync.OnceValue(func() slog.Handler {
	return slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
})

// For returns the logger subsystem logs to: base (slog.Default() when nil),
// or, when RDMA_GO_DEBUG names the subsystem, base with its debug records
// also written to standard error, tagged sys=subsystem.
func For(subsystem string, base *slog.Logger) *slog.Logger {
	return forSet(enabled(), subsystem, base, stderr())
}

func forSet(on map[string]bool, subsystem string, base *slog.Logger, debug slog.Handler) *slog.Logger {
	if base == nil {
		base = slog.Default()
	}
	if !on[subsystem] {
		return base
	}
	return slog.New(tee{base: base.Handler(), debug: debug.WithAttrs([]slog.Attr{slog.String("sys", subsystem)})})
}

// tee sends records at Info and above to base, and those below Info (debug)
// to debug as well as to base if base wants them.
type tee struct {
	base, debug slog.Handler
}

func (t tee) Enabled(ctx context.Context, l slog.Level) bool {
	return l < slog.LevelInfo || t.base.Enabled(ctx, l)
}

func (t tee) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if t.base.Enabled(ctx, r.Level) {
		err = t.base.Handle(ctx, r)
	}
	if r.Level < slog.LevelInfo {
		if derr := t.debug.Handle(ctx, r.Clone()); err == nil {
			err = derr
		}
	}
	return err
}

func (t tee) WithAttrs(as []slog.Attr) slog.Handler {
	return tee{base: t.base.WithAttrs(as), debug: t.debug.WithAttrs(as)}
}

func (t tee) WithGroup(name string) slog.Handler {
	return tee{base: t.base.WithGroup(name), debug: t.debug.WithGroup(name)}
}
