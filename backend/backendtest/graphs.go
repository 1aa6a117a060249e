package backendtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/backend/reference"
)

// graphCase is a subtest beyond single ops: whole graphs, buffer and memory
// calls, errors, large tensors.
type graphCase struct {
	name string
	run  func(t *testing.T, s *suite)
}

// checked wraps a graph builder as a graphCase compared with Eval.
func checked(name string, build func(r *rand.Rand) instance) graphCase {
	return graphCase{name, func(t *testing.T, s *suite) { s.check(t, "graph", build(seeded(name))) }}
}

func graphCases() []graphCase {
	return []graphCase{
		checked("graph/mlp-forward", func(r *rand.Rand) instance { return mlp(r).inst(0) }),
		// The same program run three times on new inputs: results must follow
		// the data, not a cached first run.
		checked("graph/reuse-new-data", func(r *rand.Rand) instance {
			in := mlp(r).inst(0)
			in.runs = 3
			in.feed = func(int) map[int][]float32 { return map[int][]float32{0: uniform(r, 17*33, -1, 1)} }
			return in
		}),
		checked("graph/output-read-later", func(r *rand.Rand) instance {
			var b builder
			x := b.arg(uniform(r, 7*33, -2, 2), 7, 33)
			e := b.op(backend.OpExp, []int{7, 33}, x)
			b.out(e)
			sum := b.node(backend.Node{Op: backend.OpSum, In: []int{e}, Shape: []int{1, 33}, Axis: 0})
			b.out(sum)
			b.out(b.op(backend.OpMul, []int{7, 33}, e, sum))
			return b.inst(0)
		}),
		checked("graph/output-of-arg", func(r *rand.Rand) instance {
			var b builder
			x := b.arg(uniform(r, 65, -2, 2), 5, 13)
			b.out(x)
			b.out(x) // one node to two args
			b.out(b.op(backend.OpNeg, []int{5, 13}, x))
			return b.inst(0)
		}),
		// Args larger than what the graph reads or writes: only the prefix
		// may change.
		checked("graph/oversized-args", func(r *rand.Rand) instance {
			var b builder
			x := b.arg(uniform(r, 35+13, -2, 2), 7, 5)
			y := b.op(backend.OpTanh, []int{7, 5}, x)
			o := b.out(y)
			for range 9 {
				b.args[o] = append(b.args[o], 123.5)
			}
			return b.inst(0)
		}),
		// A read of w placed after its in-place update sees the new w; one
		// placed before sees the old.
		checked("graph/inplace-then-read", func(r *rand.Rand) instance {
			var b builder
			s := []int{3, 17}
			w := b.arg(uniform(r, 51, -1, 1), s...)
			g := b.arg(uniform(r, 51, -1, 1), s...)
			m := b.arg(make([]float32, 51), s...)
			v := b.arg(make([]float32, 51), s...)
			hp := b.arg(adamHP(1, 0.1), 7)
			b.out(b.op(backend.OpNeg, s, w))
			upd := b.op(backend.OpAdamW, s, w, g, m, v, hp)
			b.out(b.op(backend.OpNeg, s, w))
			b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{upd}, Shape: s, A: 1, B: 2}))
			in := b.inst(0)
			in.runs = 2
			return in
		}),
		checked("graph/train-step", trainStep),
		// Rows 5.. (20 bytes into the labels, 100 into the logits) read by
		// a softmax and a cross-entropy, as GPT2.Loss's chunks of rows
		// read them: ggml-vulkan's kernels bind a view at its offset and
		// asserted it aligned, aborting the process.
		checked("graph/slice-rows-unaligned", func(r *rand.Rand) instance {
			var b builder
			x := b.arg(uniform(r, 16*5, -4, 4), 16, 5)
			lab := make([]float32, 16)
			for i := range lab {
				lab[i] = float32(r.IntN(5))
			}
			y := b.arg(lab, 16)
			xs := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{x}, Start: 5, Shape: []int{11, 5}})
			ys := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{y}, Start: 5, Shape: []int{11}})
			b.out(b.node(backend.Node{Op: backend.OpSoftmax, In: []int{xs}, Shape: []int{11, 5}}))
			b.out(b.node(backend.Node{Op: backend.OpCrossEntropy, In: []int{xs, ys}, Shape: []int{}}))
			return b.inst(0)
		}),
		{"graph/rebind-buffers", testRebind},
		{"graph/node-timer", testNodeTimer},
		{"graph/run-read", testRunReader},
		{"graph/profile-shares", testProfileShares},
		{"graph/invalid", testInvalid},
		{"buffers/write-read", testBuffers},
		{"buffers/out-of-range", testBufferErrors},
		{"memory", testMemory},
		{"large/add-40M", testLargeAdd},
		{"large/get_rows-33M", testLargeGetRows},
		{"limits", testLimits},
	}
}

// mlp builds a 2-layer MLP forward over x [17, 33] (arg 0) with two outputs
// and the hidden activation read twice.
func mlp(r *rand.Rand) *builder {
	const bt, in, hid, out = 17, 33, 65, 10
	var b builder
	x := b.arg(uniform(r, bt*in, -1, 1), bt, in)
	w1 := b.arg(uniform(r, in*hid, -0.3, 0.3), in, hid)
	b1 := b.arg(uniform(r, hid, -0.1, 0.1), hid)
	w2 := b.arg(uniform(r, hid*out, -0.3, 0.3), hid, out)
	b2 := b.arg(uniform(r, out, -0.1, 0.1), out)
	h := b.op(backend.OpReLU, []int{bt, hid}, b.op(backend.OpAdd, []int{bt, hid}, b.op(backend.OpMatMul, []int{bt, hid}, x, w1), b1))
	y := b.op(backend.OpAdd, []int{bt, out}, b.op(backend.OpMatMul, []int{bt, out}, h, w2), b2)
	b.out(b.op(backend.OpLogSoftmax, []int{bt, out}, y))
	b.out(b.node(backend.Node{Op: backend.OpSum, In: []int{h}, Shape: []int{bt, 1}, Axis: 1}))
	return &b
}

// trainStep is a whole training step as core lowers it: MLP forward,
// cross-entropy through log-softmax and one-hot, the backward in matmuls with
// transposed operands and a ReLU mask, then AdamW on W1 and SGD on W2; run
// three times so the updated weights feed the next step.
func trainStep(r *rand.Rand) instance {
	const bt, in, hid, out = 9, 17, 33, 5
	var b builder
	x := b.arg(uniform(r, bt*in, -1, 1), bt, in)
	labels := make([]float32, bt)
	for i := range labels {
		labels[i] = float32(r.IntN(out))
	}
	lab := b.arg(labels, bt)
	w1 := b.arg(uniform(r, in*hid, -0.5, 0.5), in, hid)
	w2 := b.arg(uniform(r, hid*out, -0.5, 0.5), hid, out)
	m1 := b.arg(make([]float32, in*hid), in, hid)
	v1 := b.arg(make([]float32, in*hid), in, hid)
	hp1 := b.arg(adamHP(1, 0.01), 7)
	vel2 := b.arg(make([]float32, hid*out), hid, out)
	hp2 := b.arg([]float32{0.1, 0.9, 0}, 3)
	sBH, sBO := []int{bt, hid}, []int{bt, out}
	z1 := b.op(backend.OpMatMul, sBH, x, w1)
	h := b.op(backend.OpReLU, sBH, z1)
	z2 := b.op(backend.OpMatMul, sBO, h, w2)
	oh := b.op(backend.OpOneHot, sBO, lab)
	picked := b.op(backend.OpMul, sBO, oh, b.op(backend.OpLogSoftmax, sBO, z2))
	rows := b.node(backend.Node{Op: backend.OpSum, In: []int{picked}, Shape: []int{bt, 1}, Axis: 1})
	total := b.node(backend.Node{Op: backend.OpSum, In: []int{rows}, Shape: []int{1, 1}, Axis: 0})
	b.out(b.node(backend.Node{Op: backend.OpAffine, In: []int{total}, Shape: []int{1, 1}, A: -1.0 / bt}))
	diff := b.op(backend.OpSub, sBO, b.op(backend.OpSoftmax, sBO, z2), oh)
	dz2 := b.node(backend.Node{Op: backend.OpAffine, In: []int{diff}, Shape: sBO, A: 1.0 / bt})
	dw2 := b.node(backend.Node{Op: backend.OpMatMul, In: []int{h, dz2}, Shape: []int{hid, out}, TransA: true})
	dh := b.node(backend.Node{Op: backend.OpMatMul, In: []int{dz2, w2}, Shape: sBH, TransB: true})
	mask := b.node(backend.Node{Op: backend.OpInside, In: []int{z1}, Shape: sBH, A: 0, B: 3.4e38})
	dz1 := b.op(backend.OpMul, sBH, dh, mask)
	dw1 := b.node(backend.Node{Op: backend.OpMatMul, In: []int{x, dz1}, Shape: []int{in, hid}, TransA: true})
	b.op(backend.OpAdamW, []int{in, hid}, w1, dw1, m1, v1, hp1)
	b.op(backend.OpSGD, []int{hid, out}, w2, dw2, vel2, hp2)
	inst := b.inst(0)
	inst.runs = 3
	inst.feed = func(k int) map[int][]float32 { return map[int][]float32{6: adamHP(k+1, 0.01)} }
	return inst
}

// testRebind runs one program over two different sets of buffers, in turns:
// a backend caching bindings by program would read the first set again.
func testRebind(t *testing.T, s *suite) {
	r := seeded("graph/rebind-buffers")
	b1, b2 := mlp(r), mlp(r)
	g := &b1.g
	prog, err := s.compile(g)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	defer prog.Release()
	sets := [][]backend.Buffer{s.upload(t, b1.args), s.upload(t, b2.args)}
	refs := [][][]float64{to64(b1.args), to64(b2.args)}
	for k := range 4 {
		set, ref := sets[k%2], refs[k%2]
		if _, err := Eval(g, ref); err != nil {
			t.Fatalf("reference: %v", err)
		}
		info, err := prog.Run(set)
		if err != nil {
			t.Fatalf("run %d: %v", k, err)
		}
		if info.Launches < 1 || info.DeviceTime < 0 {
			t.Errorf("run %d: RunInfo %+v: want at least one launch and a time >= 0", k, info)
		}
		s.compareArgs(t, g, set, ref, tolerances["graph"], fmt.Sprintf("run %d on buffer set %d", k, k%2))
	}
}

// testNodeTimer checks that a program implementing NodeTimer computes the
// same results through RunTimed and reports one time per node.
func testNodeTimer(t *testing.T, s *suite) {
	b := mlp(seeded("graph/node-timer"))
	nt := s.nodeTimer(t, &b.g, "per-node device times")
	if s.caps.Timer == "" {
		t.Errorf("%s programs time nodes but Caps.Timer does not say how", s.caps.Name)
	}
	bufs := s.upload(t, b.args)
	if _, err := nt.RunTimed(bufs, backend.NewNodeTimes(1)); err == nil {
		t.Error("RunTimed with node times of the wrong length succeeded")
	}
	times := backend.NewNodeTimes(len(b.g.Nodes))
	if _, err := nt.RunTimed(bufs, times); err != nil {
		t.Fatalf("RunTimed: %v", err)
	}
	var total time.Duration
	for i, d := range times.Dur {
		n := &b.g.Nodes[i]
		switch {
		case d < 0:
			t.Errorf("node %d (%v): time %v < 0", i, n.Op, d)
		case n.Op == backend.OpArg && (times.How[i] != backend.TimeNone || d != 0):
			t.Errorf("arg node %d: time %v (%d), want none", i, d, times.How[i])
		case n.Op == backend.OpMatMul && times.How[i] == backend.TimeNone:
			t.Errorf("matmul node %d ran but has no time", i)
		}
		total += d
	}
	if total <= 0 {
		t.Errorf("RunTimed: all node times zero: %v", times.Dur)
	}
	ref := to64(b.args)
	if _, err := Eval(&b.g, ref); err != nil {
		t.Fatalf("reference: %v", err)
	}
	s.compareArgs(t, &b.g, bufs, ref, tolerances["graph"], "RunTimed")
}

// testRunReader checks a program's RunRead against Run and Read: the same
// bits, from an offset, each read after its own run's writes (a graph that
// adds 1 to its arg in place, read after every run), and a read out of
// range or of no buffer fails without running.
func testRunReader(t *testing.T, s *suite) {
	b := mlp(seeded("graph/run-read"))
	prog, err := s.compile(&b.g)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(prog.Release)
	rr, ok := prog.(backend.RunReader)
	if !ok {
		testenv.Skipf(t, "%s programs do not implement backend.RunReader: RunRead untested", s.caps.Name)
	}
	o := b.g.Outputs[0].Arg
	plain := s.upload(t, b.args)
	if _, err := prog.Run(plain); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := make([]float32, len(b.args[o]))
	if err := s.be.Read(plain[o], 0, want); err != nil {
		t.Fatalf("Read: %v", err)
	}
	bufs := s.upload(t, b.args)
	got := make([]float32, len(want)-3)
	if _, err := rr.RunRead(bufs, bufs[o], 3, got); err != nil {
		t.Fatalf("RunRead: %v", err)
	}
	if i := FirstBitDiff(got, want[3:]); i >= 0 {
		t.Fatalf("RunRead from element 3: element %d is %v, Run and Read give %v", i, got[i], want[3+i])
	}

	// x += 1 in place, read after each run.
	g := &backend.Graph{NumArgs: 1, Nodes: []backend.Node{{Op: backend.OpArg, Arg: 0, Shape: []int{5}},
		{Op: backend.OpAffine, In: []int{0}, Shape: []int{5}, A: 1, B: 1}}, Outputs: []backend.Output{{Node: 1, Arg: 0}}}
	inc, err := s.compile(g)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(inc.Release)
	rr, ok = inc.(backend.RunReader)
	if !ok {
		t.Fatalf("%s: one program implements backend.RunReader, another does not", s.caps.Name)
	}
	x := s.upload(t, [][]float32{{0, 1, 2, 3, 4}})
	v := make([]float32, 5)
	for run := 1; run <= 3; run++ {
		if _, err := rr.RunRead(x, x[0], 0, v); err != nil {
			t.Fatalf("RunRead %d: %v", run, err)
		}
		for i, f := range v {
			if f != float32(i+run) {
				t.Fatalf("RunRead %d: x = %v, want x0 + %d (the read must follow its run)", run, v, run)
			}
		}
	}
	if _, err := rr.RunRead(x, x[0], 1, v); err == nil {
		t.Error("RunRead of 5 elements from element 1 of 5 succeeded")
	}
	if _, err := rr.RunRead(x, nil, 0, v); err == nil {
		t.Error("RunRead of a nil buffer succeeded")
	}
	if err := s.be.Read(x[0], 0, v); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if v[0] != 3 {
		t.Errorf("x = %v after failed RunReads, want x0 + 3: a RunRead that fails must not run", v)
	}
}

// compareArgs reads every buffer and compares it with ref.
func (s *suite) compareArgs(t *testing.T, g *backend.Graph, bufs []backend.Buffer, ref [][]float64, tol Tol, what string) {
	t.Helper()
	for i, b := range bufs {
		got := make([]float32, len(ref[i]))
		if err := s.be.Read(b, 0, got); err != nil {
			t.Fatalf("%s: Read arg %d: %v", what, i, err)
		}
		if msg := compare(got, ref[i], nil, tol, 0, argShape(g, i)); msg != "" {
			t.Fatalf("%s: arg %d %s: %s", what, i, argRole(g, i), msg)
		}
	}
}

// testInvalid checks that graphs Validate rejects fail in Compile, without a
// panic, and that Run rejects a wrong args slice.
func testInvalid(t *testing.T, s *suite) {
	arg := func(a int, shape ...int) backend.Node { return backend.Node{Op: backend.OpArg, Arg: a, Shape: shape} }
	bad := map[string]backend.Graph{
		"no broadcast": {NumArgs: 2, Nodes: []backend.Node{arg(0, 3, 4), arg(1, 5), {Op: backend.OpAdd, In: []int{0, 1}, Shape: []int{3, 4}}}},
		"later input":  {NumArgs: 1, Nodes: []backend.Node{arg(0, 3), {Op: backend.OpNeg, In: []int{2}, Shape: []int{3}}, {Op: backend.OpNeg, In: []int{0}, Shape: []int{3}}}},
		"arg range":    {NumArgs: 1, Nodes: []backend.Node{arg(1, 3)}},
		"unknown op":   {NumArgs: 1, Nodes: []backend.Node{arg(0, 3), {Op: backend.Op(200), In: []int{0}, Shape: []int{3}}}},
		"output range": {NumArgs: 1, Nodes: []backend.Node{arg(0, 3)}, Outputs: []backend.Output{{Node: 0, Arg: 4}}},
		"matmul K":     {NumArgs: 2, Nodes: []backend.Node{arg(0, 3, 4), arg(1, 5, 2), {Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{3, 2}}}},
		"rank 7":       {NumArgs: 1, Nodes: []backend.Node{arg(0, 1, 1, 1, 1, 1, 1, 2)}},
		"adamw state not arg": {NumArgs: 4, Nodes: []backend.Node{arg(0, 3), arg(1, 3), arg(2, 3), arg(3, 7),
			{Op: backend.OpNeg, In: []int{2}, Shape: []int{3}}, {Op: backend.OpAdamW, In: []int{0, 1, 4, 2, 3}, Shape: []int{3}}}},
	}
	for name, g := range bad {
		if err := g.Validate(); err == nil {
			t.Fatalf("%s: the suite's bad graph passes Validate:\n%s", name, &g)
		}
		p, err := s.compile(&g)
		if err == nil {
			p.Release()
			t.Errorf("%s: Compile accepted an invalid graph:\n%s", name, &g)
		}
	}
	// A valid program run with the wrong number of args or a too small arg.
	g := &backend.Graph{NumArgs: 2, Nodes: []backend.Node{arg(0, 4, 8), {Op: backend.OpExp, In: []int{0}, Shape: []int{4, 8}}},
		Outputs: []backend.Output{{Node: 1, Arg: 1}}}
	p, err := s.compile(g)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	defer p.Release()
	bufs := s.upload(t, [][]float32{make([]float32, 32), make([]float32, 32), make([]float32, 5)})
	for name, args := range map[string][]backend.Buffer{"1 arg of 2": bufs[:1], "3 args of 2": bufs, "arg too small": {bufs[0], bufs[2]}} {
		if err := errNoPanic(func() error { _, err := p.Run(args); return err }); err == nil {
			t.Errorf("Run(%s) returned no error", name)
		} else if strings.HasPrefix(err.Error(), "panic:") {
			t.Errorf("Run(%s) panicked: %v", name, err)
		}
	}
}

func testBuffers(t *testing.T, s *suite) {
	for _, n := range []int{1, 3, 1000, 65537} {
		b, err := s.be.Alloc(n)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		if b.Len() != n {
			t.Fatalf("Alloc(%d).Len() = %d", n, b.Len())
		}
		got := make([]float32, n)
		for i := range got {
			got[i] = 1
		}
		if err := s.be.Read(b, 0, got); err != nil {
			t.Fatalf("Read(0..%d): %v", n, err)
		}
		for i, x := range got {
			if x != 0 {
				t.Fatalf("Alloc(%d) is not zero-filled: element %d = %g", n, i, x)
			}
		}
		// Write two ranges, then read a window across the first one.
		head := []float32{1.5, -2, 3.25}[:min(3, n)]
		if err := s.be.Write(b, 0, head); err != nil {
			t.Fatalf("Write(0, %v): %v", head, err)
		}
		want := make([]float32, n)
		copy(want, head)
		if n > 10 {
			mid := []float32{7, 8, 9, 10, 11}
			if err := s.be.Write(b, n-7, mid); err != nil {
				t.Fatalf("Write(%d, 5 values): %v", n-7, err)
			}
			copy(want[n-7:], mid)
		}
		off := max(0, n-9)
		win := make([]float32, n-off)
		if err := s.be.Read(b, off, win); err != nil {
			t.Fatalf("Read(%d, %d values): %v", off, len(win), err)
		}
		for i, x := range win {
			if x != want[off+i] {
				t.Fatalf("buffer of %d: Read(%d..) element %d = %g, want %g", n, off, off+i, x, want[off+i])
			}
		}
		if err := s.be.Read(b, n, nil); err != nil {
			t.Errorf("Read of 0 values at the end: %v", err)
		}
		s.be.Free(b)
	}
}

func testBufferErrors(t *testing.T, s *suite) {
	b, err := s.be.Alloc(100)
	if err != nil {
		t.Fatalf("Alloc(100): %v", err)
	}
	defer s.be.Free(b)
	calls := map[string]func() error{
		"Write past the end":  func() error { return s.be.Write(b, 95, make([]float32, 10)) },
		"Write at -1":         func() error { return s.be.Write(b, -1, make([]float32, 2)) },
		"Read past the end":   func() error { return s.be.Read(b, 99, make([]float32, 2)) },
		"Read at -1":          func() error { return s.be.Read(b, -1, make([]float32, 1)) },
		"Read 101 of 100":     func() error { return s.be.Read(b, 0, make([]float32, 101)) },
		"Alloc of -1 element": func() error { _, err := s.be.Alloc(-1); return err },
		// off+len overflows int: a check written as off+len > n passes and
		// the copy reaches outside the buffer (a crash in a device library).
		"Read 2 at MaxInt":  func() error { return s.be.Read(b, math.MaxInt, make([]float32, 2)) },
		"Write 2 at MaxInt": func() error { return s.be.Write(b, math.MaxInt, make([]float32, 2)) },
		"Read 1 at MaxInt":  func() error { return s.be.Read(b, math.MaxInt, make([]float32, 1)) },
		"Write 0 at MaxInt": func() error { return s.be.Write(b, math.MaxInt, nil) },
	}
	for name, f := range calls {
		err := errNoPanic(f)
		switch {
		case err == nil:
			t.Errorf("%s: no error", name)
		case strings.HasPrefix(err.Error(), "panic:"):
			t.Errorf("%s: %v", name, err)
		}
	}
}

func testMemory(t *testing.T, s *suite) {
	free, total, err := s.be.Memory()
	if errors.Is(err, backend.ErrMemoryUnknown) {
		t.Logf("memory: %v (checks against it are skipped)", err)
		return
	}
	if err != nil {
		t.Fatalf("Memory: %v", err)
	}
	if total == 0 || free > total {
		t.Fatalf("Memory() = free %d, total %d: want total > 0 and free <= total", free, total)
	}
	t.Logf("memory: %d MiB free of %d MiB", free>>20, total>>20)
}

// largeAlloc allocates n elements, skipping when the backend says it cannot.
func (s *suite) largeAlloc(t *testing.T, n int) backend.Buffer {
	t.Helper()
	if s.caps.MaxBufferElems > 0 && n > s.caps.MaxBufferElems {
		testenv.Skipf(t, "%d elements exceed %s's Caps.MaxBufferElems %d", n, s.caps.Name, s.caps.MaxBufferElems)
	}
	b, err := s.be.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	t.Cleanup(func() { s.be.Free(b) })
	return b
}

// fillChunks writes f(i) into b in 4M-element chunks (also exercising Write
// at offsets).
func (s *suite) fillChunks(t *testing.T, b backend.Buffer, f func(i int) float32) {
	const chunk = 1 << 22
	buf := make([]float32, chunk)
	for off := 0; off < b.Len(); off += chunk {
		part := buf[:min(chunk, b.Len()-off)]
		for i := range part {
			part[i] = f(off + i)
		}
		if err := s.be.Write(b, off, part); err != nil {
			t.Fatalf("Write(%d, %d values): %v", off, len(part), err)
		}
	}
}

// checkChunks reads b back in chunks and compares every element with want(i).
func (s *suite) checkChunks(t *testing.T, b backend.Buffer, want func(i int) float32) {
	const chunk = 1 << 22
	buf := make([]float32, chunk)
	for off := 0; off < b.Len(); off += chunk {
		part := buf[:min(chunk, b.Len()-off)]
		if err := s.be.Read(b, off, part); err != nil {
			t.Fatalf("Read(%d, %d values): %v", off, len(part), err)
		}
		for i, x := range part {
			if w := want(off + i); x != w {
				t.Fatalf("element %d = %g, want %g", off+i, x, w)
			}
		}
	}
}

// runGraph compiles and runs g once over bufs.
func (s *suite) runGraph(t *testing.T, g *backend.Graph, bufs []backend.Buffer) {
	t.Helper()
	p, err := s.compile(g)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, g)
	}
	defer p.Release()
	if _, err := p.Run(bufs); err != nil {
		t.Fatalf("Run: %v\n%s", err, g)
	}
}

// testLargeAdd adds two 40M-element tensors (160 MB each, past the 128 MiB
// storage binding limit of WebGPU defaults). Values are small integers and
// halves, so the sums are exact and checkable without a float64 copy.
func testLargeAdd(t *testing.T, s *suite) {
	if testing.Short() {
		t.Skip("large tensors skipped under -short")
	}
	const n = 40_000_000
	a, c, out := s.largeAlloc(t, n), s.largeAlloc(t, n), s.largeAlloc(t, n)
	fa := func(i int) float32 { return float32(i % 4099) }
	fb := func(i int) float32 { return float32(i%13) * 0.5 }
	s.fillChunks(t, a, fa)
	s.fillChunks(t, c, fb)
	sh := []int{n / 8, 8}
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: sh}, {Op: backend.OpArg, Arg: 1, Shape: sh},
		{Op: backend.OpAdd, In: []int{0, 1}, Shape: sh}}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
	s.runGraph(t, g, []backend.Buffer{a, c, out})
	s.checkChunks(t, out, func(i int) float32 { return fa(i) + fb(i) })
}

// testLargeGetRows gathers rows of a 2^19 x 64 table (33.5M elements): rows
// past 2^24/64 need element offsets that no f32 holds exactly.
func testLargeGetRows(t *testing.T, s *suite) {
	if testing.Short() {
		t.Skip("large tensors skipped under -short")
	}
	const rows, width, n = 1 << 19, 64, 1024
	tab := s.largeAlloc(t, rows*width)
	// value(r, c) = 8r + c%8: exact in f32 and unique per row.
	val := func(r, c int) float32 { return float32(8*r + c%8) }
	s.fillChunks(t, tab, func(i int) float32 { return val(i/width, i%width) })
	r := seeded("large/get_rows")
	idx := make([]float32, n)
	for i := range idx {
		idx[i] = float32(r.IntN(rows))
	}
	copy(idx, []float32{rows - 1, rows, -1, 1 << 18, rows + 12345, (1 << 18) + 1})
	ib := s.largeAlloc(t, n)
	if err := s.be.Write(ib, 0, idx); err != nil {
		t.Fatalf("Write indices: %v", err)
	}
	out := s.largeAlloc(t, n*width)
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{rows, width}}, {Op: backend.OpArg, Arg: 1, Shape: []int{n}},
		{Op: backend.OpGetRows, In: []int{0, 1}, Shape: []int{n, width}}}, Outputs: []backend.Output{{Node: 2, Arg: 2}}}
	s.runGraph(t, g, []backend.Buffer{tab, ib, out})
	s.checkChunks(t, out, func(i int) float32 {
		return val(reference.ClampIndex(float64(idx[i/width]), rows), i%width)
	})
}

// nodeTimer compiles g (released at the end of the test) and returns its
// NodeTimer, skipping loudly, naming what goes untested, where the
// backend's programs have none.
func (s *suite) nodeTimer(t testing.TB, g *backend.Graph, what string) backend.NodeTimer {
	t.Helper()
	prog, err := s.compile(g)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(prog.Release)
	nt, ok := prog.(backend.NodeTimer)
	if !ok {
		testenv.Skipf(t, "%s programs do not implement backend.NodeTimer: %s untested", s.caps.Name, what)
	}
	return nt
}
