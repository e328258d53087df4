package perftest

import (
	"runtime"
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
