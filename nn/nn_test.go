package nn

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

// panicCase is a call that must panic with a message containing want.
type panicCase struct {
	name, want string
	f          func()
}

// checkPanics runs each case and reports the ones that do not panic so.
func checkPanics(t *testing.T, cases []panicCase) {
	t.Helper()
	for _, c := range cases {
		func() {
			defer func() {
				r := recover()
				s, _ := r.(string)
				if e, ok := r.(error); ok { // a refused module tree panics with an error
					s = e.Error()
				}
				if !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
				}
			}()
			c.f()
		}()
	}
}

// regression data: y = sin(x·a) for random x.
func regression(r *rand.Rand, n, in int) (x, y []float32) {
	a := make([]float64, in)
	for i := range a {
		a[i] = r.NormFloat64()
	}
	x = make([]float32, n*in)
	y = make([]float32, n)
	for i := range n {
		s := 0.0
		for j := range in {
			v := r.Float64()*2 - 1
			x[i*in+j] = float32(v)
			s += v * a[j]
		}
		y[i] = float32(math.Sin(s))
	}
	return x, y
}

func TestMLPTrains(t *testing.T) {
	for _, optName := range []string{"adam", "sgd"} {
		t.Run(optName, func(t *testing.T) {
			dev := openDev(t)
			r := rand.New(rand.NewPCG(1, 2))
			model := MLP(dev, []int{8, 32, 32, 1}, core.Tanh, r)
			var opt Optimizer = NewAdam(model.Params(), 0.01)
			if optName == "sgd" {
				opt = NewSGD(model.Params(), 0.1, 0.9)
			}
			xs, ys := regression(r, 256, 8)
			x, y := dev.Tensor(xs, 256, 8), dev.Tensor(ys, 256, 1)
			var first, last float32
			for step := range 300 {
				opt.ZeroGrad()
				loss := MSELoss(model.Forward(x), y)
				if err := loss.Backward(); err != nil {
					t.Fatal(err)
				}
				if err := opt.Step(); err != nil {
					t.Fatal(err)
				}
				v, err := loss.Item()
				if err != nil {
					t.Fatal(err)
				}
				if step == 0 {
					first = v
				}
				last = v
			}
			if !(last < first/10) {
				t.Errorf("loss %g -> %g: fell by less than 10x", first, last)
			}
			if st := dev.Stats(); st.Compiles > 3 {
				t.Errorf("%d compiles for 300 identical steps", st.Compiles)
			}
		})
	}
}

func TestClassifierTrains(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(3, 4))
	const n, in, classes = 128, 4, 3
	xs := make([]float32, n*in)
	labels := make([]float32, n)
	for i := range n {
		c := i % classes
		labels[i] = float32(c)
		for j := range in {
			xs[i*in+j] = float32(r.NormFloat64()*0.3) + float32(c*(j%2))
		}
	}
	model := MLP(dev, []int{in, 16, classes}, core.ReLU, r)
	opt := NewAdamW(model.Params(), 0.05, 0.01)
	x, lab := dev.Tensor(xs, n, in), dev.Tensor(labels, n)
	var first, last float32
	for step := range 150 {
		opt.ZeroGrad()
		loss := SoftmaxCrossEntropy(model.Forward(x), lab)
		loss.Backward()
		opt.Step()
		last, _ = loss.Item()
		if step == 0 {
			first = last
		}
	}
	if !(last < first/10) {
		t.Errorf("cross-entropy %g -> %g: fell by less than 10x", first, last)
	}
	// CrossEntropy on probabilities agrees with SoftmaxCrossEntropy.
	logits := model.Forward(x)
	a, _ := SoftmaxCrossEntropy(logits, lab).Item()
	b, _ := CrossEntropy(core.Softmax(model.Forward(x)), core.OneHot(lab, classes)).Item()
	if math.Abs(float64(a-b)) > 1e-4*(1+math.Abs(float64(a))) {
		t.Errorf("SoftmaxCrossEntropy %g vs CrossEntropy(Softmax) %g", a, b)
	}
}

// One Adam step against the formula in float64.
func TestAdamFormula(t *testing.T) {
	dev := openDev(t)
	w0 := []float32{0.5, -1, 2}
	w := dev.Param(w0, 3)
	opt := NewAdamW([]*core.Tensor{w}, 0.1, 0.01)
	var want [3]float64
	m, v := [3]float64{}, [3]float64{}
	ww := [3]float64{0.5, -1, 2}
	for step := 1; step <= 3; step++ {
		opt.ZeroGrad()
		loss := core.Sum(core.Mul(w, w)) // g = 2w
		loss.Backward()
		opt.Step()
		if err := dev.Sync(); err != nil {
			t.Fatal(err)
		}
		for i := range ww {
			g := 2 * ww[i]
			m[i] = 0.9*m[i] + 0.1*g
			v[i] = 0.999*v[i] + 0.001*g*g
			mh := m[i] / (1 - math.Pow(0.9, float64(step)))
			vh := math.Sqrt(v[i]/(1-math.Pow(0.999, float64(step)))) + 1e-8
			ww[i] = ww[i]*(1-0.1*0.01) - 0.1*mh/vh
			want[i] = ww[i]
		}
	}
	got, _ := w.Data()
	for i := range got {
		if math.Abs(float64(got[i])-want[i]) > 1e-5 {
			t.Errorf("w[%d] = %g, want %g", i, got[i], want[i])
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(5, 6))
	model := MLP(dev, []int{3, 4, 2}, core.ReLU, r)
	opt := NewAdam(model.Params(), 0.01)
	x := dev.Tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	loss := core.Mean(model.Forward(x))
	loss.Backward()
	opt.Step()
	dev.Sync()
	var buf bytes.Buffer
	if err := SaveState(&buf, model, opt); err != nil {
		t.Fatal(err)
	}
	saved := buf.Bytes()

	model2 := MLP(dev, []int{3, 4, 2}, core.ReLU, rand.New(rand.NewPCG(9, 9)))
	opt2 := NewAdam(model2.Params(), 0.5)
	if err := LoadState(bytes.NewReader(saved), model2, opt2); err != nil {
		t.Fatal(err)
	}
	for i, p := range model.Params() {
		a, _ := p.Data()
		b, _ := model2.Params()[i].Data()
		if !slices.Equal(a, b) {
			t.Errorf("param %d differs after load", i)
		}
	}
	if opt2.LR != 0.01 || opt2.StepCount() != 1 {
		t.Errorf("optimizer after load: lr %g step %d", opt2.LR, opt2.StepCount())
	}
	// A mismatched model is refused before anything is written.
	model3 := MLP(dev, []int{3, 5, 2}, core.ReLU, r)
	before, _ := model3.Params()[0].Data()
	err := LoadState(bytes.NewReader(saved), model3, NewAdam(model3.Params(), 1))
	if !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("mismatched load: %v", err)
	}
	after, _ := model3.Params()[0].Data()
	if !slices.Equal(before, after) {
		t.Error("a refused load changed a parameter")
	}
	// A truncated file is refused before anything is written.
	err = LoadState(bytes.NewReader(saved[:len(saved)-5]), model2, opt2)
	if !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("truncated load: %v", err)
	}
}

// Labels out of range never count as another class (issue 10 item 11):
// host labels fail the sync naming the label, device-computed ones give NaN.
func TestSoftmaxCrossEntropyBadLabels(t *testing.T) {
	dev := openDev(t)
	logits := dev.Tensor([]float32{1, 2, 3, 1, 2, 3}, 2, 3)
	_, err := SoftmaxCrossEntropy(logits, dev.Tensor([]float32{5, -1}, 2)).Item()
	if err == nil || !strings.Contains(err.Error(), "label 5 at index 0") {
		t.Fatalf("host labels {5, -1}: %v, want an error naming label 5", err)
	}
	// Labels computed on the device (here: shifted out of range by an op).
	base := dev.Tensor([]float32{1, 2}, 2)
	for _, shift := range []float32{3, -5} {
		v, err := SoftmaxCrossEntropy(logits, core.AddScalar(base, shift)).Item()
		if err != nil || !math.IsNaN(float64(v)) {
			t.Errorf("device labels shifted by %g: loss %g (%v), want NaN", shift, v, err)
		}
	}
	// In range, the poison adds nothing.
	v, err := SoftmaxCrossEntropy(logits, core.AddScalar(base, 0)).Item()
	want := (math.Log(math.Exp(1)+math.Exp(2)+math.Exp(3))*2 - 2 - 3) / 2
	if err != nil || math.Abs(float64(v)-want) > 1e-5 {
		t.Fatalf("device labels in range: loss %g (%v), want %g", v, err, want)
	}
}
