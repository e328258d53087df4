package perftest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestEnvironment(t *testing.T) {
	e := Environment()
	if e.CPUs < 1 || e.GoVersion != runtime.Version() || e.RdmaGo == "" || e.OS != runtime.GOOS || e.Arch != runtime.GOARCH {
		t.Errorf("Environment() = %+v", e)
	}
	switch runtime.GOOS {
	case "linux":
		if !strings.HasPrefix(e.Kernel, "Linux ") {
			t.Errorf("kernel %q, want uname's Linux ...", e.Kernel)
		}
	case "darwin":
		if !strings.HasPrefix(e.Kernel, "Darwin ") {
			t.Errorf("kernel %q, want uname's Darwin ...", e.Kernel)
		}
	}
}

// TestStartCPUProfile: RDMA_GO_CPUPROFILE's file gets the process ID for
// %p and holds a profile (gzip-compressed protobuf) once stopped; a path
// that cannot be created is an error, not a silent no-op.
func TestStartCPUProfile(t *testing.T) {
	dir := t.TempDir()
	stop, err := startCPUProfile(filepath.Join(dir, "prof.%p"))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(filepath.Join(dir, "prof."+strconv.Itoa(os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile of %d bytes does not start as gzip", len(b))
	}
	if _, err := startCPUProfile(filepath.Join(dir, "missing", "prof")); err == nil {
		t.Fatal("a profile in a missing directory started")
	}
}
