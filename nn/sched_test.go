package nn

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ag-go/ag/core"
)

func TestSchedules(t *testing.T) {
	c := func(frac, min float64) float64 { return min + (1-min)*(1+math.Cos(math.Pi*frac))/2 }
	cases := []struct {
		name string
		s    Schedule
		want []float64 // t = 0, 1, ...
	}{
		{"StepLR", StepLR(2, 0.5), []float64{1, 1, 0.5, 0.5, 0.25, 0.25, 0.125}},
		{"ExponentialLR", ExponentialLR(0.9), []float64{1, 0.9, 0.81, 0.729}},
		{"LinearWarmup", LinearWarmup(4, 0.2), []float64{0.2, 0.4, 0.6, 0.8, 1, 1}},
		{"CosineAnnealing", CosineAnnealing(4, 0.1), []float64{1, c(0.25, 0.1), c(0.5, 0.1), c(0.75, 0.1), 0.1, 0.1}},
		// cycles of 2, 4, 8 updates: restarts at t = 2 and t = 6
		{"SGDR", CosineAnnealingWarmRestarts(2, 2, 0), []float64{1, 0.5, 1, c(0.25, 0), 0.5, c(0.75, 0), 1, c(1.0/8, 0)}},
		{"SGDR-mult1", CosineAnnealingWarmRestarts(3, 1, 0.5), []float64{1, c(1.0/3, 0.5), c(2.0/3, 0.5), 1, c(1.0/3, 0.5)}},
		{"WarmupCosine", WarmupCosine(2, 6, 0), []float64{0.5, 1, 1, c(0.25, 0), 0.5, c(0.75, 0), 0, 0}},
		{"Sequence", Sequence(LinearWarmup(2, 0), 2, ExponentialLR(0.5)), []float64{0, 0.5, 1, 0.5, 0.25}},
		{"Chain", Chain(StepLR(1, 0.5), LinearWarmup(2, 0)), []float64{0, 0.25, 0.25, 0.125}},
	}
	for _, tc := range cases {
		for i, w := range tc.want {
			if g := tc.s(i); math.Abs(g-w) > 1e-12 {
				t.Errorf("%s(%d) = %g, want %g", tc.name, i, g, w)
			}
		}
	}
	for name, f := range map[string]func(){
		"nn.StepLR: step size 0":                            func() { StepLR(0, 0.5) },
		"nn.ExponentialLR: gamma -1":                        func() { ExponentialLR(-1) },
		"nn.CosineAnnealingWarmRestarts: t0 0":              func() { CosineAnnealingWarmRestarts(0, 1, 0) },
		"nn.LinearWarmup: steps 3, start factor 2":          func() { LinearWarmup(3, 2) },
		"nn.WarmupCosine: warmup 5, total 5":                func() { WarmupCosine(5, 5, 0) },
		"nn.CosineAnnealing: min factor 1.5, want a value ": func() { CosineAnnealing(3, 1.5) },
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); len(r) < len(name) || r[:len(name)] != name {
					t.Errorf("panic %q, want one starting %q", r, name)
				}
			}()
			f()
		}()
	}
}

// linearLoss is sum(w*c): its gradient is c whatever w is, so each SGD
// update (momentum 0) moves w by exactly -lr*factor*c.
func linearLoss(w *core.Tensor, c []float32) *core.Tensor {
	return core.Sum(core.Mul(w, w.Device().Tensor(c, len(c))))
}

func TestScheduledOptimizer(t *testing.T) {
	dev := openDev(t)
	c := []float32{1, -2, 0.5}
	sched := WarmupCosine(3, 10, 0.1)
	for _, captured := range []bool{false, true} {
		w := dev.Param([]float32{0, 0, 0}, 3)
		opt := WithSchedule(NewSGD([]*core.Tensor{w}, 0.1, 0), sched)
		var step *StepCapture
		if captured {
			step = CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return core.Sum(core.Mul(w, in[0])) })
		}
		compiles := dev.Stats().Compiles
		total := 0.0
		for i := range 12 {
			total += 0.1 * sched(i)
			if i == 4 {
				compiles = dev.Stats().Compiles
			}
			if captured {
				if _, err := step.Step(core.In(c, 3)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			opt.ZeroGrad()
			if err := linearLoss(w, c).Backward(); err != nil {
				t.Fatal(err)
			}
			if err := opt.Step(); err != nil {
				t.Fatal(err)
			}
			if err := dev.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := w.Data()
		if err != nil {
			t.Fatal(err)
		}
		for k := range c {
			if want := -total * float64(c[k]); math.Abs(float64(got[k])-want) > 1e-5 {
				t.Errorf("captured %t: w[%d] = %g, want %g", captured, k, got[k], want)
			}
		}
		if opt.StepCount() != 12 {
			t.Errorf("captured %t: step count %d, want 12", captured, opt.StepCount())
		}
		if n := dev.Stats().Compiles - compiles; n != 0 {
			t.Errorf("captured %t: %d compiles after warm-up: the rate should be a program input", captured, n)
		}
		if lr := opt.LR(4); math.Abs(float64(lr)-0.1*sched(3)) > 1e-7 {
			t.Errorf("LR(4) = %g, want %g", lr, 0.1*sched(3))
		}
	}
	bad := WithSchedule(NewSGD([]*core.Tensor{dev.Param([]float32{1}, 1)}, 0.1, 0), func(int) float64 { return math.NaN() })
	if err := bad.Step(); err == nil {
		t.Errorf("a NaN factor: no error")
	}
}

func TestClipGradNorm(t *testing.T) {
	dev := openDev(t)
	c := []float32{3, -4, 0} // norm 5
	for _, lazy := range []bool{false, true} {
		for _, maxNorm := range []float32{1, 10} {
			w := dev.Param([]float32{1, 1, 1}, 3)
			opt := NewSGD([]*core.Tensor{w}, 1, 0)
			if err := linearLoss(w, c).Backward(); err != nil {
				t.Fatal(err)
			}
			var norm float32
			if lazy {
				nt, err := ClipGradNormLazy(opt, maxNorm)
				if err != nil {
					t.Fatal(err)
				}
				if norm, err = nt.Item(); err != nil {
					t.Fatal(err)
				}
			} else {
				var err error
				if norm, err = ClipGradNorm(opt, maxNorm); err != nil {
					t.Fatal(err)
				}
			}
			if math.Abs(float64(norm)-5) > 1e-6 {
				t.Errorf("lazy %t: norm %g, want 5", lazy, norm)
			}
			scale := math.Min(1, float64(maxNorm)/(5+1e-6))
			got, err := w.Data()
			if err != nil {
				t.Fatal(err)
			}
			for k := range c {
				if want := 1 - scale*float64(c[k]); math.Abs(float64(got[k])-want) > 1e-6 {
					t.Errorf("lazy %t, max %g: w[%d] = %g, want %g", lazy, maxNorm, k, got[k], want)
				}
			}
			if opt.StepCount() != 1 {
				t.Errorf("step count %d, want 1", opt.StepCount())
			}
		}
	}
	// A NaN gradient: no update, an ErrNonFiniteNorm, the step count kept.
	w := dev.Param([]float32{1, 1, 1}, 3)
	opt := NewAdam([]*core.Tensor{w}, 0.1)
	if err := core.Sum(core.Mul(w, dev.Tensor([]float32{1, float32(math.NaN()), 1}, 3))).Backward(); err != nil {
		t.Fatal(err)
	}
	if _, err := ClipGradNorm(opt, 1); !errors.Is(err, ErrNonFiniteNorm) {
		t.Errorf("NaN gradient: err = %v, want ErrNonFiniteNorm", err)
	}
	if got, err := w.Data(); err != nil || got[0] != 1 || opt.StepCount() != 0 {
		t.Errorf("after a skipped step: w = %v (%v), step count %d", got, err, opt.StepCount())
	}
	if _, err := ClipGradNorm(opt, 0); err == nil {
		t.Errorf("max norm 0: no error")
	}
}

// Clipping with Adam: the scale reaches the update (fused into AdamW's 8th
// hyperparameter; AMSGrad's composite scales the gradients itself). Eps 1
// makes the step depend on the gradient's size: at step 1 the update is
// lr*g/(|g| + eps), with g the clipped gradient. Two parameters, so that
// a backend that fuses a run of updates (webgpu) scales them there too.
func TestClipGradNormAdam(t *testing.T) {
	dev := openDev(t)
	cs := [][]float32{{3, -4, 0}, {2, -14}} // norm 15
	for _, ams := range []bool{false, true} {
		for _, maxNorm := range []float32{1, 20} {
			var ws []*core.Tensor
			var loss *core.Tensor
			for _, c := range cs {
				w := dev.Param(make([]float32, len(c)), len(c))
				ws = append(ws, w)
				if l := linearLoss(w, c); loss == nil {
					loss = l
				} else {
					loss = core.Add(loss, l)
				}
			}
			opt := NewAdam(ws, 1)
			opt.Eps, opt.AMSGrad = 1, ams
			if err := loss.Backward(); err != nil {
				t.Fatal(err)
			}
			if _, err := ClipGradNorm(opt, maxNorm); err != nil {
				t.Fatal(err)
			}
			scale := math.Min(1, float64(maxNorm)/(15+1e-6))
			for i, w := range ws {
				got, err := w.Data()
				if err != nil {
					t.Fatal(err)
				}
				for k, c := range cs[i] {
					g := scale * float64(c)
					if want := -g / (math.Abs(g) + 1); math.Abs(float64(got[k])-want) > 2e-6 {
						t.Errorf("amsgrad %t, max %g: w%d[%d] = %g, want %g", ams, maxNorm, i, k, got[k], want)
					}
				}
			}
		}
	}
}

// Gradient accumulation: Backward adds into the gradients, so k
// micro-batches with the loss divided by k, then one Step, is one step on
// the whole batch (for a mean loss over equal micro-batches).
func TestGradientAccumulation(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(4)
	xs, ys := regression(r, 8, 3)
	mk := func() (Sequential, *Adam) {
		m := MLP(dev, []int{3, 5, 1}, core.Tanh, NewRNG(1))
		return m, NewAdam(m.Params(), 0.05)
	}
	whole, wholeOpt := mk()
	acc, accOpt := mk()
	for range 3 {
		wholeOpt.ZeroGrad()
		if err := MSELoss(whole.Forward(dev.Tensor(xs, 8, 3)), dev.Tensor(ys, 8, 1)).Backward(); err != nil {
			t.Fatal(err)
		}
		if err := wholeOpt.Step(); err != nil {
			t.Fatal(err)
		}
		accOpt.ZeroGrad()
		for k := range 2 { // two micro-batches of 4
			x := dev.Tensor(xs[k*12:(k+1)*12], 4, 3)
			y := dev.Tensor(ys[k*4:(k+1)*4], 4, 1)
			if err := core.Scale(MSELoss(acc.Forward(x), y), 0.5).Backward(); err != nil {
				t.Fatal(err)
			}
		}
		if err := accOpt.Step(); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range whole.Params() {
		a, err := p.Data()
		if err != nil {
			t.Fatal(err)
		}
		b, err := acc.Params()[i].Data()
		if err != nil {
			t.Fatal(err)
		}
		for k := range a {
			if math.Abs(float64(a[k]-b[k])) > 1e-5 {
				t.Fatalf("param %d element %d: whole batch %g, accumulated %g", i, k, a[k], b[k])
			}
		}
	}
}

// A transformer-style schedule: linear warm-up, then cosine decay, on
// AdamW, with clipping; the same wrapper works for any Optimizer.
func ExampleWithSchedule() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	model := MLP(dev, []int{2, 8, 1}, core.Tanh, NewRNG(3))
	// A peak rate that learns XOR in 100 steps (with 3e-3 the loss only
	// looked halved from the large first loss of ag's old Glorot init)
	opt := WithSchedule(NewAdamW(model.Params(), 3e-2, 0.01), WarmupCosine(10, 100, 0.1))
	x := dev.Tensor([]float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2)
	y := dev.Tensor([]float32{0, 1, 1, 0}, 4, 1)
	var first, last float32
	for i := range 100 {
		opt.ZeroGrad()
		loss := MSELoss(model.Forward(x), y)
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		if _, err := ClipGradNorm(opt, 1); err != nil { // runs forward+backward to read the norm
			panic(err)
		}
		last, _ = loss.Item()
		if i == 0 {
			first = last
		}
	}
	fmt.Printf("loss fell: %t; step %d, lr at step 10 %.4g, at 100 %.4g\n", last < first/2, opt.StepCount(), opt.LR(10), opt.LR(100))
	// Output: loss fell: true; step 100, lr at step 10 0.03, at 100 0.003008
}

// A step count loaded from a state file may be any int: every schedule is
// a closed form in t (SGDR's cycles with tMult 1 were a loop per cycle, so
// 2^50 hung the next Step).
func TestSchedulesLargeStep(t *testing.T) {
	c := func(frac, min float64) float64 { return min + (1-min)*(1+math.Cos(math.Pi*frac))/2 }
	const big = 1 << 50
	cases := []struct {
		name string
		s    Schedule
		t    int
		want float64
	}{
		{"SGDR-mult1", CosineAnnealingWarmRestarts(3, 1, 0), big, c(1.0/3, 0)}, // 2^50 = 1 mod 3
		{"SGDR-mult1-max", CosineAnnealingWarmRestarts(1000, 1, 0.5), math.MaxInt, c(807.0/1000, 0.5)},
		{"SGDR-mult2-start", CosineAnnealingWarmRestarts(1, 2, 0), big - 1, 1}, // cycle 50 starts at 2^50-1
		{"SGDR-mult2", CosineAnnealingWarmRestarts(1, 2, 0), big + big/2 - 1, 0.5},
		{"SGDR-mult2-max", CosineAnnealingWarmRestarts(1, 2, 0), math.MaxInt, 1}, // cycle 63 starts at 2^63-1
		{"SGDR-mult3-max", CosineAnnealingWarmRestarts(5, 3, 0.1), math.MaxInt, -1},
		{"StepLR", StepLR(1, 0.5), math.MaxInt, 0},
		{"ExponentialLR", ExponentialLR(1), math.MaxInt, 1},
		{"CosineAnnealing", CosineAnnealing(10, 0.2), math.MaxInt, 0.2},
		{"LinearWarmup", LinearWarmup(10, 0), math.MaxInt, 1},
		{"WarmupCosine", WarmupCosine(10, 20, 0.3), math.MaxInt, 0.3},
	}
	for _, tc := range cases {
		done := make(chan float64, 1)
		go func() { done <- tc.s(tc.t) }()
		select {
		case g := <-done:
			if tc.want < 0 {
				if !(g >= 0.1 && g <= 1) {
					t.Errorf("%s(%d) = %g, want a value in [0.1, 1]", tc.name, tc.t, g)
				}
			} else if math.Abs(g-tc.want) > 1e-12 {
				t.Errorf("%s(%d) = %g, want %g", tc.name, tc.t, g, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s(%d) still running after 10s", tc.name, tc.t)
		}
	}
}
