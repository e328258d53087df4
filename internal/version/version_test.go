package version

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "3374e4b1c2d0aabbccddeeff0011223344556677"
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"release", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v1.2.3"}}, "v1.2.3"},
		{"pseudo-version", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v0.0.0-20260101000000-3374e4b1c2d0+dirty"}, Settings: vcs(rev, "true")},
			"v0.0.0-20260101000000-3374e4b1c2d0+dirty"},
		{"devel clean", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}, Settings: vcs(rev, "false")}, "(devel) 3374e4b1c2d0"},
		{"devel dirty", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}, Settings: vcs(rev, "true")}, "(devel) 3374e4b1c2d0+dirty"},
		{"devel no vcs", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, "(devel)"},
		{"dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.50.0"}, {Path: ModulePath, Version: "v0.4.0"}}}, "v0.4.0"},
		{"replaced dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v0.4.0", Replace: &debug.Module{Path: "../rdma-go", Version: ""}}}}, "(devel)"},
		{"absent", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, "(unknown)"},
	}
	for _, c := range cases {
		if got := fromBuildInfo(&c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestLineInTestBinary(t *testing.T) {
	// A test binary records no VCS information.
	if got := Line(); !strings.HasPrefix(got, "rdma-go ") || len(got) <= len("rdma-go ") {
		t.Errorf("Line() = %q", got)
	}
}

// TestBuiltBinary builds a tool from this checkout with VCS stamping on
// (go build's default in a checkout) and checks that -V prints perftest's
// line unchanged, then rdma-go's version: the module version go build
// derives from the commit (a tag or a pseudo-version).
func TestBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	bin := filepath.Join(t.TempDir(), "ib_write_bw")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ib_write_bw")
	build.Dir = root
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("go build -buildvcs=true: %v\n%s", err, out) // no git or no go command: nothing to check here
	}
	out, err := exec.Command(bin, "-V").Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		t.Fatalf("ib_write_bw -V: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "Version: 6.06" {
		t.Fatalf("ib_write_bw -V printed %q, want perftest's line then rdma-go's", out)
	}
	// The line says what the binary's build information says; with VCS
	// information (not recorded in every checkout: a git worktree gets
	// none) that is a module version.
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := "rdma-go " + fromBuildInfo(bi); lines[1] != want {
		t.Errorf("second line %q, want %q", lines[1], want)
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			re := regexp.MustCompile(`^rdma-go v\d+\.\d+\.\d+\S*$`)
			if !re.MatchString(lines[1]) {
				t.Errorf("second line %q does not match %v", lines[1], re)
			}
			return
		}
	}
	t.Logf("the build recorded no VCS information: %q", lines[1])
}
