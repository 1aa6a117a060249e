package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
)

// rows of a [n, d] matrix as float64, for hand computations
func rowsOf(v []float32, d int) [][]float64 {
	var out [][]float64
	for i := 0; i < len(v); i += d {
		r := make([]float64, d)
		for j := range r {
			r[j] = float64(v[i+j])
		}
		out = append(out, r)
	}
	return out
}

func checkNear(t *testing.T, name string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		if !(math.Abs(float64(got[i])-want[i]) <= tol*(1+math.Abs(want[i]))) {
			t.Errorf("%s[%d] = %g, want %g", name, i, got[i], want[i])
		}
	}
}

func TestLayerNormRMSNorm(t *testing.T) {
	dev := openDev(t)
	const n, d = 3, 5
	xs := []float32{1, 2, 3, 4, 5, -1, 0.5, 0, 2, 7, 100, 100.5, 99.5, 101, 100}
	gain := []float32{1, 2, 0.5, -1, 3}
	bias := []float32{0, 0.1, -0.2, 0.3, 1}
	ln := NewLayerNorm(dev, d, 1e-5, true)
	ln.Gain, ln.Bias = dev.Param(gain, d), dev.Param(bias, d)
	rms := NewRMSNorm(dev, d, 1e-6)
	rms.Gain = dev.Param(gain, d)
	x := dev.Tensor(xs, n, d)
	var wantLN, wantRMS []float64
	for _, r := range rowsOf(xs, d) {
		mean, ms := 0.0, 0.0
		for _, v := range r {
			mean += v / d
			ms += v * v / d
		}
		variance := 0.0
		for _, v := range r {
			variance += (v - mean) * (v - mean) / d
		}
		for j, v := range r {
			wantLN = append(wantLN, (v-mean)/math.Sqrt(variance+1e-5)*float64(gain[j])+float64(bias[j]))
			wantRMS = append(wantRMS, v/math.Sqrt(ms+1e-6)*float64(gain[j]))
		}
	}
	got, err := ln.Forward(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "LayerNorm", got, wantLN, 1e-4) // row 3: mean 100, variance 0.3 (two passes keep it)
	got, err = rms.Forward(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "RMSNorm", got, wantRMS, 1e-5)
	if ps := ln.Params(); len(ps) != 2 || NewLayerNorm(dev, d, 1e-5, false).Params() != nil {
		t.Errorf("LayerNorm params: %d, and without affine: not nil", len(ps))
	}

	// gradients with respect to the input, gain and bias, on a 3-D input
	{
		xp := dev.Param([]float32{0.3, -1, 2, 0.1, 0.7, -0.4, 1.5, 0.2, -2, 0.9, 0.05, 1, -0.3, 0.6, 0.4, -1.1, 0.8, 0.2, 0.9, -0.5, 1.2, 0.3, -0.7, 0.1, 0.5, 1.4, -0.9, 0.0, 0.3, 0.8}, 2, 3, d)
		w := dev.Tensor([]float32{0.3, -1, 0.5, 2, 0.1}, d) // weights so the loss is not a plain sum
		if err := core.Gradcheck(func() *core.Tensor {
			return core.Sum(core.Mul(core.Mul(ln.Forward(xp), ln.Forward(xp)), w))
		}, []*core.Tensor{xp, ln.Gain, ln.Bias}, nil); err != nil {
			t.Errorf("LayerNorm: %v", err)
		}
		if err := core.Gradcheck(func() *core.Tensor {
			return core.Sum(core.Mul(core.Mul(rms.Forward(xp), rms.Forward(xp)), w))
		}, []*core.Tensor{xp, rms.Gain}, nil); err != nil {
			t.Errorf("RMSNorm: %v", err)
		}
	}
}

func TestEmbedding(t *testing.T) {
	dev := openDev(t)
	e := NewEmbedding(dev, 4, 3, Values([]float32{0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}), nil)
	idx := dev.Tensor([]float32{2, 0, 2, 3, 1, 2}, 2, 3)
	y := e.Forward(idx)
	if !slices.Equal(y.Shape(), []int{2, 3, 3}) {
		t.Fatalf("shape %v, want [2 3 3]", y.Shape())
	}
	// loss = sum(y * weights): the gradient of row r is the sum of the
	// weights of the positions that read r (a scatter-add).
	wts := make([]float32, 18)
	for i := range wts {
		wts[i] = float32(i + 1)
	}
	loss := core.Sum(core.Mul(y, dev.Tensor(wts, 2, 3, 3)))
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	g, err := e.W.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 12)
	for pos, r := range []int{2, 0, 2, 3, 1, 2} {
		for j := range 3 {
			want[r*3+j] += float64(wts[pos*3+j])
		}
	}
	checkNear(t, "Embedding grad", g, want, 0)

	vals, err := e.Forward(dev.Tensor([]float32{3, 1}, 2)).Data()
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "Embedding", vals, []float64{30, 31, 32, 10, 11, 12}, 0)
	for _, bad := range []float32{4, -1, float32(math.NaN())} {
		vals, err := e.Forward(dev.Tensor([]float32{1, bad}, 2)).Data()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if !math.IsNaN(float64(v)) {
				t.Errorf("index %g: output %d is %g, want NaN (no silent clamp)", bad, i, v)
				break
			}
		}
	}
}

func TestFlatten(t *testing.T) {
	dev := openDev(t)
	x := dev.Tensor(make([]float32, 2*3*4), 2, 3, 4)
	if s := (Flatten{}).Forward(x).Shape(); !slices.Equal(s, []int{2, 12}) {
		t.Errorf("Flatten: %v, want [2 12]", s)
	}
	m := Sequential{Flatten{}, NewLinear(dev, 12, 1, true, NewRNG(1))}
	if s := m.Forward(x).Shape(); !slices.Equal(s, []int{2, 1}) {
		t.Errorf("Flatten+Linear: %v", s)
	}
}

func TestLayerPanics(t *testing.T) {
	dev := openDev(t)
	ln := NewLayerNorm(dev, 4, 1e-5, true)
	cases := []panicCase{
		{"ln-dim", "nn.LayerNorm.Forward: input of shape [2 3], want a last dimension of 4", func() { ln.Forward(dev.Tensor(make([]float32, 6), 2, 3)) }},
		{"ln-eps", "nn.NewLayerNorm: eps 0", func() { NewLayerNorm(dev, 4, 0, true) }},
		{"rms-eps", "nn.NewRMSNorm: eps NaN", func() { NewRMSNorm(dev, 4, float32(math.NaN())) }},
		{"emb-size", "nn.NewEmbedding: vocab 0, dim 3", func() { NewEmbedding(dev, 0, 3, nil, NewRNG(1)) }},
		{"param-count", "nn.NewParam: the initializer gave 2 values for shape [3]", func() { NewParam(dev, Values([]float32{1, 2}), nil, 3) }},
		{"gain", "nn.KaimingNormal: gain -1", func() { KaimingNormal(-1) }},
		{"nil-rng", "nn.NewEmbedding: nil rng", func() { NewEmbedding(dev, 4, 3, nil, nil) }},
		{"nil-rng-own-init", "nn.NewParam: nil rng for an initializer that draws, shape [4 3]", func() {
			NewParam(dev, func(shape []int, rng *rand.Rand) []float32 { return []float32{float32(rng.Float64())} }, nil, 4, 3)
		}},
	}
	checkPanics(t, cases)
}

func TestInitializers(t *testing.T) {
	const fi, fo = 300, 200
	shape := []int{fi, fo}
	stats := func(v []float32) (mean, std, maxAbs float64) {
		for _, x := range v {
			mean += float64(x) / float64(len(v))
			maxAbs = math.Max(maxAbs, math.Abs(float64(x)))
		}
		for _, x := range v {
			std += (float64(x) - mean) * (float64(x) - mean) / float64(len(v))
		}
		return mean, math.Sqrt(std), maxAbs
	}
	cases := []struct {
		name      string
		init      Initializer
		std, mean float64
		bound     float64 // 0: unbounded (normal)
	}{
		{"glorot-uniform", GlorotUniform(2), 2 * math.Sqrt(6.0/(fi+fo)) / math.Sqrt(3), 0, 2 * math.Sqrt(6.0/(fi+fo))},
		{"glorot-normal", GlorotNormal(1), math.Sqrt(2.0 / (fi + fo)), 0, 0},
		{"kaiming-uniform", KaimingUniform(ReLUGain), ReLUGain / math.Sqrt(fi), 0, ReLUGain * math.Sqrt(3.0/fi)},
		{"kaiming-normal", KaimingNormal(LeakyReLUGain(0.2)), math.Sqrt(2/1.04) / math.Sqrt(fi), 0, 0},
		{"normal", Normal(0.5, 0.02), 0.02, 0.5, 0},
		{"uniform", Uniform(-1, 3), 4 / math.Sqrt(12), 1, 3},
	}
	for _, c := range cases {
		v := c.init(shape, NewRNG(5))
		if len(v) != fi*fo {
			t.Fatalf("%s: %d values", c.name, len(v))
		}
		mean, std, maxAbs := stats(v)
		// 60000 draws: the sample std is within ~1% of the true one.
		if math.Abs(std-c.std) > 0.02*c.std || math.Abs(mean-c.mean) > 0.02*c.std+1e-9 {
			t.Errorf("%s: mean %g, std %g; want %g, %g", c.name, mean, std, c.mean, c.std)
		}
		if c.bound > 0 && maxAbs > c.bound {
			t.Errorf("%s: |value| up to %g, beyond the bound %g", c.name, maxAbs, c.bound)
		}
		if w := c.init(shape, NewRNG(5)); !slices.Equal(v, w) {
			t.Errorf("%s: the same seed gave different values", c.name)
		}
		if w := c.init(shape, NewRNG(6)); slices.Equal(v, w) {
			t.Errorf("%s: another seed gave the same values", c.name)
		}
	}
	if fi, fo := Fans([]int{3, 4, 5}); fi != 15 || fo != 20 {
		t.Errorf("Fans([3 4 5]) = %d, %d; want 15, 20", fi, fo)
	}
	// NewLinear's default: TestLinearDefaultInit.
}

// Orthogonal gives W Wᵀ = gain² I for a wide W and Wᵀ W = gain² I for a
// tall one (a 3-D shape flattened past its first dimension), the same
// matrix for the same seed, and refuses a vector.
func TestOrthogonal(t *testing.T) {
	for _, shape := range [][]int{{4, 9}, {9, 4}, {5, 5}, {3, 2, 4}} {
		const gain = 1.5
		w := Orthogonal(gain)(shape, NewRNG(3))
		rows := shape[0]
		cols := len(w) / rows
		k, wide := min(rows, cols), rows <= cols
		for a := range k {
			for b := range k {
				var d float64
				for j := range max(rows, cols) {
					if wide {
						d += float64(w[a*cols+j]) * float64(w[b*cols+j])
					} else {
						d += float64(w[j*cols+a]) * float64(w[j*cols+b])
					}
				}
				want := 0.0
				if a == b {
					want = gain * gain
				}
				if math.Abs(d-want) > 1e-5 {
					t.Errorf("shape %v: (vector %d)·(vector %d) = %g, want %g", shape, a, b, d, want)
				}
			}
		}
		if again := Orthogonal(gain)(shape, NewRNG(3)); !slices.Equal(again, w) {
			t.Errorf("shape %v: the same seed gave another matrix", shape)
		}
	}
	checkPanics(t, []panicCase{
		{"vector", "nn.Orthogonal: shape [5] has fewer than 2 dimensions", func() { Orthogonal(1)([]int{5}, NewRNG(1)) }},
		{"gain", "nn.Orthogonal: gain 0", func() { Orthogonal(0) }},
	})
}
