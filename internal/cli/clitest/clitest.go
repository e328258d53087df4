// Package clitest holds the helpers of the command tests that build the
// command under test and run it as a process.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Build builds the package in the current directory (the test's) into a
// temporary directory as name and returns its path; without a go command
// the test is skipped.
func Build(t *testing.T, name string) string {
	t.Helper()
	return BuildPackage(t, name, ".")
}

// BuildPackage is Build of the package pkg (a path relative to the test's
// directory, or an import path).
func BuildPackage(t *testing.T, name, pkg string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("go build of %s did not end in %v", name, buildTimeout)
		}
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Bounds on the processes the tests run: generous for a busy machine,
// yet a hung command fails its test instead of the whole run.
const (
	buildTimeout = 5 * time.Minute
	runTimeout   = 2 * time.Minute
)

// Env is the test's environment without rdma-go settings, with an
// empty device config file, plus extra.
func Env(t *testing.T, extra ...string) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "devices")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RDMA_GO_") && !strings.HasPrefix(kv, "POSIXLY_CORRECT=") {
			env = append(env, kv)
		}
	}
	env = append(env, "RDMA_GO_CONFIG="+cfg)
	return append(env, extra...)
}

// Run runs bin with env and args and returns its standard output,
// standard error and exit status.
func Run(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %q did not end in %v\nstdout:\n%s\nstderr:\n%s", bin, args, runTimeout, out.String(), errb.String())
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("run %s: %v", bin, err)
	return "", "", -1
}

// Buffer is a bytes.Buffer that a process or goroutine writes while the
// test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreePort returns a port of 127.0.0.1 that nothing uses now on network,
// "tcp4" (nothing listens) or "udp4" (nothing is bound).
func FreePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp4" {
		c, err := net.ListenPacket(network, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen(network, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
