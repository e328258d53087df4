package debuglog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestFor: a subsystem the list names logs its debug records to the debug
// handler, tagged with its name, and its other records to the base logger
// as before; one it does not name logs to the base logger only.
func TestFor(t *testing.T) {
	var base, debug bytes.Buffer
	bl := slog.New(slog.NewTextHandler(&base, nil)) // Info and up
	dh := slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})
	on := parse(" cm, QP ")

	qp := forSet(on, "qp", bl, dh)
	qp.Debug("QP to ERR", "qpn", 17)
	qp.Info("hello")
	link := forSet(on, "link", bl, dh)
	link.Debug("dropped")
	link.Warn("careful")

	d, b := debug.String(), base.String()
	if !strings.Contains(d, "sys=qp") || !strings.Contains(d, `msg="QP to ERR"`) || !strings.Contains(d, "qpn=17") || strings.Contains(d, "dropped") || strings.Contains(d, "hello") {
		t.Errorf("debug output:\n%s", d)
	}
	if !strings.Contains(b, "hello") || !strings.Contains(b, "careful") || strings.Contains(b, "QP to ERR") || strings.Contains(b, "dropped") {
		t.Errorf("base output:\n%s", b)
	}
	if all := parse("all"); !all["cm"] || !all["dev"] || all["nope"] {
		t.Errorf("parse(all) = %v", all)
	}
}
