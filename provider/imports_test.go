package provider_test

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/rdma-go/rdma-go/"

// golist runs go list with args and returns the module's packages it prints.
func golist(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Skipf("go list: %v", err)
	}
	var pkgs []string
	for _, l := range strings.Fields(string(out)) {
		if strings.HasPrefix(l, mod) {
			pkgs = append(pkgs, strings.TrimPrefix(l, mod))
		}
	}
	return pkgs
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// TestImportArrowsPointDown checks the layer picture of README.md: no
// import arrow points back up the stack.
//
//	tools (cmd/, internal/)  rdmanet
//	                 rdmacm ──┤ (ibcm, mad)
//	                  verbs ──┘
//	               provider ← provider/soft → engine, link, wire, ibcm, mad
func TestImportArrowsPointDown(t *testing.T) {
	// What each package may not depend on, even indirectly.
	for _, r := range []struct {
		pkg    string
		banned []string
	}{
		{"provider", []string{""}}, // nothing of the module at all
		{"provider/soft/...", []string{"verbs", "rdmacm", "rdmanet", "internal", "cmd"}},
		{"provider/kernel/...", []string{"verbs", "rdmacm", "rdmanet", "internal", "cmd", "engine", "link", "provider/soft"}},
		{"engine/...", []string{"provider", "verbs", "rdmacm", "rdmanet", "ibcm", "mad", "internal"}},
		{"wire/...", []string{"provider", "verbs", "rdmacm", "rdmanet", "engine", "link", "internal"}},
		{"link/...", []string{"provider", "verbs", "rdmacm", "rdmanet", "engine", "internal"}},
		{"mad/...", []string{"provider", "verbs", "rdmacm", "rdmanet", "engine", "link", "internal"}},
		{"ibcm/...", []string{"provider", "verbs", "rdmacm", "rdmanet", "engine", "link", "internal"}},
		{"verbs", []string{"rdmacm", "rdmanet", "internal", "cmd"}},
		{"rdmacm", []string{"rdmanet", "internal", "cmd"}},
		{"rdmanet", []string{"internal", "cmd"}},
	} {
		for _, p := range golist(t, mod+r.pkg) {
			for _, d := range golist(t, "-deps", mod+p) {
				if d == p {
					continue
				}
				for _, b := range r.banned {
					if b == "" || under(d, b) {
						t.Errorf("%s depends on %s", p, d)
					}
				}
			}
		}
	}
	// What each package may import directly: verbs reaches devices only
	// through provider and the providers; rdmacm and rdmanet reach them
	// only through verbs.
	for _, r := range []struct {
		pkg     string
		allowed []string
	}{
		{"verbs", []string{"provider", "provider/soft", "provider/soft/rundir", "provider/kernel"}},
		{"rdmacm", []string{"verbs", "provider", "ibcm", "mad", "wire"}},
		{"rdmanet", []string{"verbs", "rdmacm", "provider"}},
	} {
		imports := golist(t, "-f", `{{join .Imports " "}}`, mod+r.pkg)
	next:
		for _, i := range imports {
			for _, a := range r.allowed {
				if i == a {
					continue next
				}
			}
			t.Errorf("%s imports %s", r.pkg, i)
		}
	}
}
