package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend"
)

// TestCloseFreesEverything: Close frees the buffers and programs still
// live, since wgpu keeps a device alive while any of its objects is (on
// NVIDIA the 30th device opened after 29 closed found no adapter), and a
// buffer of a closed backend is an error, not a use of freed memory.
func TestCloseFreesEverything(t *testing.T) {
	openTest(t)                    // skips, loudly, without an adapter
	opened, err := driver{}.Open() // a backend of its own: this test closes it
	if err != nil {
		t.Fatal(err)
	}
	be := opened.(*Backend)
	b := be
	buf, err := be.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{1000}},
		{Op: backend.OpExp, In: []int{0}, Shape: []int{1000}},
		{Op: backend.OpExp, In: []int{1}, Shape: []int{1000}},
	}, Outputs: []backend.Output{{Node: 2, Arg: 1}}}
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	out, err := be.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run([]backend.Buffer{buf, out}); err != nil {
		t.Fatal(err)
	}
	if len(b.liveBufs) < 2 || len(b.liveProgs) != 1 {
		t.Fatalf("before Close: %d live buffers, %d live programs", len(b.liveBufs), len(b.liveProgs))
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if len(b.liveBufs) != 0 || len(b.liveProgs) != 0 || b.allocated != 0 {
		t.Errorf("after Close: %d live buffers, %d live programs, %d bytes allocated", len(b.liveBufs), len(b.liveProgs), b.allocated)
	}
	if err := be.Write(buf, 0, []float32{1}); err == nil {
		t.Error("Write to a buffer of a closed backend: no error")
	}
	if _, err := p.(backend.RunReader).RunRead([]backend.Buffer{buf, out}, out, 0, make([]float32, 4)); err == nil {
		t.Error("RunRead of a closed backend: no error")
	}
	be.Free(buf) // a no-op, not a double free
	p.Release()
}
