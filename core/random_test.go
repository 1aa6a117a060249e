package core

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// streamRef is what a fresh device seeded with seed draws for the shapes,
// in order: the reference of backend/philox.go on the host.
func streamRef(seed uint64, shapes ...[]int) [][]float32 {
	var out [][]float32
	var blk uint64
	for _, s := range shapes {
		v := make([]float32, backend.NumElems(s))
		backend.RandUniformFill(v, seed, 0, int(blk), 0)
		blk += randBlocks(s)
		out = append(out, v)
	}
	return out
}

func data(t *testing.T, x *Tensor) []float32 {
	t.Helper()
	v, err := x.Data()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Uniform draws are the Philox stream bit for bit on every backend, with
// the default seed and a chosen one, whether the draws share a run or not.
func TestRandUniformEveryBackend(t *testing.T) {
	shapes := [][]int{{3, 5}, {7}, {2, 3, 4, 5}, {1}}
	eachDevice(t, func(t *testing.T, dev *Device) {
		for _, seed := range []uint64{DefaultSeed, 12345} {
			if seed != DefaultSeed {
				if err := dev.Seed(seed); err != nil {
					t.Fatal(err)
				}
			}
			want := streamRef(seed, shapes...)
			// one run for all draws
			var xs []*Tensor
			for _, s := range shapes {
				xs = append(xs, dev.RandUniform(s...))
			}
			if err := dev.Sync(xs...); err != nil {
				t.Fatal(err)
			}
			for k, x := range xs {
				if got := data(t, x); !slices.Equal(got, want[k]) {
					t.Fatalf("seed %d draw %d %v: got %v, want %v", seed, k, shapes[k], got[:min(6, len(got))], want[k][:min(6, len(got))])
				}
			}
			// the stream went on: the next draw is the one after them
			next := streamRef(seed, append(slices.Clone(shapes), []int{9})...)[len(shapes)]
			if got := data(t, dev.RandUniform(9)); !slices.Equal(got, next) {
				t.Fatalf("seed %d: the draw after %d draws is %v, want %v", seed, len(shapes), got, next)
			}
			if err := dev.Seed(seed); err != nil {
				t.Fatal(err)
			}
			// one run per draw (eager) gives the same numbers
			prev := dev.SetEager(true)
			for k, s := range shapes {
				if got := data(t, dev.RandUniform(s...)); !slices.Equal(got, want[k]) {
					t.Fatalf("seed %d eager draw %d: got %v, want %v", seed, k, got[:min(6, len(got))], want[k][:min(6, len(got))])
				}
			}
			dev.SetEager(prev)
		}
	})
}

// The numbers look uniform: moments and a chi-square over 64 bins.
func TestRandUniformStatistics(t *testing.T) {
	dev := open(t)
	const n = 1 << 18
	v := data(t, Uniform(dev, -1, 3, n))
	var sum, sq float64
	bins := make([]int, 64)
	for _, x := range v {
		if !(x >= -1 && x < 3) {
			t.Fatalf("value %g outside [-1, 3)", x)
		}
		u := (float64(x) + 1) / 4
		sum += u
		sq += u * u
		bins[int(u*64)]++
	}
	mean, vr := sum/n, sq/n-(sum/n)*(sum/n)
	// standard errors: 1/sqrt(12n) = 5.6e-4 for the mean
	if math.Abs(mean-0.5) > 3e-3 || math.Abs(vr-1.0/12) > 2e-3 {
		t.Errorf("mean %g (want 0.5), variance %g (want %g)", mean, vr, 1.0/12)
	}
	chi := 0.0
	e := float64(n) / 64
	for _, c := range bins {
		chi += (float64(c) - e) * (float64(c) - e) / e
	}
	// 63 degrees of freedom: P(chi2 > 110) < 1e-4
	if chi > 110 {
		t.Errorf("chi-square %g over 64 bins, above 110", chi)
	}
}

// Normal has the moments of N(mean, std) and agrees across backends within
// NormalTolerance.
func TestNormal(t *testing.T) {
	const n = 1 << 16
	var ref []float32
	eachDevice(t, func(t *testing.T, dev *Device) {
		v := data(t, Normal(dev, 2, 0.5, n))
		var sum, sq float64
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("Normal gave %g", x)
			}
			sum += float64(x)
			sq += float64(x) * float64(x)
		}
		mean := sum / n
		std := math.Sqrt(sq/n - mean*mean)
		if math.Abs(mean-2) > 0.01 || math.Abs(std-0.5) > 0.01 {
			t.Errorf("mean %g (want 2), std %g (want 0.5)", mean, std)
		}
		if ref == nil {
			ref = v
			return
		}
		for i := range v {
			if d := math.Abs(float64(v[i] - ref[i])); d > NormalTolerance*(1+math.Abs(float64(ref[i]))) {
				t.Fatalf("element %d: %g, the first backend %g (difference %g)", i, v[i], ref[i], d)
			}
		}
	})
}

// Dropout drops a share p, scales the rest by 1/(1-p), and its gradient
// goes through the same mask.
func TestDropout(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		const n, p = 1 << 14, 0.3
		xs := make([]float32, n)
		for i := range xs {
			xs[i] = float32(i%7) + 1
		}
		x := dev.Param(xs, n)
		y := Dropout(x, p)
		loss := Sum(Mul(y, dev.Tensor(slices.Repeat([]float32{2}, n), n)))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		yv, g := data(t, y), data(t, x.Grad())
		dropped := 0
		for i := range yv {
			switch {
			case yv[i] == 0:
				dropped++
				if g[i] != 0 {
					t.Fatalf("element %d dropped but its gradient is %g", i, g[i])
				}
			case math.Abs(float64(yv[i]-xs[i]/(1-p))) > 1e-5*float64(xs[i]):
				t.Fatalf("element %d kept as %g, want %g", i, yv[i], xs[i]/(1-p))
			case math.Abs(float64(g[i])-2/(1-p)) > 1e-5:
				t.Fatalf("element %d kept, gradient %g, want %g", i, g[i], 2/(1-p))
			}
		}
		// 4 standard deviations of a binomial share
		if rate := float64(dropped) / n; math.Abs(rate-p) > 4*math.Sqrt(p*(1-p)/n) {
			t.Errorf("dropped %d of %d (%.4f), want %.2f", dropped, n, rate, p)
		}
		if got := Dropout(x, 0); got != x {
			t.Errorf("Dropout(x, 0) is not x")
		}
		for _, v := range data(t, Dropout(x, 1)) {
			if v != 0 {
				t.Fatalf("Dropout(x, 1) kept %g", v)
			}
		}
	})
}

// A captured function's draws are new at every replay, and a fresh device
// seeded alike draws the same sequence lazily.
func TestRandCapture(t *testing.T) {
	eachDevice(t, func(t *testing.T, dev *Device) {
		if err := dev.Seed(99); err != nil {
			t.Fatal(err)
		}
		fn := func(in []*Tensor) []*Tensor {
			return []*Tensor{Dropout(in[0], 0.5), Uniform(in[0].Device(), 0, 1, 3)}
		}
		c := NewCapture(dev, fn)
		ones := slices.Repeat([]float32{1}, 40)
		var captured [][][]float32
		for k := 0; k < 3; k++ {
			out, err := c.Call(In(ones, 40))
			if err != nil {
				t.Fatal(err)
			}
			captured = append(captured, out)
		}
		if c.Records() != 1 {
			t.Fatalf("%d recordings, want 1", c.Records())
		}
		for k := 1; k < 3; k++ {
			if slices.Equal(captured[k][0], captured[k-1][0]) || slices.Equal(captured[k][1], captured[k-1][1]) {
				t.Fatalf("replay %d drew the numbers of the call before: %v", k, captured[k][1])
			}
		}
		lazy, err := Open(dev.Name())
		if err != nil {
			t.Fatal(err)
		}
		defer lazy.Close()
		if err := lazy.Seed(99); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			outs := fn([]*Tensor{lazy.Tensor(ones, 40)})
			for j, o := range outs {
				if got := data(t, o); !slices.Equal(got, captured[k][j]) {
					t.Fatalf("call %d output %d: lazily %v, captured %v", k, j, got, captured[k][j])
				}
			}
		}
	})
}

func TestRandPanics(t *testing.T) {
	dev := open(t)
	for name, f := range map[string]func(){
		"Uniform":     func() { Uniform(dev, 1, 0, 3) },
		"Normal":      func() { Normal(dev, 0, -1, 3) },
		"Dropout":     func() { Dropout(dev.Tensor([]float32{1}, 1), 1.5) },
		"RandUniform": func() { dev.RandUniform(0) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !containsName(fmt.Sprint(r), name) {
					t.Errorf("%s: panic %v, want one naming core.%s", name, r, name)
				}
			}()
			f()
		}()
	}
}

func containsName(msg, name string) bool { return strings.Contains(msg, "core."+name) }

func ExampleDropout() {
	dev, _ := Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{1, 1, 1, 1, 1, 1, 1, 1}, 8)
	y, _ := Dropout(x, 0.5).Data() // each kept value scaled by 1/(1-0.5)
	kept := 0
	for _, v := range y {
		if v == 2 {
			kept++
		}
	}
	fmt.Println(len(y), kept > 0 && kept < 8)
	// Output: 8 true
}
