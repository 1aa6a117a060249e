package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run refuses counts the page would refuse run by run, before it starts a
// browser: -profile-steps beyond ag.profile's bound (0 profiles nothing).
func TestRunRefusesBadCounts(t *testing.T) {
	ok := Options{Width: 8, Depth: 2, Batch: 4, Steps: 10, Rounds: 1, Every: 1}
	for _, c := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"profile-steps -1", func(o *Options) { o.ProfileSteps = -1 }, "-profile-steps -1"},
		{"profile-steps 1001", func(o *Options) { o.ProfileSteps = 1001 }, "-profile-steps 1001"},
		{"every 0", func(o *Options) { o.Every = 0 }, "every 0"},
	} {
		o := ok
		c.set(&o)
		err := run(o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

// writeJSON makes the report's folder: `make bench-browser` writes
// bench/browser/out/run.json, and a fresh clone has no out/ (it is ignored).
// A parent that is a file is an error naming the path, not a lost report
// written elsewhere.
func TestWriteJSONMakesFolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out", "deeper", "run.json")
	if err := writeJSON(path, map[string]int{"rounds": 3}); err != nil {
		t.Fatalf("writeJSON into a missing folder: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]int
	if err := json.Unmarshal(b, &got); err != nil || got["rounds"] != 3 {
		t.Fatalf("read back %q (%v), want rounds 3", b, err)
	}
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(blocker, "run.json")
	if err := writeJSON(bad, 1); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("writeJSON under a file: %v, want an error naming %s", err, bad)
	}
}
