package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdma-go/rdma-go/provider/soft"
	"github.com/rdma-go/rdma-go/verbs"
)

// sysfsIB is where the kernel lists its RDMA devices.
var sysfsIB = "/sys/class/infiniband"

// counterOrder is rxe's hw counter order (the order of verbs.Counters'
// rxe tags), which the kernel reports and iproute2 prints.
var counterOrder = func() []string {
	t := reflect.TypeFor[verbs.Counters]()
	var out []string
	for i := range t.NumField() {
		if n := t.Field(i).Tag.Get("rxe"); n != "" {
			out = append(out, n)
		}
	}
	return out
}()

// field is one name and value of an ordered JSON object or text line.
type field struct {
	name  string
	value any
}

// orderedJSON encodes fields as a JSON object in their order.
func orderedJSON(fs []field) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.name)
		v, _ := json.Marshal(f.value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// statistic runs "statistic [show|list] [link DEV/PORT]": a kernel
// device's port counters, as "rdma statistic show" prints them.
func (c *cli) statistic(args []string) error {
	if len(args) > 0 {
		if !matches(args[0], "show") && !matches(args[0], "list") {
			return message(fmt.Sprintf("Command \"%s\" is unknown, try \"rdma-go statistic help\".", args[0]))
		}
		args = args[1:]
	}
	want, wantPort := "", 0
	switch {
	case len(args) == 0:
	case len(args) == 2 && matches(args[0], "link"):
		d, p, ok := strings.Cut(args[1], "/")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n < 1 {
			return message("Wrong device name")
		}
		want, wantPort = d, n
	default:
		return errUsage
	}
	devs, err := verbs.Devices()
	if err != nil {
		return err
	}
	var objs []json.RawMessage
	found := false
	for _, d := range devs {
		if want != "" && d.Name() != want {
			continue
		}
		if _, isSoft := d.Provider().(*soft.Device); isSoft {
			found = found || wantPort == 1
			fmt.Fprintf(c.stderr, "%s: a soft device's counters live in the processes that open it (verbs Context.QueryPortCounters, QP.Counters, the rdmaprom collector); they are not readable from another process\n", d.Name())
			continue
		}
		ports, _ := filepath.Glob(filepath.Join(sysfsIB, d.Name(), "ports", "*"))
		for _, pdir := range ports {
			p, err := strconv.Atoi(filepath.Base(pdir))
			if err != nil || (wantPort != 0 && p != wantPort) {
				continue
			}
			found = true
			fs := []field{{"ifname", d.Name()}, {"port", p}}
			fs = append(fs, hwCounters(filepath.Join(pdir, "hw_counters"))...)
			if c.json {
				objs = append(objs, orderedJSON(fs))
				continue
			}
			line := fmt.Sprintf("link %s/%d ", d.Name(), p)
			for _, f := range fs[2:] {
				line += fmt.Sprintf("%s %v ", f.name, f.value)
			}
			fmt.Fprintln(c.stdout, line)
		}
	}
	if want != "" && !found {
		return message("Wrong device name")
	}
	if c.json {
		if objs == nil {
			objs = []json.RawMessage{}
		}
		return c.printJSON(objs)
	}
	return nil
}

// hwCounters reads a port's hw_counters directory: rxe's counters in
// rxe's order, then any others a driver has, by name. lifespan is a
// setting, not a counter.
func hwCounters(dir string) []field {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	have := make(map[string]uint64)
	var others []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || e.Name() == "lifespan" {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			continue
		}
		have[e.Name()] = v
		if !slices.Contains(counterOrder, e.Name()) {
			others = append(others, e.Name())
		}
	}
	var out []field
	for _, n := range append(slices.Clone(counterOrder), others...) {
		if v, ok := have[n]; ok {
			out = append(out, field{n, v})
		}
	}
	return out
}

// resourceOrder is the kernel's order of the resource summary entries.
var resourceOrder = []string{"pd", "cq", "qp", "cm_id", "mr", "ctx", "srq"}

// resource runs "resource [show]": the kernel's per-device count of PDs,
// CQs, QPs, CM ids, MRs, contexts and SRQs, as "rdma resource show".
func (c *cli) resource(args []string) error {
	if len(args) > 0 && !matches(args[0], "show") && !matches(args[0], "list") {
		return message(fmt.Sprintf("Command \"%s\" is unknown, try \"rdma-go resource help\".", args[0]))
	}
	if len(args) > 1 {
		return fmt.Errorf("resource show %s: the per-object lists are not implemented; iproute2's rdma resource show %s lists a kernel device's", args[1], args[1])
	}
	rs, err := kernelResources()
	if err != nil && !errors.Is(err, syscall.EPROTONOSUPPORT) { // no RDMA netlink: no kernel RDMA
		return fmt.Errorf("resource show: RDMA netlink: %w", err)
	}
	var objs []json.RawMessage
	for _, r := range rs {
		var fs []field
		var others []string
		for k := range r.entries {
			if !slices.Contains(resourceOrder, k) {
				others = append(others, k)
			}
		}
		slices.Sort(others)
		for _, k := range append(slices.Clone(resourceOrder), others...) {
			if v, ok := r.entries[k]; ok {
				fs = append(fs, field{k, v})
			}
		}
		if c.json {
			objs = append(objs, orderedJSON(append([]field{{"ifindex", r.index}, {"ifname", r.name}}, fs...)))
			continue
		}
		line := fmt.Sprintf("%d: %s: ", r.index, r.name)
		for _, f := range fs {
			line += fmt.Sprintf("%s %v ", f.name, f.value)
		}
		fmt.Fprintln(c.stdout, line)
	}
	if c.json {
		if objs == nil {
			objs = []json.RawMessage{}
		}
		return c.printJSON(objs)
	}
	return nil
}
