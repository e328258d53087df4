package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-go/rdma-go/verbs"
)

// processes reads the snapshots the processes of this user serve on their
// statistics sockets (verbs.StatsDir), by PID. A socket nobody answers on
// is a dead process's: it is removed.
func processes() []verbs.ProcessSnapshot {
	dir := verbs.StatsDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []verbs.ProcessSnapshot
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".sock")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				os.Remove(path)
			}
			continue
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		var s verbs.ProcessSnapshot
		err = json.NewDecoder(c).Decode(&s)
		c.Close()
		if err == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// softContexts returns the open contexts of other processes on the soft
// devices named (all when want is ""), with their process.
func softContexts(want string) []procContext {
	var out []procContext
	for _, p := range processes() {
		for _, c := range p.Contexts {
			if want == "" || c.Device == want {
				out = append(out, procContext{p.PID, p.Comm, c})
			}
		}
	}
	return out
}

// procContext is one process's context on a device.
type procContext struct {
	pid  int
	comm string
	verbs.ContextSnapshot
}
