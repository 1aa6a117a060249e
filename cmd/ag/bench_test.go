package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// ag bench -every 2 reads the loss at every second step (half a download a
// step, in both modes), says so in its JSON, and -cpuprofile writes a
// profile.
func TestBenchEveryAndProfile(t *testing.T) {
	dir := t.TempDir()
	js, prof := filepath.Join(dir, "b.json"), filepath.Join(dir, "cpu.prof")
	if err := bench([]string{"-device", "cpu", "-matmul", "", "-width", "16", "-depth", "2", "-batch", "4", "-reps", "4",
		"-every", "2", "-json", js, "-cpuprofile", prof}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results, want lazy and captured: %s", len(rep.Results), b)
	}
	for _, r := range rep.Results {
		if r.Every != 2 || r.Reps != 4 || r.Down != 0.5 || !(r.MedianM > 0) {
			t.Errorf("%s step: every %d, reps %d, %g downloads a step, median %g ms; want every 2, 4 reps, 0.5 downloads", r.Mode, r.Every, r.Reps, r.Down, r.MedianM)
		}
	}
	p, err := os.ReadFile(prof)
	if err != nil || len(p) < 2 || p[0] != 0x1f || p[1] != 0x8b {
		t.Errorf("-cpuprofile wrote %d bytes (%v), want a gzipped profile", len(p), err)
	}
	if err := bench([]string{"-device", "cpu", "-matmul", "", "-every", "0"}); err == nil {
		t.Error("-every 0 accepted")
	}
}
