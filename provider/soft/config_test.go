package soft

// Configuration parsing: the registry of devices is loaded once per
// process, so the parsing is tested through configDevices, parseConfig and
// parseEnv, which do not touch it.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-go/rdma-go/provider"
)

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [][2]string
		err  string
	}{
		{"", nil, ""},
		{"   ", nil, ""},
		{"rgo1=127.0.0.9", [][2]string{{"rgo1", "127.0.0.9"}}, ""},
		{" rgo1 = 127.0.0.9 , rgo2=::1,rgo3=auto", [][2]string{{"rgo1", "127.0.0.9"}, {"rgo2", "::1"}, {"rgo3", "auto"}}, ""},
		{"rgo1", nil, `RDMA_GO_DEVICES: want name=address, got "rgo1"`},
		{"rgo1=127.0.0.9,", nil, `want name=address, got ""`},
		{"rgo1=127.0.0.9;rgo2=127.0.0.10", [][2]string{{"rgo1", "127.0.0.9;rgo2=127.0.0.10"}}, ""}, // caught by the address check
	} {
		got, err := parseEnv(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("parseEnv(%q) error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("parseEnv(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseConfig(t *testing.T) {
	const good = `# rdma-go devices
rgo1 127.0.0.9
   rgo2	::1   # an IPv6 one

rgo3 auto#no space before the comment
# rgo4 127.0.0.10
`
	got, err := parseConfig(strings.NewReader(good), "devices")
	want := [][2]string{{"rgo1", "127.0.0.9"}, {"rgo2", "::1"}, {"rgo3", "auto"}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("parseConfig = %v, %v; want %v", got, err, want)
	}
	if got, err := parseConfig(strings.NewReader(""), "empty"); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %v, %v", got, err)
	}
	for _, tc := range []struct{ in, err string }{
		{"rgo1 127.0.0.9\nrgo2\n", `/etc/x:2: want "name address", got "rgo2"`},
		{"\n\n  rgo1 127.0.0.9 extra # c\n", `/etc/x:3: want "name address", got "rgo1 127.0.0.9 extra"`},
		{"rgo1=127.0.0.9\n", `/etc/x:1: want "name address", got "rgo1=127.0.0.9"`},
	} {
		_, err := parseConfig(strings.NewReader(tc.in), "/etc/x")
		if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, provider.ErrInvalidArgument) {
			t.Errorf("parseConfig(%q): %v, want an error containing %q", tc.in, err, tc.err)
		}
	}
}

// fakeEnv is a getenv over a map.
func fakeEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func describe(devs []*Device) string {
	var b []string
	for _, d := range devs {
		a := d.addr.String()
		if d.auto {
			a = "auto"
		}
		b = append(b, d.name+"="+a)
	}
	return strings.Join(b, ",")
}

func TestConfigDevices(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgFile := write("cfg", "# test\nfile1 127.0.0.20\nfile2 auto\n")
	empty := t.TempDir() // an XDG_CONFIG_HOME without rdma-go/devices
	xdg := filepath.Dir(filepath.Dir(write("xdg/rdma-go/devices", "xdg1 127.0.0.21\n")))
	home := filepath.Dir(filepath.Dir(filepath.Dir(write("home/.config/rdma-go/devices", "home1 127.0.0.22\n"))))

	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // prefix of the list
		err  string
		is   error
	}{
		{"default", map[string]string{"XDG_CONFIG_HOME": empty}, "rgo0=auto", "", nil},
		{"loopback address", map[string]string{LoopbackEnv: "127.0.0.5", ConfigFileEnv: cfgFile},
			"rgo0=127.0.0.5,file1=127.0.0.20,file2=auto", "", nil},
		{"loopback off", map[string]string{LoopbackEnv: "off", ConfigFileEnv: cfgFile}, "file1=127.0.0.20,file2=auto", "", nil},
		{"config file then env", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "env1=::1,env2=127.0.0.30"},
			"rgo0=auto,file1=127.0.0.20,file2=auto,env1=::1,env2=127.0.0.30", "", nil},
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, "rgo0=auto,xdg1=127.0.0.21", "", nil},
		{"HOME", map[string]string{"HOME": home}, "rgo0=auto,home1=127.0.0.22", "", nil},
		{"IPv4-mapped address", map[string]string{LoopbackEnv: "off", ConfigFileEnv: cfgFile, DevicesEnv: "m=::ffff:127.0.0.40"},
			"file1=127.0.0.20,file2=auto,m=127.0.0.40", "", nil},
		{"missing config file", map[string]string{ConfigFileEnv: filepath.Join(dir, "nope")}, "",
			"RDMA_GO_CONFIG", fs.ErrNotExist},
		{"bad config line", map[string]string{ConfigFileEnv: write("bad", "ok 127.0.0.1\nnot-ok\n")}, "",
			"bad:2: want \"name address\"", syscall.EINVAL},
		{"bad env item", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "x"}, "",
			"RDMA_GO_DEVICES: want name=address", syscall.EINVAL},
		{"bad address", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "x=127.0.0.300"}, "",
			`device x: bad address "127.0.0.300"`, syscall.EINVAL},
		{"bad loopback address", map[string]string{LoopbackEnv: "localhost"}, "",
			`RDMA_GO_LOOPBACK="localhost"`, syscall.EINVAL},
		{"bad name", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "a/b=127.0.0.1"}, "",
			`bad device name "a/b"`, syscall.EINVAL},
		{"empty name", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "=127.0.0.1"}, "",
			`bad device name ""`, syscall.EINVAL},
		{"duplicate name", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "file1=127.0.0.2"}, "",
			"device file1 already exists", syscall.EBUSY},
		{"duplicate loopback", map[string]string{ConfigFileEnv: cfgFile, DevicesEnv: "rgo0=127.0.0.2"}, "",
			"device rgo0 already exists", provider.ErrBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs, err := configDevices(fakeEnv(tc.env))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, tc.is) {
					t.Fatalf("configDevices: %v (%s), want an error containing %q wrapping %v", err, describe(devs), tc.err, tc.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := describe(devs)
			if !strings.HasPrefix(got+",", tc.want+",") {
				t.Fatalf("devices %s, want %s", got, tc.want)
			}
			if _, explicit := tc.env[ConfigFileEnv]; explicit && got != tc.want {
				t.Fatalf("devices %s, want exactly %s", got, tc.want)
			}
			for _, d := range devs {
				if d.guid == 0 || d.guid != guidFor(d.name, d.addr) {
					t.Errorf("device %s GUID %#x", d.name, d.guid)
				}
			}
		})
	}
}
