package core

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// storeHalf packs a forward value right after it and unpacks it right
// before its first backward reader, which all backward readers then read;
// forward readers keep the f32 value; outputs, args, index operands,
// small values and backward values are left alone.
func TestStoreHalfGraph(t *testing.T) {
	const n = MinHalfStoreElems
	F, B := profile.PassForward, profile.PassBackward
	g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{n}},        // 0
		{Op: backend.OpTanh, In: []int{0}, Shape: []int{n}}, // 1 stored: read by 3 (F) and 4, 5 (B)
		{Op: backend.OpExp, In: []int{0}, Shape: []int{n}},  // 2 an output: not stored
		{Op: backend.OpNeg, In: []int{1}, Shape: []int{n}},  // 3 forward reader, read by 5 (B): stored too
		{Op: backend.OpMul, In: []int{1, 0}, Shape: []int{n}},
		{Op: backend.OpAdd, In: []int{1, 3}, Shape: []int{n}},
	}, Outputs: []backend.Output{{Node: 2, Arg: 1}, {Node: 5, Arg: 2}}}
	pass := []profile.Pass{F, F, F, F, B, B}
	remap, added := storeHalf(g, pass, PrecisionF16)
	if err := g.Validate(); err != nil {
		t.Fatalf("rewritten graph: %v\n%s", err, g)
	}
	ops := make([]backend.Op, len(g.Nodes))
	for i, nd := range g.Nodes {
		ops[i] = nd.Op
	}
	want := []backend.Op{backend.OpArg, backend.OpTanh, backend.OpPackF16, backend.OpExp, backend.OpNeg, backend.OpPackF16,
		backend.OpUnpackF16, backend.OpMul, backend.OpUnpackF16, backend.OpAdd}
	if !slices.Equal(ops, want) {
		t.Fatalf("ops %v, want %v\n%s", ops, want, g)
	}
	if !slices.Equal(remap, []int{0, 1, 3, 4, 7, 9}) {
		t.Errorf("remap %v", remap)
	}
	// the forward reader on tanh; each backward reader on an unpack made
	// before the first of them; the output exp untouched
	if !slices.Equal(g.Nodes[4].In, []int{1}) || !slices.Equal(g.Nodes[6].In, []int{2}) || !slices.Equal(g.Nodes[7].In, []int{6, 0}) ||
		!slices.Equal(g.Nodes[8].In, []int{5}) || !slices.Equal(g.Nodes[9].In, []int{6, 8}) {
		t.Errorf("inputs wrong:\n%s", g)
	}
	if g.Outputs[0].Node != 3 || g.Outputs[1].Node != 9 {
		t.Errorf("outputs %v", g.Outputs)
	}
	if len(added) != 4 || added[0] != (halfNode{2, 1, backend.OpPackF16}) || added[2] != (halfNode{6, 4, backend.OpUnpackF16}) || added[3] != (halfNode{8, 5, backend.OpUnpackF16}) {
		t.Errorf("added %v", added)
	}

	// Left alone: a value read as indices, a small one, a view, an arg.
	idx := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{
		{Op: backend.OpArg, Arg: 0, Shape: []int{n, 2}},
		{Op: backend.OpArg, Arg: 1, Shape: []int{n}},
		{Op: backend.OpAbs, In: []int{1}, Shape: []int{n}},                  // 2 read as indices below
		{Op: backend.OpAffine, In: []int{0}, Shape: []int{n, 2}, A: 2},      // 3 stored
		{Op: backend.OpSum, In: []int{0}, Shape: []int{1, 2}, Axis: 0},      // 4 small
		{Op: backend.OpReshape, In: []int{3}, Shape: []int{2 * n}},          // 5 a view
		{Op: backend.OpGetRows, In: []int{0, 2}, Shape: []int{n, 2}},        // B, 2 as indices
		{Op: backend.OpMul, In: []int{3, 4}, Shape: []int{n, 2}},            // B
		{Op: backend.OpMul, In: []int{0, 6}, Shape: []int{n, 2}},            // B, reads the arg
		{Op: backend.OpNeg, In: []int{5}, Shape: []int{2 * n}},              // B, reads the view
		{Op: backend.OpAbs, In: []int{2}, Shape: []int{n}},                  // B, reads 2 as a number
		{Op: backend.OpConcatRows, In: []int{7, 8}, Shape: []int{2 * n, 2}}, // B
	}, Outputs: []backend.Output{{Node: 11, Arg: 2}, {Node: 9, Arg: 2}, {Node: 10, Arg: 2}}}
	_, added = storeHalf(idx, []profile.Pass{F, F, F, F, F, F, B, B, B, B, B, B}, PrecisionBF16)
	if err := idx.Validate(); err != nil {
		t.Fatalf("rewritten graph: %v\n%s", err, idx)
	}
	if len(added) != 2 || idx.Nodes[added[0].node].Op != backend.OpPackBF16 || added[0].from != 3 {
		t.Errorf("added %v, want only the affine's pack and unpack\n%s", added, idx)
	}
}

// Under SetActivationStorage(PrecisionF16) a run's backward computes with
// the saved activations rounded to f16 and its forward is unchanged; the
// step's memory estimate falls by about half of the activations; the
// profile shows the conversions; PrecisionF32 restores the f32 gradients.
func TestActivationStorage(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		const m, k = 256, 64 // h is [256, 64]: 16384 values, stored
		r := rand.New(rand.NewPCG(7, 7))
		vals := func(n int, s float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(s * r.NormFloat64())
			}
			return v
		}
		xv, w1v, w2v := vals(m*k, 1), vals(k*k, 0.3), vals(k, 0.5)
		// step returns the loss and the gradients of w1 and w2.
		step := func() (float32, []float32, []float32) {
			x, w1, w2 := dev.Tensor(xv, m, k), dev.Param(w1v, k, k), dev.Param(w2v, k, 1)
			h := Tanh(MatMul(x, w1))
			y := MatMul(h, w2)
			loss := Sum(Mul(y, y)).Keep()
			if err := loss.Backward(); err != nil {
				t.Fatal(err)
			}
			l, err := loss.Item()
			if err != nil {
				t.Fatal(err)
			}
			g1, err := w1.Grad().Data()
			if err != nil {
				t.Fatal(err)
			}
			g2, err := w2.Grad().Data()
			if err != nil {
				t.Fatal(err)
			}
			return l, g1, g2
		}
		estimate := func() MemoryEstimate { // four such layers
			e, err := dev.EstimateMemory(func() error {
				h := dev.Tensor(xv, m, k)
				for range 4 {
					h = Tanh(MatMul(h, dev.Param(w1v, k, k)))
				}
				return Sum(Mul(h, h)).Backward()
			})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		l32, g1f, g2f := step()
		e32 := estimate()
		if _, err := dev.SetActivationStorage(PrecisionF16); err != nil {
			t.Fatal(err)
		}
		profile.Reset()
		prevF, prevB := profile.Forward(true), profile.Backward(true)
		l16, g1h, g2h := step()
		snap := profile.Snapshot()
		profile.Forward(prevF)
		profile.Backward(prevB)
		e16 := estimate()
		if prev, err := dev.SetActivationStorage(PrecisionF32); err != nil || prev != PrecisionF16 {
			t.Fatalf("SetActivationStorage(f32) = %v, %v: want f16, nil", prev, err)
		}
		if l16 != l32 {
			t.Errorf("loss %g with f16 storage, %g with f32: the forward must not change", l16, l32)
		}

		// The host's gradients, in float64, with h as the backward reads it.
		hv := make([]float64, m*k)
		yv := make([]float64, m)
		for i := range m {
			for j := range k {
				var s float64
				for q := range k {
					s += float64(xv[i*k+q]) * float64(w1v[q*k+j])
				}
				hv[i*k+j] = math.Tanh(s)
			}
			for j := range k {
				yv[i] += hv[i*k+j] * float64(w2v[j])
			}
		}
		grads := func(round bool) (g1, g2, mag1, mag2 []float64) {
			hr := make([]float64, len(hv))
			for i, h := range hv {
				hr[i] = h
				if round {
					hr[i] = float64(backend.RoundF16(float32(h)))
				}
			}
			g1, g2, mag1, mag2 = make([]float64, k*k), make([]float64, k), make([]float64, k*k), make([]float64, k)
			for i := range m {
				dy := 2 * yv[i]
				for j := range k {
					g2[j] += hr[i*k+j] * dy
					mag2[j] += math.Abs(hr[i*k+j] * dy)
					dpre := dy * float64(w2v[j]) * (1 - hr[i*k+j]*hr[i*k+j])
					for q := range k {
						g1[q*k+j] += float64(xv[i*k+q]) * dpre
						mag1[q*k+j] += math.Abs(float64(xv[i*k+q]) * dpre)
					}
				}
			}
			return
		}
		worst := func(got []float32, want, mag []float64) float64 {
			var w float64
			for i := range want {
				w = max(w, math.Abs(float64(got[i])-want[i])/mag[i])
			}
			return w
		}
		r1, r2, m1, m2 := grads(true)
		u1, u2, _, _ := grads(false)
		for _, c := range []struct {
			name           string
			got            []float32
			rounded, exact []float64
			mag            []float64
			wantRounded    bool
		}{{"w1 f16", g1h, r1, u1, m1, true}, {"w2 f16", g2h, r2, u2, m2, true}, {"w1 f32", g1f, r1, u1, m1, false}, {"w2 f32", g2f, r2, u2, m2, false}} {
			er, eu := worst(c.got, c.rounded, c.mag), worst(c.got, c.exact, c.mag)
			near, far := er, eu
			if !c.wantRounded {
				near, far = eu, er
			}
			t.Logf("%s gradient: error vs rounded-h %.2g, vs f32-h %.2g (of the sum of |terms|)", c.name, er, eu)
			// (a device's tanh a few ulp off the host's rounds a few values
			// to the neighbouring f16: 5e-6 of a sum here, 2e-5 on webgpu)
			if near > 5e-5 || far < 5*near {
				t.Errorf("%s gradient: error %.2g from the expected, %.2g from the other: want the expected within 5e-5 and 5x nearer", c.name, near, far)
			}
		}

		// Memory: four [256, 64] tanh values saved for the backward (64 KiB
		// each) are held in 32 KiB each: 448 KiB of intermediates become
		// 352 KiB (the backward's own temporaries stay f32).
		t.Logf("estimate f32: %v; f16: %v", e32, e16)
		if saved := int(e32.Intermediates) - int(e16.Intermediates); saved < 4*m*k*4/4 {
			t.Errorf("intermediates %d bytes with f16 storage, %d with f32: want at least %d less", e16.Intermediates, e32.Intermediates, 4*m*k)
		}

		for _, r := range []*profile.Report{snap.Forward, snap.Backward} {
			var names []string
			found := false
			for _, o := range r.ByOp {
				names = append(names, o.Op)
				found = found || o.Op == "ActivationStorage" && o.Nodes == 1
			}
			if !found {
				t.Errorf("%s profile ops %s: want ActivationStorage, one node", r.Pass, strings.Join(names, " "))
			}
		}
	})
}

// The range SetActivationStorage documents: an f16-stored activation past
// 65504 reads back as Inf in the backward (the loss stays finite); bf16
// holds it.
func TestActivationStorageRange(t *testing.T) {
	dev := open(t)
	x := make([]float32, MinHalfStoreElems)
	for i := range x {
		x[i] = 1
	}
	for _, c := range []struct {
		p    Precision
		want float64 // d/dx of sum((1e5 x)^2) at x = 1 as the backward computes it
	}{{PrecisionF32, 2e10}, {PrecisionF16, math.Inf(1)}, {PrecisionBF16, 2 * 1e5 * float64(backend.RoundBF16(1e5))}} {
		if _, err := dev.SetActivationStorage(c.p); err != nil {
			t.Fatal(err)
		}
		w := dev.Param(x, len(x))
		h := Affine(w, 1e5, 0)
		loss := Sum(Mul(h, h)).Keep()
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := w.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		l, _ := loss.Item()
		if math.IsInf(float64(l), 0) || !same(g[0], c.want, 1e-6) {
			t.Errorf("%v storage: loss %g, gradient %g: want a finite loss and %g", c.p, l, g[0], c.want)
		}
	}
	dev.SetActivationStorage(PrecisionF32)
}

// Under f16 matmuls and f16 activation storage a parameter's f16 working
// copy (the RoundF16 the forward product reads and the backward's dX
// product reads again) is held in 16 bits between the passes, while the
// parameter itself, the f32 master weight, stays an f32 arg.
func TestActivationStorageKeepsWeightCopiesInHalf(t *testing.T) {
	dev := open(t)
	prevP, err := dev.SetMatMulPrecision(PrecisionF16)
	if err != nil {
		t.Skipf("%s: %v", dev.Name(), err)
	}
	defer dev.SetMatMulPrecision(prevP)
	if _, err := dev.SetActivationStorage(PrecisionF16); err != nil {
		t.Skipf("%s: %v", dev.Name(), err)
	}
	defer dev.SetActivationStorage(PrecisionF32)
	const n = 64 // n*n = MinHalfStoreElems: large enough to be stored
	w := dev.Param(make([]float32, n*n), n, n)
	x := dev.Param(make([]float32, n*n), n, n) // a dX product needs x's gradient
	y := MatMul(x, w)
	Sum(Mul(y, y)).Backward()
	dev.lock()
	defer dev.mu.Unlock()
	defer dev.dropPending(errGradcheck)
	lw, err := dev.lower(false)
	if lw != nil {
		defer lw.free(dev)
	}
	if err != nil {
		t.Fatal(err)
	}
	g := &lw.g
	found := false
	for _, nd := range g.Nodes {
		if nd.Op != backend.OpPackF16 {
			continue
		}
		r := g.Nodes[nd.In[0]]
		if r.Op == backend.OpRoundF16 && g.Nodes[r.In[0]].Op == backend.OpArg && lw.nodeOfArg(w.stor) == r.In[0] {
			found = true
		}
	}
	if !found {
		t.Errorf("no pack_f16 of the weight's RoundF16 copy:\n%s", g)
	}
}
