//go:build ggml

package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// copies counts the output copies (CPY nodes) g lowers to on d.
func copies(t *testing.T, d *device, g *backend.Graph) int {
	t.Helper()
	c := loweredOps(t, d, g)
	i := strings.Index(c, " CPY=")
	if i < 0 {
		return 0
	}
	n := 0
	for _, r := range c[i+len(" CPY="):] {
		if r < '0' || r > '9' {
			break
		}
		n = 10*n + int(r-'0')
	}
	return n
}

// An output is computed straight into its arg, with no copy node, only
// where that is the arg's final state: the arg is written by this output
// alone and read by no node. Every case's values match backendtest.Eval.
func TestDirectOutputs(t *testing.T) {
	mm := func(outs ...backend.Output) *backend.Graph {
		return &backend.Graph{NumArgs: 5, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{8, 16}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{16, 4}},
			{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{8, 4}},
			{Op: backend.OpReshape, In: []int{2}, Shape: []int{32}},
			{Op: backend.OpArg, Arg: 3, Shape: []int{32}},
			{Op: backend.OpAdd, In: []int{3, 4}, Shape: []int{32}},
			{Op: backend.OpSliceRows, In: []int{2}, Start: 2, Shape: []int{3, 4}},
		}, Outputs: outs}
	}
	cases := []struct {
		name   string
		g      *backend.Graph
		copies int
	}{
		// the product into a write-only arg: its tensor is the arg
		{"write-only", mm(backend.Output{Node: 2, Arg: 2}), 0},
		// a whole reshape of it: the same memory
		{"reshape", mm(backend.Output{Node: 3, Arg: 2}), 0},
		// arg 3 is read by the add: written at the end, after the read
		{"read arg", mm(backend.Output{Node: 5, Arg: 3}), 1},
		// two args of one value: one is the tensor, the other a copy
		{"one value, two args", mm(backend.Output{Node: 2, Arg: 2}, backend.Output{Node: 2, Arg: 4}), 1},
		// two outputs into one arg: the last is its final state
		{"two values, one arg", mm(backend.Output{Node: 2, Arg: 2}, backend.Output{Node: 5, Arg: 2}), 2},
		// a slice is part of the product's memory
		{"slice", mm(backend.Output{Node: 6, Arg: 2}), 1},
	}
	for _, name := range devices(t) {
		be := open(t, name)
		d := be.(*device)
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, 7))
				args := [][]float32{randVals(rng, 8*16), randVals(rng, 16*4), randVals(rng, 40), randVals(rng, 32), randVals(rng, 36)}
				runAndCompare(t, be, c.g, args, 1e-5)
				if got := copies(t, d, c.g); got != c.copies {
					t.Errorf("%d copy nodes, want %d: %s", got, c.copies, loweredOps(t, d, c.g))
				}
			})
		}
	}
}

// A direct output's arg is bound run by run: a second run into other
// buffers leaves the first run's untouched.
func TestDirectOutputsRebind(t *testing.T) {
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{4}},
		{Op: backend.OpExp, In: []int{0}, Shape: []int{4}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	for _, name := range devices(t) {
		t.Run(name, func(t *testing.T) {
			be := open(t, name)
			if n := copies(t, be.(*device), g); n != 0 {
				t.Fatalf("%d copy nodes, want 0", n)
			}
			p, err := be.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			x1, y1 := upload(t, be, []float32{0, 1, 2, 3}), upload(t, be, make([]float32, 4))
			x2, y2 := upload(t, be, []float32{-1, -2, -3, -4}), upload(t, be, make([]float32, 4))
			for _, bufs := range [][]backend.Buffer{{x1, y1}, {x2, y2}} {
				if _, err := p.Run(bufs); err != nil {
					t.Fatal(err)
				}
			}
			for i, b := range []backend.Buffer{y1, y2} {
				got := download(t, be, b)
				for j, v := range got {
					x := float64(j)
					if i == 1 {
						x = -float64(j + 1)
					}
					if w := math.Exp(x); math.Abs(float64(v)-w) > 1e-6*w {
						t.Errorf("run %d: y[%d] = %g, want %g", i+1, j, v, w)
					}
				}
			}
		})
	}
}

// On ggml-vulkan a clamp and a ReLU are one CLAMP node when the device's
// clamp keeps NaN (build.sh's patch 0004, checked by probeClamp), and the
// five-node NaN flag otherwise; both give ir.go's values, NaN included.
func TestClampKeepsNaN(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	in := []float32{nan, -inf, -2, -0.5, 0, 0.5, 2, inf}
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{8}},
		{Op: backend.OpClamp, In: []int{0}, A: -1, B: 1, Shape: []int{8}},
		{Op: backend.OpReLU, In: []int{0}, Shape: []int{8}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}, {Node: 2, Arg: 2}}}
	want := [][]float32{
		{nan, -1, -1, -0.5, 0, 0.5, 1, 1},
		{nan, 0, 0, 0, 0, 0.5, 2, inf},
	}
	for _, name := range devices(t) {
		if name != VulkanName {
			continue // ggml-cpu runs ag_clamp and ag_relu (custom ops)
		}
		be := open(t, name)
		d := be.(*device)
		if !d.clampKeepsNaN {
			t.Errorf("%s: probeClamp found that the device's clamp drops NaN: is ggml built without patch 0004?", name)
		}
		keep := d.clampKeepsNaN
		for _, oneNode := range []bool{true, false} {
			t.Run(map[bool]string{true: "one node", false: "flagged"}[oneNode], func(t *testing.T) {
				d.mu.Lock()
				d.clampKeepsNaN = oneNode
				d.mu.Unlock()
				defer func() { d.mu.Lock(); d.clampKeepsNaN = keep; d.mu.Unlock() }()
				ops := loweredOps(t, d, g)
				if tanh := strings.Contains(ops, "TANH"); tanh == oneNode || !strings.Contains(ops, "CLAMP=2") {
					t.Errorf("one node %v: %s", oneNode, ops)
				}
				runSpecial(t, be, g, in, want, "clamp", "relu")
			})
		}
	}
}

// An expand read only by broadcasting adds, subs, muls and divs (as src1,
// or either side of an add or mul) stays unrepeated, and a binary op
// repeated on the same operands is one node; an expand read otherwise is
// repeated. The values match backendtest.Eval.
func TestThinExpandAndRepeatedOps(t *testing.T) {
	g := func(last backend.Op) *backend.Graph {
		return &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
			{Op: backend.OpArg, Arg: 0, Shape: []int{6, 5}},
			{Op: backend.OpArg, Arg: 1, Shape: []int{5}},
			{Op: backend.OpExpand, In: []int{1}, Shape: []int{6, 5}},
			{Op: backend.OpMul, In: []int{2, 0}, Shape: []int{6, 5}}, // expand as src0: swapped
			{Op: backend.OpMul, In: []int{2, 0}, Shape: []int{6, 5}}, // the same product again
			{Op: backend.OpAdd, In: []int{3, 4}, Shape: []int{6, 5}},
			{Op: last, In: []int{5, 2}, Shape: []int{6, 5}}, // expand as src1
		}, Outputs: []backend.Output{{Node: 6, Arg: 2}}}
	}
	for _, name := range devices(t) {
		be := open(t, name)
		d := be.(*device)
		for _, c := range []struct {
			last    backend.Op
			repeats int
		}{{backend.OpSub, 0}, {backend.OpMaximum, 1}} {
			t.Run(name+"/"+c.last.String(), func(t *testing.T) {
				gr := g(c.last)
				rng := rand.New(rand.NewPCG(3, 3))
				runAndCompare(t, be, gr, [][]float32{randVals(rng, 30), randVals(rng, 5), make([]float32, 30)}, 1e-6)
				ops := loweredOps(t, d, gr)
				if got := strings.Count(ops, "REPEAT="); got != c.repeats {
					t.Errorf("want %d REPEAT: %s", c.repeats, ops)
				}
				if c.last == backend.OpSub && !strings.Contains(ops, " MUL=1") {
					t.Errorf("want the two equal products as one MUL: %s", ops)
				}
			})
		}
	}
}

// ggml's step is [x > 0] with NaN giving 0 on both devices (ggml-vulkan
// with patch 0006, checked by probeStep), so [y > 0] (positive) is one
// node; inside(x, a, b) and max along rows, which lean on step's value at
// 0, give ir.go's values with one step or with the five-node form.
func TestStepStrict(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	in := []float32{nan, -inf, -2, -1, -0.5, 0, -inf, -inf, -inf, 0.5, 1, inf}
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{12}},
		{Op: backend.OpInside, In: []int{0}, A: -1, B: 1, Shape: []int{12}},
		{Op: backend.OpReshape, In: []int{0}, Shape: []int{4, 3}},
		{Op: backend.OpMax, In: []int{2}, Axis: 1, Shape: []int{4, 1}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}, {Node: 3, Arg: 2}}}
	want := [][]float32{
		{0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0},
		{nan, 0, -inf, inf},
	}
	for _, name := range devices(t) {
		be := open(t, name)
		d := be.(*device)
		if !d.stepStrict {
			t.Errorf("%s: probeStep found that the device's step is not [x > 0]: is ggml built without patch 0006?", name)
		}
		keep := d.stepStrict
		for _, strict := range []bool{true, false} {
			if d.isCPU && !strict {
				continue // ggml-cpu's step is strict: the other form is ggml-vulkan's
			}
			t.Run(fmt.Sprintf("%s/strict=%v", name, strict), func(t *testing.T) {
				d.mu.Lock()
				d.stepStrict = strict
				d.mu.Unlock()
				defer func() { d.mu.Lock(); d.stepStrict = keep; d.mu.Unlock() }()
				runSpecial(t, be, g, in, want, "inside(x, -1, 1)", "max")
				if ops := loweredOps(t, d, g); strict == strings.Contains(ops, "NEG") {
					t.Errorf("strict step %v: want a NEG only in the five-node form: %s", strict, ops)
				}
			})
		}
	}
}

// ReLU's gradient mask (the composite relu_mask) is one node on both
// devices: ggml-vulkan's sign step where the device's clamp has it (patch
// 0007, checked by probeSignStep) and ggml-cpu's ag_sign_step, else its
// decomposition's three; all give 1 where x > 0, +0 where x <= 0 (-0 too),
// and NaN at NaN. The primitive chain of its decomposition is no longer
// recognised: it stays three nodes.
func TestSignStep(t *testing.T) {
	nan, inf, neg0 := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	in := []float32{nan, -inf, -2, -1e-30, neg0, 0, 1e-30, 2, inf}
	mask := []float32{nan, 0, 0, 0, 0, 0, 1, 1, 1}
	composite := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{9}},
		{Op: backend.OpReLUMask, In: []int{0}, Shape: []int{9}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	chain := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{9}},
		{Op: backend.OpAffine, In: []int{0}, A: 0x1p127, Shape: []int{9}},
		{Op: backend.OpClamp, In: []int{1}, A: 0, B: 0x1p-22, Shape: []int{9}},
		{Op: backend.OpAffine, In: []int{2}, A: 0x1p22, Shape: []int{9}},
	}, Outputs: []backend.Output{{Node: 3, Arg: 1}}}
	for _, name := range devices(t) {
		be := open(t, name)
		d := be.(*device)
		if name == VulkanName && !d.signStep {
			t.Errorf("%s: probeSignStep found no sign step in the device's clamp: is ggml built without patch 0007?", name)
		}
		keep := d.signStep
		for _, sign := range []bool{true, false} {
			if d.isCPU && !sign {
				continue // ggml-cpu runs ag_sign_step either way
			}
			t.Run(fmt.Sprintf("%s sign step %v", name, sign), func(t *testing.T) {
				d.mu.Lock()
				d.signStep = sign && !d.isCPU
				d.mu.Unlock()
				defer func() { d.mu.Lock(); d.signStep = keep; d.mu.Unlock() }()
				runSpecial(t, be, composite, in, [][]float32{mask}, "mask")
				if !d.isCPU { // (ggml-cpu's scale keeps -0 where the IR's x*a + 0 is +0)
					runSpecial(t, be, chain, in, [][]float32{mask}, "chain")
				}
				ops := loweredOps(t, d, composite)
				if one := !strings.Contains(ops, "SCALE"); one != (sign || d.isCPU) {
					t.Errorf("%s sign step %v: relu_mask lowered to %s", name, sign, ops)
				}
				if ops := loweredOps(t, d, chain); !strings.Contains(ops, "SCALE=2") {
					t.Errorf("the primitive chain must stay three nodes: %s", ops)
				}
			})
		}
	}
}

// runSpecial runs g (arg 0 in, args 1.. its outputs, of want's lengths) on
// be and checks each output against want: any NaN for a NaN, else equal
// (runAndCompare's tolerance fails on NaN), a zero's sign included.
func runSpecial(t *testing.T, be backend.Backend, g *backend.Graph, in []float32, want [][]float32, names ...string) {
	t.Helper()
	p, err := be.Compile(g)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	bufs := []backend.Buffer{upload(t, be, in)}
	for _, w := range want {
		bufs = append(bufs, upload(t, be, make([]float32, len(w))))
	}
	if _, err := p.Run(bufs); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		for j, v := range download(t, be, bufs[k+1]) {
			sign := w[j] == 0 && math.Signbit(float64(w[j])) != math.Signbit(float64(v))
			if w[j] != w[j] && v == v || w[j] == w[j] && v != w[j] || sign {
				t.Errorf("%s [%d] = %g, want %g", names[k], j, v, w[j])
			}
		}
	}
}

// rand_uniform is drawn on the device on both devices: ggml-vulkan's arange
// with patch 0010 where probeDraw found it (ag_philox_op), ggml-cpu's
// ag_rand_uniform; the host-filled leaf (randLeaf) stays the fallback. All
// three give backend.RandUniformFill's values exactly, for a state that is
// an arg and (on the device paths) one computed in the graph.
func TestDeviceDraw(t *testing.T) {
	const rows, cols, start = 3, 1001, 7
	key, counter := uint64(0xfeedface12345678), uint64(1)<<32-1
	state := backend.RandState(key, counter)
	want := make([]float32, rows*cols)
	backend.RandUniformFill(want, key, counter, start, 0)
	fromArg := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{backend.RandStateLen}},
		{Op: backend.OpRandUniform, In: []int{0}, Start: start, Shape: []int{rows, cols}},
	}, Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	computed := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{backend.RandStateLen}},
		{Op: backend.OpAffine, In: []int{0}, A: 1, B: 0, Shape: []int{backend.RandStateLen}},
		{Op: backend.OpRandUniform, In: []int{1}, Start: start, Shape: []int{rows, cols}},
	}, Outputs: []backend.Output{{Node: 2, Arg: 1}}}
	for _, name := range devices(t) {
		be := open(t, name)
		d := be.(*device)
		if name == VulkanName && !d.drawsPhilox {
			t.Errorf("%s: probeDraw found no Philox draw in the device's arange: is ggml built without patch 0010?", name)
		}
		keep := d.drawsPhilox
		for _, onDevice := range []bool{true, false} {
			if d.isCPU && !onDevice {
				continue // ggml-cpu runs ag_rand_uniform either way
			}
			t.Run(fmt.Sprintf("%s on device %v", name, onDevice), func(t *testing.T) {
				d.mu.Lock()
				d.drawsPhilox = onDevice && !d.isCPU
				d.mu.Unlock()
				defer func() { d.mu.Lock(); d.drawsPhilox = keep; d.mu.Unlock() }()
				graphs := []*backend.Graph{fromArg}
				if onDevice {
					graphs = append(graphs, computed) // the host fill reads its state from an arg
				}
				for _, g := range graphs {
					runSpecial(t, be, g, state, [][]float32{want}, "draw")
				}
				ops := loweredOps(t, d, fromArg)
				if arange := strings.Contains(ops, "ARANGE"); arange != (onDevice && !d.isCPU) {
					t.Errorf("%s on device %v: rand_uniform lowered to %s", name, onDevice, ops)
				}
			})
		}
	}
}
