package core

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

func init() {
	gradCases = append(gradCases,
		gradCase{name: "attention", shapes: [][]int{{2, 3, 4}, {2, 5, 4}, {2, 5, 3}}, f: func(p []*Tensor) *Tensor {
			return Attention(p[0], p[1], p[2], nil)
		}},
		gradCase{name: "attention-causal-heads", shapes: [][]int{{1, 2, 4, 3}, {1, 2, 4, 3}, {1, 2, 4, 2}}, f: func(p []*Tensor) *Tensor {
			return Attention(p[0], p[1], p[2], &AttentionOptions{Causal: true, Scale: 0.7})
		}},
		gradCase{name: "attention-rank2", shapes: [][]int{{3, 4}, {5, 4}, {5, 2}}, f: func(p []*Tensor) *Tensor {
			return Attention(p[0], p[1], p[2], nil)
		}},
		// k and v shared by the heads (broadcast batch dimensions)
		gradCase{name: "attention-broadcast-kv", shapes: [][]int{{2, 2, 3, 4}, {2, 1, 3, 4}, {1, 1, 3, 2}}, f: func(p []*Tensor) *Tensor {
			return Attention(p[0], p[1], p[2], &AttentionOptions{Causal: true})
		}},
		gradCase{name: "attention-padding-mask", shapes: [][]int{{2, 3, 4}, {2, 3, 4}, {2, 3, 2}}, f: func(p []*Tensor) *Tensor {
			mask := p[0].dev.Tensor([]float32{1, 1, 0, 0, 0, 0}, 2, 1, 3) // batch 1 has no key
			return Attention(p[0], p[1], p[2], &AttentionOptions{Mask: mask, Causal: true})
		}},
		// with dropout the weights are a MaskedSoftmax: the causal mask's
		// additive constant, a padding mask's Affine, no mask's zeros
		// (seeded, so the analytic and the numeric pass draw the same mask)
		gradCase{name: "attention-dropout", shapes: [][]int{{2, 2, 4, 3}, {2, 2, 4, 3}, {2, 2, 4, 2}}, f: func(p []*Tensor) *Tensor {
			if err := p[0].dev.Seed(3); err != nil {
				panic(err)
			}
			mask := p[0].dev.Tensor([]float32{1, 1, 0, 1, 0, 0, 0, 0}, 2, 1, 1, 4) // batch 1 has no key
			a := Attention(p[0], p[1], p[2], &AttentionOptions{Causal: true, Dropout: 0.25, Scale: 0.7})
			b := Attention(p[0], p[1], p[2], &AttentionOptions{Mask: mask, Causal: true, Dropout: 0.25})
			c := Attention(p[0], p[1], p[2], &AttentionOptions{Dropout: 0.25})
			return Add(Add(a, Scale(b, 0.5)), Scale(c, 0.25))
		}},
	)
}

// hostAttention is softmax(q kᵀ scale + mask) v in float64 for q [B, Tq, D],
// k [B, Tk, D], v [B, Tk, Dv], keep[b][i][j] (nil: all), rows with no key 0.
func hostAttention(q, k, v []float32, b, tq, tk, d, dv int, scale float64, keep func(b, i, j int) bool) []float64 {
	out := make([]float64, b*tq*dv)
	for n := range b {
		for i := range tq {
			s := make([]float64, tk)
			mx := math.Inf(-1)
			for j := range tk {
				if !keep(n, i, j) {
					continue
				}
				for l := range d {
					s[j] += float64(q[(n*tq+i)*d+l]) * float64(k[(n*tk+j)*d+l])
				}
				s[j] *= scale
				mx = math.Max(mx, s[j])
			}
			var z float64
			for j := range tk {
				if keep(n, i, j) {
					s[j] = math.Exp(s[j] - mx)
					z += s[j]
				} else {
					s[j] = 0
				}
			}
			for j := range tk {
				if z == 0 {
					break
				}
				for l := range dv {
					out[(n*tq+i)*dv+l] += s[j] / z * float64(v[(n*tk+j)*dv+l])
				}
			}
		}
	}
	return out
}

func TestAttentionValues(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(3, 9))
	rnd := func(n int) []float32 { return normals(r, n) }
	const b, tq, tk, d, dv = 3, 4, 5, 6, 2
	q, k, v := rnd(b*tq*d), rnd(b*tk*d), rnd(b*tk*dv)
	lens := []int{5, 2, 0} // keys each sequence has; the last has none
	pad := make([]float32, b*tk)
	for n, l := range lens {
		for j := range l {
			pad[n*tk+j] = 1
		}
	}
	for _, c := range []struct {
		name string
		opt  *AttentionOptions
		keep func(n, i, j int) bool
	}{
		{"plain", nil, func(int, int, int) bool { return true }},
		{"causal", &AttentionOptions{Causal: true}, func(_, i, j int) bool { return j <= i }},
		{"padding", &AttentionOptions{Mask: dev.Tensor(pad, b, 1, tk)}, func(n, _, j int) bool { return j < lens[n] }},
		{"both-scaled", &AttentionOptions{Mask: dev.Tensor(pad, b, 1, tk), Causal: true, Scale: 0.25}, func(n, i, j int) bool { return j < lens[n] && j <= i }},
	} {
		scale := 1 / math.Sqrt(d)
		if c.opt != nil && c.opt.Scale != 0 {
			scale = float64(c.opt.Scale)
		}
		want := hostAttention(q, k, v, b, tq, tk, d, dv, scale, c.keep)
		got, err := Attention(dev.Tensor(q, b, tq, d), dev.Tensor(k, b, tk, d), dev.Tensor(v, b, tk, dv), c.opt).Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5 || math.IsNaN(float64(got[i])) {
				t.Errorf("%s: output %d = %g, want %g", c.name, i, got[i], want[i])
				break
			}
		}
	}
}

func TestAttentionBadInputs(t *testing.T) {
	dev := open(t)
	x := dev.Full(0, 2, 3, 4)
	for _, c := range []struct {
		name    string
		f       func()
		message string
	}{
		{"rank", func() { Attention(dev.Full(0, 4), x, x, nil) }, "rank >= 2"},
		{"d", func() { Attention(x, dev.Full(0, 2, 3, 5), x, nil) }, "want q [..., Tq, D]"},
		{"dropout", func() { Attention(x, x, x, &AttentionOptions{Dropout: 1}) }, "dropout 1"},
		{"scale", func() { Attention(x, x, x, &AttentionOptions{Scale: float32(math.NaN())}) }, "scale NaN"},
		{"mask", func() { Attention(x, x, x, &AttentionOptions{Mask: dev.Full(1, 2, 4)}) }, "mask of shape [2 4]"},
		{"nil", func() { Attention(x, nil, x, nil) }, "core.Attention"},
	} {
		func() {
			defer func() {
				e := recover()
				if s, _ := e.(string); !strings.Contains(s, "core.Attention") || !strings.Contains(s, c.message) {
					t.Errorf("%s: panic %v, want core.Attention and %q", c.name, e, c.message)
				}
			}()
			c.f()
		}()
	}
}

// The causal mask is built and uploaded once per device and shape, not at
// every call.
func TestAttentionMaskMadeOnce(t *testing.T) {
	dev := open(t)
	q := dev.Tensor(make([]float32, 2*4*3), 2, 4, 3)
	var up [3]int
	for i := range up {
		if _, err := Attention(q, q, q, &AttentionOptions{Causal: true}).Data(); err != nil {
			t.Fatal(err)
		}
		up[i] = dev.Stats().Uploads
	}
	// q is small data used by one run, so it goes back to the host after
	// the first and is uploaded once more by the second (see hostSmall);
	// from then on nothing crosses. A mask made at every call would.
	if up[2] != up[1] || len(dev.consts) != 1 {
		t.Errorf("uploads after each call %v, %d cached constants: want the mask uploaded once and cached", up, len(dev.consts))
	}
}

// composite is Attention without the fused kernel: the weights
// materialized, as with dropout.
func compositeAttention(q, k, v *Tensor, opt *AttentionOptions) *Tensor {
	d := q.Shape()[q.Rank()-1]
	scale := float32(1 / math.Sqrt(float64(d)))
	var keep *Tensor
	if opt != nil && opt.Causal {
		tq, tk := q.Shape()[q.Rank()-2], k.Shape()[k.Rank()-2]
		tri := make([]float32, tq*tk)
		for i := range tq {
			for j := 0; j <= i && j < tk; j++ {
				tri[i*tk+j] = 1
			}
		}
		keep = q.dev.Tensor(tri, tq, tk)
	}
	if opt != nil && opt.Mask != nil {
		m := opt.Mask
		if keep != nil {
			m = Mul(keep, m)
		}
		keep = m
	}
	w := attentionWeights(MatMulT(q, k, false, true), keep, scale, true)
	return MatMul(w, v)
}

// The fused kernel and the composite agree on values and on every
// gradient, for batch dimensions that broadcast and masks with empty rows.
func TestAttentionFusedMatchesComposite(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(5, 1))
	rnd := func(shape ...int) *Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return dev.Param(x, shape...)
	}
	pad := dev.Tensor([]float32{1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, 2, 1, 1, 5) // batch 1 attends nothing
	for _, c := range []struct {
		name    string
		q, k, v []int
		opt     *AttentionOptions
	}{
		{"plain", []int{2, 3, 7, 8}, []int{2, 3, 5, 8}, []int{2, 3, 5, 4}, nil},
		{"causal-heads-share-kv", []int{2, 3, 6, 4}, []int{2, 1, 6, 4}, []int{2, 1, 6, 3}, &AttentionOptions{Causal: true}},
		{"padding", []int{2, 2, 4, 4}, []int{2, 2, 5, 4}, []int{2, 2, 5, 4}, &AttentionOptions{Mask: pad}},
		{"rank2", []int{9, 4}, []int{33, 4}, []int{33, 5}, &AttentionOptions{Causal: true}},
	} {
		q, k, v := rnd(c.q...), rnd(c.k...), rnd(c.v...)
		run := func(f func() *Tensor) [][]float32 {
			y := f()
			if err := Sum(Mul(y, y)).Backward(); err != nil {
				t.Fatal(err)
			}
			var out [][]float32
			for _, x := range []*Tensor{y, q.Grad(), k.Grad(), v.Grad()} {
				d, err := x.Data()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, d)
			}
			for _, p := range []*Tensor{q, k, v} {
				p.ZeroGrad()
			}
			return out
		}
		fused := run(func() *Tensor { return Attention(q, k, v, c.opt) })
		comp := run(func() *Tensor { return compositeAttention(q, k, v, c.opt) })
		for i, what := range []string{"output", "dq", "dk", "dv"} {
			if !near(fused[i], comp[i], 1e-5) {
				t.Errorf("%s: %s of the fused kernel %v, composite %v", c.name, what, fused[i][:min(6, len(fused[i]))], comp[i][:min(6, len(comp[i]))])
			}
		}
	}
}

// A key no query attends is not read: a NaN in its v stays out of the
// forward (flash attention's semantics; the composite's 0 * NaN is NaN).
func TestAttentionMaskedKeysNotRead(t *testing.T) {
	dev := open(t)
	q := dev.Full(0.5, 1, 2, 4)
	k := dev.Full(0.25, 1, 3, 4)
	v := dev.Tensor([]float32{1, 2, 3, 4, float32(math.NaN()), float32(math.Inf(1))}, 1, 3, 2)
	mask := dev.Tensor([]float32{1, 1, 0}, 1, 1, 3)
	got, err := Attention(q, k, v, &AttentionOptions{Mask: mask}).Data()
	if err != nil {
		t.Fatal(err)
	}
	if !near(got, []float32{2, 3, 2, 3}, 1e-6) {
		t.Errorf("attention with a masked NaN key = %v, want [2 3 2 3]", got)
	}
}

// Without dropout the forward stores no [Tq, Tk] weights: its memory grows
// with T, not T².
func TestAttentionFusedMemory(t *testing.T) {
	dev := open(t)
	const b, h, tt, d = 1, 4, 512, 16
	q := dev.Full(0.1, b, h, tt, d)
	est := func(drop float32) uint64 {
		e, err := dev.EstimateMemory(func() error {
			Sum(Attention(q, q, q, &AttentionOptions{Causal: true, Dropout: drop}))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return e.Intermediates
	}
	fused, comp := est(0), est(0.1)
	if weights := uint64(4 * b * h * tt * tt); fused >= weights || comp < weights {
		t.Errorf("intermediates fused %d B, composite %d B: want the fused below one [T, T] weight tensor (%d B) and the composite above", fused, comp, weights)
	}
}

// With dropout, attention's weights are a MaskedSoftmax (a native
// composite on ggml, its gradient another): its gradient agrees with
// finite differences on every device, through the causal mask's additive
// constant and a padding mask's, both kinds of batch rows included.
func TestAttentionDropoutGradient(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		r := rand.New(rand.NewPCG(9, 2))
		param := func(shape ...int) *Tensor {
			x := make([]float32, shape[0]*shape[1]*shape[2]*shape[3])
			for i := range x {
				x[i] = float32(2*r.Float64() - 1)
			}
			return dev.Param(x, shape...)
		}
		q, k, v := param(2, 2, 4, 3), param(2, 2, 4, 3), param(2, 2, 4, 2)
		mask := dev.Tensor([]float32{1, 1, 0, 1, 0, 0, 0, 0}, 2, 1, 1, 4) // batch 1 has no key
		f := func() *Tensor {
			if err := dev.Seed(3); err != nil {
				t.Fatal(err)
			}
			a := Attention(q, k, v, &AttentionOptions{Causal: true, Dropout: 0.25, Scale: 0.7})
			b := Attention(q, k, v, &AttentionOptions{Mask: mask, Dropout: 0.25})
			return Sum(Tanh(Add(a, b)))
		}
		if err := Gradcheck(f, []*Tensor{q, k, v}, nil); err != nil {
			t.Error(err)
		}
	})
}

// The causal mask has no empty row (row i keeps keys 0..i), so its
// backward takes no row maxima of it and no product of the weights by
// them (a pass over all the weights); a user's mask may have one, and
// does take them.
func TestAttentionCausalNoEmptyRows(t *testing.T) {
	dev := open(t)
	maxima := func(opt *AttentionOptions) int {
		q := dev.Param(make([]float32, 2*4*3), 2, 4, 3)
		if err := Sum(Attention(q, q, q, opt)).Backward(); err != nil {
			t.Fatal(err)
		}
		dev.lock()
		defer dev.mu.Unlock()
		n := 0
		for _, p := range dev.pending {
			if p.op == backend.OpMax {
				n++
			}
		}
		dev.pending = dev.pending[:0] // not run: only its graph is asked about
		clear(dev.rounds)
		return n
	}
	if n := maxima(&AttentionOptions{Causal: true}); n != 0 {
		t.Errorf("causal: %d max nodes in the backward, want 0", n)
	}
	mask := dev.Tensor([]float32{1, 1, 0, 1}, 1, 4)
	if n := maxima(&AttentionOptions{Mask: mask}); n == 0 {
		t.Errorf("a user's mask: no max node in the backward, want its rows' maxima")
	}
}

// At f16 matmul precision the fused attention's products take f16
// operands, as MatMul's do: q, k and v are rounded once (the backward's
// products read the same rounds) and the node says f16 (B = 1); its value
// is the f32 attention's of the rounded q, k, v, within f16's latitude.
func TestAttentionHalfPrecision(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(3, 4))
	vals := func(n int) []float32 { return normals(r, n) }
	qv, kv, vv := vals(2*5*8), vals(2*5*8), vals(2*5*8)
	run := func(p Precision) (out, g []float32, half float32, ins []backend.Op) {
		prev, err := dev.SetMatMulPrecision(p)
		if err != nil {
			t.Fatal(err)
		}
		defer dev.SetMatMulPrecision(prev)
		q, k, v := dev.Param(qv, 2, 5, 8), dev.Param(kv, 2, 5, 8), dev.Param(vv, 2, 5, 8)
		y := Attention(q, k, v, &AttentionOptions{Causal: true}).Keep()
		half = y.attr.B
		for _, in := range y.inputs[:3] {
			ins = append(ins, in.op)
		}
		if err := Sum(Mul(y, y)).Backward(); err != nil {
			t.Fatal(err)
		}
		if out, err = y.Data(); err != nil {
			t.Fatal(err)
		}
		if g, err = q.Grad().Data(); err != nil {
			t.Fatal(err)
		}
		return out, g, half, ins
	}
	out32, g32, b32, _ := run(PrecisionF32)
	out16, g16, b16, ins := run(PrecisionF16)
	if b32 != 0 || b16 != 1 {
		t.Errorf("attention's B: f32 %g, f16 %g; want 0 and 1", b32, b16)
	}
	for k, op := range ins {
		if op != backend.OpRoundF16 {
			t.Errorf("f16 attention: input %d is %s, want round_f16", k, op)
		}
	}
	// cpu computes the B = 0 result of rounded q, k, v: f16 rounding's
	// error in the scores, far below a wrong key's
	if !near(out16, out32, 1e-2) || near(out16, out32, 1e-7) {
		t.Errorf("f16 attention %v\nf32 %v: want them near, not equal", out16[:4], out32[:4])
	}
	if !near(g16, g32, 2e-2) {
		t.Errorf("f16 attention's q gradient %v\nf32 %v", g16[:4], g32[:4])
	}
}
