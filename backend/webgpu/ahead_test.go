//go:build !js

package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend"
)

// TestRunAhead: a run that repeats the one before submits the command
// buffer recorded during it, and what may happen between two runs is seen
// by the second: a write to an arg, a buffer freed (the recorded one is
// stale), another program's run, a read folded into one of them.
func TestRunAhead(t *testing.T) {
	be := openTest(t)
	inc := func(a float32) backend.Program { // x = x + a, in place
		t.Helper()
		p, err := be.Compile(&backend.Graph{NumArgs: 1, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{6}},
			{Op: backend.OpAffine, In: []int{0}, Shape: []int{6}, A: 1, B: a}}, Outputs: []backend.Output{{Node: 1, Arg: 0}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Release)
		return p
	}
	one, ten := inc(1), inc(10)
	x, err := be.Alloc(6)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(x)
	args := []backend.Buffer{x}
	want := float32(0)
	check := func(what string) {
		t.Helper()
		v := make([]float32, 6)
		if err := be.Read(x, 0, v); err != nil {
			t.Fatal(err)
		}
		if v[5] != want {
			t.Fatalf("%s: x = %v, want %v", what, v[5], want)
		}
	}
	run := func(p backend.Program, add float32) {
		t.Helper()
		if _, err := p.Run(args); err != nil {
			t.Fatal(err)
		}
		want += add
	}
	hits := be.d.aheadHits
	for range 5 {
		run(one, 1)
	}
	check("5 runs")
	if got := be.d.aheadHits - hits; got != 3 {
		t.Errorf("5 runs over the same args: %d submitted a command recorded ahead, want 3 (the first records nothing, the second records the third)", got)
	}
	if err := be.Write(x, 0, []float32{0, 0, 0, 0, 0, 100}); err != nil {
		t.Fatal(err)
	}
	want = 100
	run(one, 1) // recorded ahead before the write
	check("run after a write")
	other, err := be.Alloc(3)
	if err != nil {
		t.Fatal(err)
	}
	be.Free(other) // makes the recorded command stale
	hits = be.d.aheadHits
	run(one, 1)
	if be.d.aheadHits != hits {
		t.Error("a command recorded before a buffer was freed was submitted")
	}
	check("run after a free")
	run(one, 1)
	run(ten, 10) // another program: the recorded one is not it
	run(one, 1)
	check("programs alternating")
	dst := make([]float32, 6)
	for range 3 { // a folded read is part of the key
		if _, err := one.(backend.RunReader).RunRead(args, x, 0, dst); err != nil {
			t.Fatal(err)
		}
		want++
		if dst[5] != want {
			t.Fatalf("RunRead: x = %v, want %v", dst[5], want)
		}
		run(one, 1)
	}
	check("runs and reads alternating")
}
