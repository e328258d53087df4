// Package version reports rdma-go's own version, from the build
// information the Go toolchain embeds in every binary, for the tools'
// version output.
package version

import (
	"runtime/debug"
	"strings"
)

// ModulePath is rdma-go's module path.
const ModulePath = "github.com/rdma-go/rdma-go"

// String returns rdma-go's version in this binary: the module version when
// it was built as a versioned module (go install ...@v1.2.3, or a
// pseudo-version that go build stamps from the checkout), else "(devel)"
// followed by the VCS revision when the build recorded one, with "+dirty"
// for uncommitted changes (go build -buildvcs=false, go run, go test
// binaries record none).
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return fromBuildInfo(bi)
}

// Line is the version line the tools print: "rdma-go <version>".
func Line() string { return "rdma-go " + String() }

func fromBuildInfo(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != ModulePath {
		// A program of another module that uses rdma-go's packages.
		m = nil
		for _, d := range bi.Deps {
			if d.Path == ModulePath {
				m = d
				if d.Replace != nil {
					m = d.Replace
				}
				break
			}
		}
		if m == nil {
			return "(unknown)"
		}
	}
	if v := m.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var b strings.Builder
	b.WriteString("(devel) ")
	b.WriteString(rev)
	if dirty {
		b.WriteString("+dirty")
	}
	return b.String()
}
