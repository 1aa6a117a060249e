package core

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// GraphOf describes a step without running it: the ops that recorded each
// node, a kernel per computed node on cpu (which fuses nothing), the peak
// of the live intermediates, and text and DOT that say so; the step's
// values are dropped and the device goes on.
func TestGraphOf(t *testing.T) {
	dev := open(t)
	w := dev.Param(make([]float32, 32*16), 32, 16)
	x := dev.Tensor(make([]float32, 8*32), 8, 32)
	var y *Tensor
	g, err := dev.GraphOf(func() error {
		dev.Scope("layer1", func() { y = ReLU(MatMul(x, w)) })
		return Mean(Softmax(y)).Backward()
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.Device != "cpu" || len(g.Nodes) < 8 || g.Kernels < 5 {
		t.Fatalf("GraphOf: device %q, %d nodes, %d kernels", g.Device, len(g.Nodes), g.Kernels)
	}
	var matmul, inLayer, backward, inputs int
	for i, n := range g.Nodes {
		if n.Recorded == "MatMul" {
			matmul++
		}
		if n.Layer == "layer1" {
			inLayer++
		}
		if n.Pass == "backward" {
			backward++
		}
		if n.Store == "input" {
			inputs++
			if n.Kernel != -1 {
				t.Errorf("node %d, an input, runs in kernel %d", i, n.Kernel)
			}
		}
		for _, j := range n.In {
			if j >= i {
				t.Errorf("node %d reads node %d, not before it", i, j)
			}
		}
	}
	if matmul == 0 || inLayer < 2 || backward == 0 || inputs != 2 {
		t.Errorf("GraphOf: %d MatMul nodes, %d in layer1, %d backward, %d inputs; want some, 2+, some, 2 (w and x)", matmul, inLayer, backward, inputs)
	}
	if g.PeakNode < 0 || g.PeakBytes < 8*16*4 || g.Nodes[g.PeakNode].LiveBytes != g.PeakBytes {
		t.Errorf("peak after node %d of %d bytes: want at least the [8,16] product's 512", g.PeakNode, g.PeakBytes)
	}
	if g.Memory.Inputs != (32*16+8*32)*4 || g.Memory.Intermediates == 0 {
		t.Errorf("memory %v: want inputs of w and x and some intermediates", g.Memory)
	}
	var txt, dot bytes.Buffer
	if err := g.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if err := g.WriteDOT(&dot); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"step graph on cpu", "<- memory peak", "MatMul", "layer1", "matmul"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("WriteText has no %q:\n%s", want, txt.String())
		}
	}
	d := dot.String()
	if !strings.HasPrefix(d, "digraph step {") || !strings.HasSuffix(d, "}\n") || strings.Count(d, "{") != strings.Count(d, "}") ||
		!strings.Contains(d, " -> ") || !strings.Contains(d, "color=red") {
		t.Errorf("WriteDOT:\n%s", d)
	}
	// nothing ran: the values are dropped, the gradient not made
	if _, err := y.Data(); err == nil || w.Grad() != nil {
		t.Errorf("after GraphOf: reading a recorded value gave %v, w's gradient %v; want an error and none", err, w.Grad())
	}
	if v, err := Sum(x).Item(); err != nil || v != 0 {
		t.Errorf("the device after GraphOf: %v, %v", v, err)
	}
	if _, err := dev.GraphOf(nil); err == nil || !strings.Contains(err.Error(), "GraphOf: nil step") {
		t.Errorf("GraphOf(nil): %v", err)
	}
	boom := errors.New("boom")
	if _, err := dev.GraphOf(func() error { Scale(x, 2); return boom }); !errors.Is(err, boom) {
		t.Errorf("GraphOf of a failing step: %v, want it wrapped", err)
	}
}

// A memory budget refuses, before running, a run that would pass it,
// naming what it needs and the budget; the values from before stay, and
// lifting the budget lets the same run through.
func TestMemoryBudget(t *testing.T) {
	dev := open(t)
	x := dev.Tensor(make([]float32, 1024), 1024)
	if _, err := Sum(x).Item(); err != nil { // uploads x
		t.Fatal(err)
	}
	held := dev.MemoryHeld()
	if held < 4096 {
		t.Fatalf("MemoryHeld %d with a 4 KiB value on the device", held)
	}
	if prev := dev.SetMemoryBudget(held + 1024); prev != 0 {
		t.Errorf("first SetMemoryBudget returned %d, want 0", prev)
	}
	y := Scale(Expand(Reshape(x, 1, 1024), 64, 1024), 2) // 256 KiB kept
	_, err := y.Data()
	if err == nil {
		t.Fatal("a run past the memory budget ran")
	}
	for _, want := range []string{"memory budget", "SetMemoryBudget", "256.0 KiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q has no %q", err, want)
		}
	}
	if v, err := x.Data(); err != nil || len(v) != 1024 {
		t.Errorf("the value from before: %v", err)
	}
	if _, err := dev.Zeros(1 << 20); err == nil || !strings.Contains(err.Error(), "memory budget") {
		t.Errorf("Zeros past the budget: %v", err)
	}
	if prev := dev.SetMemoryBudget(0); prev != held+1024 {
		t.Errorf("SetMemoryBudget(0) returned %d, want %d", prev, held+1024)
	}
	if v, err := Sum(Scale(Expand(Reshape(x, 1, 1024), 64, 1024), 2)).Item(); err != nil || v != 0 {
		t.Errorf("without the budget: %v, %v", v, err)
	}
}
