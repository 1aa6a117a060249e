package profile

import (
	"maps"
	"strings"
	"testing"
)

func TestXferReportGolden(t *testing.T) {
	fresh(t)
	var b strings.Builder
	if XferReport(&b, 0) != nil || b.String() != "XferReport: counting was never enabled.\n" {
		t.Errorf("before Count: printed %q", b.String())
	}
	Count(true)
	b.Reset()
	if XferReport(&b, 0) != nil || b.String() != "XferReport: no transfers recorded.\n" {
		t.Errorf("nothing counted: printed %q", b.String())
	}
	const mib = 1 << 20
	Xfer(Up, "inputs", 2*mib)
	Xfer(Up, "inputs", mib)
	Xfer(Up, "inputs", mib/2)
	Xfer(Down, "loss", 4)
	Xfer(Down, "loss", 4)
	Xfer(Up, "params", 3*mib)
	Xfer(Down, "grads", mib/4)
	b.Reset()
	tally := XferReport(&b, 0)
	rule := strings.Repeat("-", 72)
	// Ties in count (grads 1, params 1) sort by dir then site, as the seed's
	// order(-n) over alphabetically listed "dir site" keys.
	want := "\nHost<->device transfers\n" + rule + "\n" +
		"dir       count         MB  site\n" +
		"up            3       3.50  inputs\n" +
		"down          2       0.00  loss\n" +
		"down          1       0.25  grads\n" +
		"up            1       3.00  params\n" +
		rule + "\n" +
		"up            4       6.50\n" +
		"down          3       0.25\n" +
		"              7       6.75  TOTAL\n"
	if b.String() != want {
		t.Errorf("XferReport printed\n%s\nwant\n%s", b.String(), want)
	}
	if tally.UpBytes != 6.5*mib || tally.DownBytes != mib/4+8 || tally.UpCount != 4 || tally.DownCount != 3 {
		t.Errorf("tally = %+v", tally)
	}
	b.Reset()
	XferReport(&b, 2)
	if strings.Contains(b.String(), "grads") || !strings.Contains(b.String(), "loss") || !strings.Contains(b.String(), "7       6.75  TOTAL") {
		t.Errorf("XferReport(n=2) should keep 2 sites and the full totals:\n%s", b.String())
	}
}

func TestCountSwitch(t *testing.T) {
	fresh(t)
	Xfer(Up, "x", 10) // off: not counted
	if prev := Count(true); prev {
		t.Errorf("Count(true) returned prev = true after fresh")
	}
	if n := XferData().UpCount; n != 0 {
		t.Errorf("counted %d transfers made while off", n)
	}
	Xfer(Up, "x", 10)
	Xfer(Down, "y", 20)
	// Switching on again resets, even when already on (ag_xfer_count).
	if prev := Count(true); !prev {
		t.Errorf("Count(true) returned prev = false while on")
	}
	if d := XferData(); d.UpCount+d.DownCount != 0 || len(d.Sites) != 0 {
		t.Errorf("Count(true) kept the tally: %+v", d)
	}
	Xfer(Up, "x", 10)
	Count(false)
	Xfer(Up, "x", 10) // off again: not counted, tally kept
	if d := XferData(); d.UpCount != 1 || d.UpBytes != 10 {
		t.Errorf("after Count(false): %+v, want 1 upload of 10 bytes kept", d)
	}
	ResetXfer()
	if d := XferData(); d.UpCount != 0 || !d.Counted {
		t.Errorf("after ResetXfer: %+v, want empty but counted", d)
	}
}

func TestLaunches(t *testing.T) {
	fresh(t)
	// Always counted, with every profiler and counter off.
	Launch("sync", 1)
	Launch("eager", 3)
	Launch("sync", 1)
	Launch("captured", 1)
	want := map[string]int{"sync": 2, "eager": 3, "captured": 1}
	got := Launches()
	if !maps.Equal(got, want) {
		t.Errorf("Launches() = %v, want %v", got, want)
	}
	got["sync"] = 100 // a copy: the tally must not change
	var b strings.Builder
	l := LaunchReport(&b)
	wantText := "launches  site\n" +
		"       3  eager\n" +
		"       2  sync\n" +
		"       1  captured\n" +
		"       6  TOTAL\n"
	if b.String() != wantText || l.Total != 6 {
		t.Errorf("LaunchReport printed\n%s\nwant\n%s", b.String(), wantText)
	}
	ResetLaunches()
	if n := len(Launches()); n != 0 {
		t.Errorf("after ResetLaunches: %d sites left", n)
	}
}
