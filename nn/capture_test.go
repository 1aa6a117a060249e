package nn

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/profile"
)

// A captured step computes what the lazy step computes, moving only the
// packed inputs up and the loss down, in one launch (two with clipping,
// one again with OneRun).
func TestCaptureStepMatchesLazy(t *testing.T) {
	for _, c := range []struct {
		clip   float32
		oneRun bool
	}{{0, false}, {0.5, false}, {0.5, true}} {
		clip := c.clip
		dev := openDev(t)
		mk := func() (Sequential, *Adam) {
			m := MLP(dev, []int{6, 16, 3}, core.Tanh, rand.New(rand.NewPCG(7, 7)))
			return m, NewAdam(m.Params(), 0.01)
		}
		lazyM, lazyOpt := mk()
		capM, capOpt := mk()
		r := rand.New(rand.NewPCG(1, 1))
		xs, ys := make([]float32, 8*6), make([]float32, 8*3)
		step := CaptureStep(capOpt, func(in []*core.Tensor) *core.Tensor {
			return MSELoss(capM.Forward(in[0]), in[1])
		})
		step.MaxGradNorm, step.OneRun = clip, c.oneRun
		profile.Count(true)
		for i := range 6 {
			for k := range xs {
				xs[k] = float32(r.Float64()*2 - 1)
			}
			for k := range ys {
				ys[k] = float32(r.Float64())
			}
			// lazy reference, with the same clipping done by hand
			lazyOpt.ZeroGrad()
			x, y := dev.Tensor(xs, 8, 6), dev.Tensor(ys, 8, 3)
			l := MSELoss(lazyM.Forward(x), y)
			l.Backward()
			var scale, norm *core.Tensor
			if clip > 0 {
				norm = globalNorm(lazyM.Params()).Keep()
				scale = core.Clamp(core.Div(dev.Full(clip, 1), core.AddScalar(norm, 1e-6)), 0, 1)
			}
			next := lazyOpt.StepCount() + 1
			lazyOpt.Update(dev.Tensor(lazyOpt.Hyper(next), 7), scale)
			lazyOpt.SetStepCount(next)
			want, err := l.Item()
			if err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				profile.Count(true) // from here on only replays
			}
			got, err := step.Step(core.In(xs, 8, 6), core.In(ys, 8, 3))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(got-want)) > 1e-5*(1+math.Abs(float64(want))) {
				t.Errorf("clip %g one run %t step %d: captured loss %g, lazy %g", clip, c.oneRun, i, got, want)
			}
			if norm != nil {
				n, err := norm.Item()
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(float64(step.GradNorm-n)) > 1e-5*(1+math.Abs(float64(n))) {
					t.Errorf("clip %g one run %t step %d: GradNorm %g, lazy norm %g", clip, c.oneRun, i, step.GradNorm, n)
				}
			}
		}
		for i, p := range capM.Params() {
			a, _ := p.Data()
			b, _ := lazyM.Params()[i].Data()
			for k := range a {
				if math.Abs(float64(a[k]-b[k])) > 1e-5 {
					t.Fatalf("clip %g: param %d element %d: captured %g, lazy %g", clip, i, k, a[k], b[k])
				}
			}
		}
		// The last 4 captured steps (all replays) moved the packed inputs up
		// and the outputs down, once each per capture call.
		calls := 4
		if clip > 0 && !c.oneRun {
			calls = 8
		}
		for _, s := range profile.XferData().Sites {
			switch s.Site {
			case "capture inputs", "capture outputs":
				if s.Count != calls {
					t.Errorf("clip %g: %d transfers at %s over 4 steps, want %d", clip, s.Count, s.Site, calls)
				}
			case "inputs", "Data":
				// the lazy reference's own transfers
			default:
				t.Errorf("clip %g: unexpected transfer %+v", clip, s)
			}
		}
		profile.Count(false)
		if want := map[bool]int{true: 2, false: 1}[clip > 0 && !c.oneRun]; step.Records() != want {
			t.Errorf("clip %g one run %t: %d recordings, want %d", clip, c.oneRun, step.Records(), want)
		}
	}
}

func TestCaptureStepNonFinite(t *testing.T) {
	dev := openDev(t)
	m := MLP(dev, []int{2, 4, 1}, core.Tanh, rand.New(rand.NewPCG(2, 2)))
	opt := NewSGD(m.Params(), 0.1, 0)
	step := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor {
		return MSELoss(m.Forward(in[0]), in[1])
	})
	step.MaxGradNorm = 1
	if _, err := step.Step(core.In([]float32{1, 2}, 1, 2), core.In([]float32{1}, 1, 1)); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Params()[0].Data()
	inf := float32(math.Inf(1))
	_, err := step.Step(core.In([]float32{inf, 2}, 1, 2), core.In([]float32{1}, 1, 1))
	if !errors.Is(err, ErrNonFiniteNorm) {
		t.Fatalf("non-finite input: err = %v, want ErrNonFiniteNorm", err)
	}
	after, _ := m.Params()[0].Data()
	for k := range before {
		if before[k] != after[k] {
			t.Fatalf("a step with a non-finite norm changed parameter element %d: %g -> %g", k, before[k], after[k])
		}
	}
}

// A limit that is NaN or infinite is an error of Step, with or without
// OneRun, and nothing runs: NaN had made every parameter NaN.
func TestCaptureStepBadMaxNorm(t *testing.T) {
	for _, oneRun := range []bool{false, true} {
		for _, limit := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			dev := openDev(t)
			m := MLP(dev, []int{2, 4, 1}, core.Tanh, rand.New(rand.NewPCG(2, 2)))
			step := CaptureStep(NewSGD(m.Params(), 0.1, 0), func(in []*core.Tensor) *core.Tensor {
				return MSELoss(m.Forward(in[0]), in[1])
			})
			step.MaxGradNorm, step.OneRun = limit, oneRun
			before, _ := m.Params()[0].Data()
			runs := dev.Stats().Runs
			_, err := step.Step(core.In([]float32{1, 2}, 1, 2), core.In([]float32{1}, 1, 1))
			if err == nil || !strings.Contains(err.Error(), "StepCapture.Step: MaxGradNorm") {
				t.Errorf("limit %v one run %t: err = %v, want one naming StepCapture.Step and MaxGradNorm", limit, oneRun, err)
			}
			r := dev.Stats().Runs - runs
			if after, _ := m.Params()[0].Data(); r != 0 || !slices.Equal(before, after) {
				t.Errorf("limit %v one run %t: %d runs, parameters %v -> %v: want nothing run or changed", limit, oneRun, r, before, after)
			}
		}
	}
}

// With OneRun a non-finite norm is not caught, as documented: the step
// returns no error, GradNorm says it, and NaN reaches the parameters.
func TestCaptureStepOneRunNonFinite(t *testing.T) {
	dev := openDev(t)
	m := MLP(dev, []int{2, 4, 1}, core.Tanh, rand.New(rand.NewPCG(2, 2)))
	opt := NewSGD(m.Params(), 0.1, 0)
	step := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor {
		return MSELoss(m.Forward(in[0]), in[1])
	})
	step.MaxGradNorm, step.OneRun = 1, true
	runs := dev.Stats().Runs
	if _, err := step.Step(core.In([]float32{1, 2}, 1, 2), core.In([]float32{1}, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if r := dev.Stats().Runs - runs; r != 1 {
		t.Errorf("a clipped step with OneRun: %d runs, want 1", r)
	}
	nan := float32(math.NaN())
	if _, err := step.Step(core.In([]float32{nan, 2}, 1, 2), core.In([]float32{1}, 1, 1)); err != nil {
		t.Fatalf("non-finite input with OneRun: err = %v, want none", err)
	}
	if !math.IsNaN(float64(step.GradNorm)) {
		t.Errorf("GradNorm after a NaN input: %v, want NaN", step.GradNorm)
	}
	w, _ := m.Params()[0].Data()
	if !math.IsNaN(float64(w[0])) {
		t.Errorf("parameter after a NaN step with OneRun: %v, want NaN (the norm is not checked)", w[0])
	}
}

// One Capture serves training and evaluation: after Eval the dropout and
// batch-norm layers record their evaluation forward (no masks, running
// statistics), which equals the lazy evaluation forward; back in training
// the training recording replays. Each layer guards its own mode.
func TestCaptureFollowsTrainEval(t *testing.T) {
	dev := openDev(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for name, m := range map[string]Sequential{
		"dropout":   {NewLinear(dev, 4, 8, true, rng), NewDropout(0.5)},
		"batchnorm": {NewLinear(dev, 4, 8, true, rng), NewBatchNorm1d(dev, 8, 1e-5, 0.1, true), Func(core.ReLU)},
		"attention": {NewMultiHeadAttention(dev, 8, 2, false, 0.5, rng)},
	} {
		in := 4
		if name == "attention" {
			in = 8
		}
		c := core.NewCapture(dev, func(x []*core.Tensor) []*core.Tensor { return []*core.Tensor{m.Forward(x[0])} })
		x := make([]float32, 6*in)
		for i := range x {
			x[i] = float32(i%7)/3 - 1
		}
		shape := []int{6, in}
		if name == "attention" {
			shape = []int{2, 3, in}
		}
		Train(m)
		tr1, err := c.Call(core.In(x, shape...))
		if err != nil {
			t.Fatal(err)
		}
		Eval(m)
		got, err := c.Call(core.In(x, shape...))
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.Forward(dev.Tensor(x, shape...)).Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Abs(float64(got[0][i]-want[i])) > 1e-5 {
				t.Fatalf("%s: captured eval forward %v, lazy eval forward %v", name, got[0][:6], want[:6])
			}
		}
		Train(m)
		tr2, err := c.Call(core.In(x, shape...))
		if err != nil {
			t.Fatal(err)
		}
		same := true
		for i := range tr1[0] {
			same = same && tr1[0][i] == tr2[0][i]
		}
		if c.Records() != 2 || (name != "batchnorm" && same) {
			t.Errorf("%s: back in training: %d recordings, outputs the same as the first training call: %t: want 2 recordings (one per mode) and new dropout masks", name, c.Records(), same)
		}
	}
}

// A captured step under SetActivationStorage (bf16, f16 where the device
// has no bf16) replays the step it recorded,
// 16-bit activations included: its losses and parameters follow the lazy
// step's under the same storage.
func TestCaptureStepActivationStorage(t *testing.T) {
	dev := openDev(t)
	prev, err := dev.SetActivationStorage(core.PrecisionBF16)
	if err != nil { // ggml-vulkan cannot unpack bf16: f16 there
		if prev, err = dev.SetActivationStorage(core.PrecisionF16); err != nil {
			t.Fatal(err)
		}
	}
	defer dev.SetActivationStorage(prev)
	const b, w = 64, 128 // hidden activations of 8192 values: stored
	mk := func() (Sequential, *Adam) {
		m := MLP(dev, []int{w, w, w, 1}, core.Tanh, rand.New(rand.NewPCG(7, 7)))
		return m, NewAdam(m.Params(), 0.01)
	}
	lazyM, lazyOpt := mk()
	capM, capOpt := mk()
	step := CaptureStep(capOpt, func(in []*core.Tensor) *core.Tensor {
		return MSELoss(capM.Forward(in[0]), in[1])
	})
	r := rand.New(rand.NewPCG(1, 1))
	xs, ys := make([]float32, b*w), make([]float32, b)
	for i := range 4 {
		for k := range xs {
			xs[k] = float32(r.NormFloat64())
		}
		for k := range ys {
			ys[k] = float32(r.Float64())
		}
		lazyOpt.ZeroGrad()
		l := MSELoss(lazyM.Forward(dev.Tensor(xs, b, w)), dev.Tensor(ys, b, 1))
		if err := l.Backward(); err != nil {
			t.Fatal(err)
		}
		lazyOpt.Step()
		want, err := l.Item()
		if err != nil {
			t.Fatal(err)
		}
		got, err := step.Step(core.In(xs, b, w), core.In(ys, b, 1))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(got-want)) > 1e-5*(1+math.Abs(float64(want))) {
			t.Errorf("step %d: captured loss %g, lazy %g", i, got, want)
		}
	}
	for i, p := range capM.Params() {
		a, _ := p.Data()
		c, _ := lazyM.Params()[i].Data()
		for k := range a {
			if math.Abs(float64(a[k]-c[k])) > 1e-5 {
				t.Fatalf("param %d element %d: captured %g, lazy %g", i, k, a[k], c[k])
			}
		}
	}
}

// TestCaptureStepUnread checks that steps taken with StepUnread train as
// Step's do, in every mode: the same parameters, step count and last loss.
func TestCaptureStepUnread(t *testing.T) {
	for _, c := range []struct {
		clip   float32
		oneRun bool
	}{{0, false}, {0.5, false}, {0.5, true}} {
		dev := openDev(t)
		run := func(unread bool) ([]float32, float32, int) {
			m := MLP(dev, []int{6, 16, 3}, core.Tanh, rand.New(rand.NewPCG(7, 7)))
			opt := NewAdam(m.Params(), 0.01)
			step := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return MSELoss(m.Forward(in[0]), in[1]) })
			step.MaxGradNorm, step.OneRun = c.clip, c.oneRun
			r := rand.New(rand.NewPCG(1, 1))
			xs, ys := make([]float32, 8*6), make([]float32, 8*3)
			var loss float32
			for i := range 6 {
				for k := range xs {
					xs[k] = float32(r.Float64()*2 - 1)
				}
				for k := range ys {
					ys[k] = float32(r.Float64())
				}
				var err error
				if unread && i > 0 && i < 5 {
					err = step.StepUnread(core.In(xs, 8, 6), core.In(ys, 8, 3))
				} else {
					loss, err = step.Step(core.In(xs, 8, 6), core.In(ys, 8, 3))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			var ws []float32
			for _, p := range m.Params() {
				v, err := p.Data()
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, v...)
			}
			return ws, loss, opt.StepCount()
		}
		wantW, wantLoss, wantN := run(false)
		gotW, gotLoss, gotN := run(true)
		if !slices.Equal(gotW, wantW) || gotLoss != wantLoss || gotN != wantN {
			t.Errorf("clip %g one run %t: with StepUnread loss %v after %d steps, with Step %v after %d; parameters equal: %t",
				c.clip, c.oneRun, gotLoss, gotN, wantLoss, wantN, slices.Equal(gotW, wantW))
		}
	}
}
