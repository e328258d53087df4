package service

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// slotTable hands out the slots of one address. It is plain data, driven
// by the caller's clock; the Server guards it.
type slotTable struct {
	quarantine time.Duration
	// owner is the pid of each slot's process (0: free).
	owner [MaxSlot + 1]int
	// freed is when each free slot was last given back (zero: never
	// used), and reserved until when a slot that was attached when the
	// previous service died stays for its process to reattach.
	freed    [MaxSlot + 1]time.Time
	reserved [MaxSlot + 1]time.Time
	resPID   [MaxSlot + 1]int
}

func newSlotTable(quarantine time.Duration) *slotTable {
	return &slotTable{quarantine: quarantine}
}

// take gives pid a slot: want, if it is free and not quarantined (or
// reserved for pid), else the free slot given back longest ago and out of
// quarantine. It returns 0 when none is.
func (t *slotTable) take(now time.Time, pid int, want uint8) uint8 {
	if want >= 1 && want <= MaxSlot && t.owner[want] == 0 {
		if !t.reserved[want].IsZero() && now.Before(t.reserved[want]) {
			if t.reservedFor(want) == pid {
				return t.assign(want, pid)
			}
		} else if t.usable(now, want) {
			return t.assign(want, pid)
		}
	}
	best := uint8(0)
	for s := uint8(1); s <= MaxSlot; s++ {
		if t.owner[s] != 0 || !t.usable(now, s) {
			continue
		}
		if best == 0 || t.freed[s].Before(t.freed[best]) {
			best = s
		}
	}
	if best == 0 {
		return 0
	}
	return t.assign(best, pid)
}

// reservedFor returns the pid a reserved slot waits for.
func (t *slotTable) reservedFor(s uint8) int { return t.resPID[s] }

func (t *slotTable) usable(now time.Time, s uint8) bool {
	if !t.reserved[s].IsZero() && now.Before(t.reserved[s]) {
		return false
	}
	return t.freed[s].IsZero() || now.Sub(t.freed[s]) >= t.quarantine
}

func (t *slotTable) assign(s uint8, pid int) uint8 {
	t.owner[s] = pid
	t.reserved[s] = time.Time{}
	t.resPID[s] = 0
	return s
}

// give returns slot s at now; it is quarantined from then on.
func (t *slotTable) give(now time.Time, s uint8) {
	if s == 0 || s > MaxSlot {
		return
	}
	t.owner[s] = 0
	t.freed[s] = now
}

// save writes the table for a later service (see load).
func (t *slotTable) save(w io.Writer, addr netip.AddrPort) {
	for s := 1; s <= MaxSlot; s++ {
		switch {
		case t.owner[s] != 0:
			fmt.Fprintf(w, "%s %d attached %d\n", addr, s, t.owner[s])
		case !t.freed[s].IsZero():
			fmt.Fprintf(w, "%s %d freed %d\n", addr, s, t.freed[s].UnixNano())
		}
	}
}

// loadState reads what save wrote, for every address, into tables made
// with quarantine: a slot freed then stays quarantined for the rest of its
// time, and a slot attached then is reserved for its process (which will
// reattach) for a whole quarantine from now, and quarantined after that.
func loadState(r io.Reader, now time.Time, quarantine time.Duration) map[netip.AddrPort]*slotTable {
	out := make(map[netip.AddrPort]*slotTable)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		ap, err1 := netip.ParseAddrPort(f[0])
		s, err2 := strconv.Atoi(f[1])
		v, err3 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || s < 1 || s > MaxSlot {
			continue
		}
		t := out[ap]
		if t == nil {
			t = newSlotTable(quarantine)
			out[ap] = t
		}
		switch f[2] {
		case "attached":
			t.reserved[s] = now.Add(quarantine)
			t.resPID[s] = int(v)
			t.freed[s] = now.Add(quarantine) // then quarantined once more
		case "freed":
			if at := time.Unix(0, v); at.Before(now) {
				t.freed[s] = at
			} else {
				t.freed[s] = now
			}
		}
	}
	return out
}
