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
	var out []string
	for _, f := range counterFields(verbs.Counters{}) {
		out = append(out, f.name)
	}
	return out
}()

// field is one name and value of an ordered JSON object or text line.
type field struct {
	name  string
	value any
}

// rows collects a listing's rows: JSON objects with -j, else text lines.
type rows struct {
	c    *cli
	objs []json.RawMessage
}

func (c *cli) rows() *rows { return &rows{c: c} }

// add prints one row: as text, prefix and then "name value " for each
// field from skip on (the first are in the prefix); with -j, all fields
// as one object, kept for done.
func (r *rows) add(prefix string, fs []field, skip int) {
	if r.c.json {
		r.objs = append(r.objs, orderedJSON(fs))
		return
	}
	line := prefix
	for _, f := range fs[skip:] {
		line += fmt.Sprintf("%s %v ", f.name, f.value)
	}
	fmt.Fprintln(r.c.stdout, line)
}

// done prints the JSON array of the rows, with -j.
func (r *rows) done() error {
	if !r.c.json {
		return nil
	}
	if r.objs == nil {
		r.objs = []json.RawMessage{}
	}
	return r.c.printJSON(r.objs)
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
	if len(args) > 0 && matches(args[0], "qp") {
		return c.statisticQPs(args[1:])
	}
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
	out := c.rows()
	found := false
	emit := func(dev string, port int, fs []field) {
		found = true
		out.add(fmt.Sprintf("link %s/%d ", dev, port), fs, 2)
	}
	for _, d := range devs {
		if want != "" && d.Name() != want {
			continue
		}
		if _, isSoft := d.Provider().(*soft.Device); isSoft {
			continue
		}
		ports, _ := filepath.Glob(filepath.Join(sysfsIB, d.Name(), "ports", "*"))
		for _, pdir := range ports {
			p, err := strconv.Atoi(filepath.Base(pdir))
			if err != nil || (wantPort != 0 && p != wantPort) {
				continue
			}
			fs := []field{{"ifname", d.Name()}, {"port", p}}
			emit(d.Name(), p, append(fs, hwCounters(filepath.Join(pdir, "hw_counters"))...))
		}
	}
	// Soft devices: their counters live in the processes that run them,
	// which serve them on their statistics sockets; one line a process.
	if wantPort <= 1 {
		for _, pc := range softContexts(want) {
			if isKernel(devs, pc.Device) {
				continue
			}
			fs := append([]field{{"ifname", pc.Device}, {"port", 1}}, counterFields(pc.Port)...)
			emit(pc.Device, 1, append(fs, field{"pid", pc.pid}, field{"comm", pc.comm}))
		}
	}
	if want != "" && !found {
		return message("Wrong device name")
	}
	return out.done()
}

// statisticQPs runs "statistic qp [show]": each soft-device QP's counters,
// one line a QP, from the processes' statistics sockets.
func (c *cli) statisticQPs(args []string) error {
	if len(args) > 1 || (len(args) == 1 && !matches(args[0], "show") && !matches(args[0], "list")) {
		return errUsage
	}
	devs, err := verbs.Devices()
	if err != nil {
		return err
	}
	out := c.rows()
	for _, pc := range softContexts("") {
		if isKernel(devs, pc.Device) {
			continue
		}
		for _, q := range pc.QPs {
			fs := []field{{"ifname", pc.Device}, {"port", 1}, {"lqpn", q.QPN}, {"qp-type", q.Type}, {"pid", pc.pid}, {"comm", pc.comm}}
			out.add(fmt.Sprintf("link %s/1 ", pc.Device), append(fs, counterFields(q.Counters)...), 2)
		}
	}
	return out.done()
}

// isKernel reports whether name is a kernel device of devs.
func isKernel(devs []*verbs.Device, name string) bool {
	for _, d := range devs {
		if d.Name() == name {
			_, isSoft := d.Provider().(*soft.Device)
			return !isSoft
		}
	}
	return false
}

// counterFields lists every counter of cs under its rxe name, in rxe's
// order.
func counterFields(cs verbs.Counters) []field {
	v := reflect.ValueOf(cs)
	t := v.Type()
	var out []field
	for i := range t.NumField() {
		if n := t.Field(i).Tag.Get("rxe"); n != "" {
			out = append(out, field{n, v.Field(i).Uint()})
		}
	}
	return out
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

// resource runs "resource [show] [qp]": the kernel's per-device count of
// PDs, CQs, QPs, CM ids, MRs, contexts and SRQs, as "rdma resource show",
// then each process's soft-device contexts with the same counts (and its
// PID and command); "qp" lists the soft devices' QPs one a line.
func (c *cli) resource(args []string) error {
	if len(args) > 0 {
		if !matches(args[0], "show") && !matches(args[0], "list") {
			return message(fmt.Sprintf("Command \"%s\" is unknown, try \"rdma-go resource help\".", args[0]))
		}
		args = args[1:]
	}
	devs, err := verbs.Devices()
	if err != nil {
		return err
	}
	switch {
	case len(args) == 0:
		return c.resourceSummary(devs)
	case len(args) == 1 && matches(args[0], "qp"):
		return c.resourceQPs(devs)
	}
	return fmt.Errorf("resource show %s: not implemented (the summary and qp are); iproute2's rdma resource show %s lists a kernel device's", strings.Join(args, " "), strings.Join(args, " "))
}

// resourceSummary prints the per-device counts.
func (c *cli) resourceSummary(devs []*verbs.Device) error {
	rs, err := kernelResources()
	if err != nil && !errors.Is(err, syscall.EPROTONOSUPPORT) { // no RDMA netlink: no kernel RDMA
		return fmt.Errorf("resource show: RDMA netlink: %w", err)
	}
	out := c.rows()
	line := func(index int, name string, fs []field) {
		out.add(fmt.Sprintf("%d: %s: ", index, name), append([]field{{"ifindex", index}, {"ifname", name}}, fs...), 2)
	}
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
		line(r.index, r.name, fs)
	}
	for _, pc := range softContexts("") {
		if isKernel(devs, pc.Device) {
			continue
		}
		line(deviceIndex(devs, pc.Device), pc.Device, []field{{"pd", pc.PDs}, {"cq", pc.CQs}, {"qp", len(pc.QPs)},
			{"mr", pc.MRs}, {"ctx", 1}, {"srq", pc.SRQs}, {"pid", pc.pid}, {"comm", pc.comm}})
	}
	return out.done()
}

// resourceQPs lists the soft devices' QPs as "rdma resource show qp"
// lists a kernel device's.
func (c *cli) resourceQPs(devs []*verbs.Device) error {
	out := c.rows()
	for _, pc := range softContexts("") {
		if isKernel(devs, pc.Device) {
			continue
		}
		for _, q := range pc.QPs {
			fs := []field{{"ifname", pc.Device}, {"port", 1}, {"lqpn", q.QPN}}
			if q.Type == "RC" || q.Type == "UC" {
				fs = append(fs, field{"rqpn", q.DestQPN})
			}
			fs = append(fs, field{"type", q.Type}, field{"state", q.State})
			if q.Type == "RC" || q.Type == "UC" {
				fs = append(fs, field{"rq-psn", q.RQPSN})
			}
			fs = append(fs, field{"sq-psn", q.SQPSN}, field{"pid", pc.pid}, field{"comm", pc.comm})
			out.add(fmt.Sprintf("link %s/1 ", pc.Device), fs, 2)
		}
	}
	for _, d := range devs {
		if isKernel(devs, d.Name()) {
			fmt.Fprintf(c.stderr, "%s: a kernel device's QPs: iproute2's rdma resource show qp\n", d.Name())
		}
	}
	return out.done()
}

// deviceIndex is name's position in devs, or len(devs) for a device this
// process does not list (one a program added in code).
func deviceIndex(devs []*verbs.Device, name string) int {
	for i, d := range devs {
		if d.Name() == name {
			return i
		}
	}
	return len(devs)
}
