package nn

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// bnRef normalizes x (shape with channels on axis 1) by per-channel mean and
// variance in float64; it returns y and the biased and unbiased variances.
func bnRef(x []float32, shape []int, mean, variance []float64, gain, bias []float32, eps float64) []float64 {
	c := shape[1]
	inner := 1
	for _, d := range shape[2:] {
		inner *= d
	}
	y := make([]float64, len(x))
	for i, v := range x {
		ch := i / inner % c
		y[i] = (float64(v)-mean[ch])/math.Sqrt(variance[ch]+eps)*float64(gain[ch]) + float64(bias[ch])
	}
	return y
}

// bnStats are the per-channel mean, biased and unbiased variance.
func bnStats(x []float32, shape []int) (mean, biased, unbiased []float64) {
	c := shape[1]
	inner := 1
	for _, d := range shape[2:] {
		inner *= d
	}
	n := len(x) / c
	mean, biased, unbiased = make([]float64, c), make([]float64, c), make([]float64, c)
	for i, v := range x {
		mean[i/inner%c] += float64(v) / float64(n)
	}
	for i, v := range x {
		ch := i / inner % c
		d := float64(v) - mean[ch]
		biased[ch] += d * d / float64(n)
		unbiased[ch] += d * d / float64(n-1)
	}
	return mean, biased, unbiased
}

func TestBatchNormTrainEval(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(21)
	for _, shape := range [][]int{{4, 3}, {2, 3, 5}, {2, 3, 4, 5}} {
		name := fmt.Sprint(shape)
		c := shape[1]
		var bn *BatchNorm
		if len(shape) == 4 {
			bn = NewBatchNorm2d(dev, c, 1e-5, 0.1, true)
		} else {
			bn = NewBatchNorm1d(dev, c, 1e-5, 0.1, true)
		}
		gain, bias := []float32{1.5, -0.5, 2}, []float32{0.1, 0.2, -0.3}
		bn.Gain, bn.Bias = dev.Param(gain, c), dev.Param(bias, c)
		rm, rv := []float64{0, 0, 0}, []float64{1, 1, 1}
		for step := range 3 {
			xs := randVals(r, count(shape))
			for i := range xs {
				xs[i] = xs[i]*float32(step+1) + 10 // a large mean: two passes keep the variance
			}
			mean, biased, unbiased := bnStats(xs, shape)
			got, err := bn.Forward(dev.Tensor(xs, shape...)).Data()
			if err != nil {
				t.Fatal(err)
			}
			checkNear(t, fmt.Sprintf("train %s step %d", name, step), got, bnRef(xs, shape, mean, biased, gain, bias, 1e-5), 2e-4)
			for ch := range c {
				rm[ch] = 0.9*rm[ch] + 0.1*mean[ch]
				rv[ch] = 0.9*rv[ch] + 0.1*unbiased[ch]
			}
		}
		gm, _ := bn.RunningMean.Data()
		gv, _ := bn.RunningVar.Data()
		checkNear(t, "running mean "+name, gm, rm, 1e-5)
		checkNear(t, "running var "+name, gv, rv, 1e-5)

		Eval(bn)
		xs := randVals(r, count(shape))
		got, err := bn.Forward(dev.Tensor(xs, shape...)).Data()
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, "eval "+name, got, bnRef(xs, shape, rm, rv, gain, bias, 1e-5), 1e-4)
		gm2, _ := bn.RunningMean.Data()
		if !slices.Equal(gm, gm2) {
			t.Errorf("%s: eval changed the running mean", name)
		}
		Train(bn)
	}
	// No affine part, momentum 0: nothing is updated, no params.
	bn := NewBatchNorm2d(dev, 2, 1e-3, 0, false)
	if bn.Params() != nil {
		t.Errorf("params without affine: %v", bn.Params())
	}
	xs := randVals(r, 3*2*2*2)
	mean, biased, _ := bnStats(xs, []int{3, 2, 2, 2})
	got, err := bn.Forward(dev.Tensor(xs, 3, 2, 2, 2)).Data()
	if err != nil {
		t.Fatal(err)
	}
	checkNear(t, "no affine", got, bnRef(xs, []int{3, 2, 2, 2}, mean, biased, []float32{1, 1}, []float32{0, 0}, 1e-3), 1e-4)
	if v, _ := bn.RunningVar.Data(); !slices.Equal(v, []float32{1, 1}) {
		t.Errorf("momentum 0 changed the running variance: %v", v)
	}
}

// The running statistics are not parameters: an optimizer's step leaves
// them to the forward, and a training step changes them only through it.
func TestBatchNormOptimizerAndGradcheck(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(22)
	model := Sequential{NewConv2d(dev, 1, 2, [2]int{3, 3}, ConvOptions{Padding: 1}, r), NewBatchNorm2d(dev, 2, 1e-5, 0.1, true), Func(core.ReLU), Flatten{}}
	bn := model[1].(*BatchNorm)
	if n := len(model.Params()); n != 4 {
		t.Fatalf("%d params, want 4 (conv W, B, gain, bias)", n)
	}
	if bs := Buffers(model); len(bs) != 2 || bs[0] != bn.RunningMean || bs[1] != bn.RunningVar {
		t.Fatalf("buffers %v", bs)
	}
	opt := NewSGD(model.Params(), 0.1, 0.9)
	x := dev.Tensor(randVals(r, 2*1*4*4), 2, 1, 4, 4)
	for range 2 {
		opt.ZeroGrad()
		loss := core.Mean(core.Mul(model.Forward(x), model.Forward(x)))
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		opt.Step()
		if _, err := loss.Item(); err != nil {
			t.Fatal(err)
		}
	}
	// 4 forwards updated the statistics (the conv changed between steps, so
	// only check that they moved and stayed finite; TestBatchNormTrainEval
	// checks the values).
	rv, _ := bn.RunningVar.Data()
	for _, v := range rv {
		if v == 1 || math.IsNaN(float64(v)) {
			t.Errorf("running var %v after training", rv)
		}
	}

	// Gradients in training mode (momentum 0, so the check's two builds
	// record no update) and in evaluation mode.
	bn2 := NewBatchNorm2d(dev, 3, 1e-5, 0, true)
	bn2.Gain, bn2.Bias = dev.Param([]float32{1.5, -0.5, 2}, 3), dev.Param([]float32{0.1, 0.2, -0.3}, 3)
	xp := dev.Param(randVals(r, 2*3*2*3), 2, 3, 2, 3)
	w := dev.Tensor(randVals(r, 2*3*2*3), 2, 3, 2, 3)
	f := func() *core.Tensor { return core.Sum(core.Mul(core.Mul(bn2.Forward(xp), bn2.Forward(xp)), w)) }
	if err := core.Gradcheck(f, []*core.Tensor{xp, bn2.Gain, bn2.Bias}, nil); err != nil {
		t.Errorf("BatchNorm2d train: %v", err)
	}
	bn1 := NewBatchNorm1d(dev, 3, 1e-5, 0, true)
	x1 := dev.Param(randVals(r, 4*3), 4, 3)
	w1 := dev.Tensor(randVals(r, 4*3), 4, 3)
	if err := core.Gradcheck(func() *core.Tensor { return core.Sum(core.Mul(core.Mul(bn1.Forward(x1), bn1.Forward(x1)), w1)) }, []*core.Tensor{x1, bn1.Gain, bn1.Bias}, nil); err != nil {
		t.Errorf("BatchNorm1d train: %v", err)
	}
	Eval(bn2)
	if err := core.Gradcheck(f, []*core.Tensor{xp, bn2.Gain, bn2.Bias}, nil); err != nil {
		t.Errorf("BatchNorm2d eval: %v", err)
	}
}

func TestBatchNormState(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(23)
	mk := func() Sequential {
		return Sequential{NewLinear(dev, 3, 4, true, r), NewBatchNorm1d(dev, 4, 1e-5, 0.1, true)}
	}
	model := mk()
	x := dev.Tensor(randVals(r, 5*3), 5, 3)
	for range 3 {
		model.Forward(x)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := SaveState(&buf, model, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"buffer.1"`) {
		t.Errorf("header without buffers: %.200q", buf.String())
	}
	model2 := mk()
	if err := LoadState(bytes.NewReader(buf.Bytes()), model2, nil); err != nil {
		t.Fatal(err)
	}
	for i, b := range Buffers(model) {
		want, _ := b.Data()
		got, _ := Buffers(model2)[i].Data()
		if !slices.Equal(got, want) || slices.Equal(want, []float32{0, 0, 0, 0}) || slices.Equal(want, []float32{1, 1, 1, 1}) {
			t.Errorf("buffer %d: loaded %v, saved %v (and not the initial value)", i, got, want)
		}
	}
	// The two models now evaluate alike.
	Eval(model)
	Eval(model2)
	a, _ := model.Forward(x).Data()
	b, _ := model2.Forward(x).Data()
	if !slices.Equal(a, b) {
		t.Errorf("eval after load: %v, want %v", b, a)
	}
	// A file without the buffers (a model saved without its BatchNorm's
	// statistics) is refused, naming the count.
	var old bytes.Buffer
	if err := SaveState(&old, Sequential{model[0]}, nil); err != nil {
		t.Fatal(err)
	}
	err := LoadState(bytes.NewReader(old.Bytes()), model2, nil)
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), "file has 2 tensors") {
		t.Errorf("load of a file without buffers: %v", err)
	}
	// A model without buffers writes what it always wrote: no "buffer." names.
	old.Reset()
	if err := SaveState(&old, Sequential{model[0]}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(old.String(), "buffer.") {
		t.Error("a model without buffers wrote buffer entries")
	}
}

func TestBatchNormPanics(t *testing.T) {
	dev := openDev(t)
	b1 := NewBatchNorm1d(dev, 3, 1e-5, 0.1, true)
	b2 := NewBatchNorm2d(dev, 3, 1e-5, 0.1, true)
	checkPanics(t, []panicCase{
		{"1d rank", "nn.BatchNorm1d.Forward: input of shape [2 3 4 5], want [N, 3] or [N, 3, L]", func() { b1.Forward(dev.Full(0, 2, 3, 4, 5)) }},
		{"1d channels", "nn.BatchNorm1d.Forward: input of shape [2 4], want [N, 3] or [N, 3, L]", func() { b1.Forward(dev.Full(0, 2, 4)) }},
		{"2d rank", "nn.BatchNorm2d.Forward: input of shape [2 3], want [N, 3, H, W]", func() { b2.Forward(dev.Full(0, 2, 3)) }},
		{"one value", "nn.BatchNorm1d.Forward: input of shape [1 3] has 1 value per channel", func() { b1.Forward(dev.Full(0, 1, 3)) }},
		{"nil", "nn.BatchNorm2d.Forward: nil input", func() { b2.Forward(nil) }},
		{"features", "nn.NewBatchNorm2d: 0 features", func() { NewBatchNorm2d(dev, 0, 1e-5, 0.1, true) }},
		{"eps", "nn.NewBatchNorm1d: eps 0", func() { NewBatchNorm1d(dev, 2, 0, 0.1, true) }},
		{"momentum", "nn.NewBatchNorm1d: momentum 1.5, want a value in [0, 1]", func() { NewBatchNorm1d(dev, 2, 1e-5, 1.5, true) }},
		{"field momentum", "nn.BatchNorm2d.Forward: momentum -1", func() {
			b := NewBatchNorm2d(dev, 3, 1e-5, 0.1, true)
			b.Momentum = -1
			b.Forward(dev.Full(0, 2, 3, 2, 2))
		}},
	})
	// Evaluation mode takes a single value per channel.
	Eval(b1)
	if _, err := b1.Forward(dev.Full(0, 1, 3)).Data(); err != nil {
		t.Errorf("eval with a batch of one: %v", err)
	}
}

// A batch whose variance overflows makes the running variance +Inf, as
// PyTorch's running = (1-m)*running + m*batch does, and the next good
// batch leaves it +Inf and updates the mean as usual (its update and the
// variance's shared a scratch value, so 0*Inf made the mean NaN). The
// other channel is untouched by the bad one's values.
func TestBatchNormRunningStatsAfterOverflow(t *testing.T) {
	dev := openDev(t)
	inf := math.Inf(1)
	bn := NewBatchNorm1d(dev, 2, 1e-5, 0.1, false)
	rm, rv := []float64{0, 0}, []float64{1, 1}
	batches := [][]float32{
		{1e20, 1, -1e20, 3}, // channel 0: mean 0, variance 1e40 = +Inf in float32
		{1, 5, 3, 9},        // means 2 and 7, unbiased variances 2 and 8
		{4, -1, 6, 1},       // means 5 and 0, unbiased variances 2 and 2
	}
	for step, xs := range batches {
		if _, err := bn.Forward(dev.Tensor(xs, 2, 2)).Data(); err != nil {
			t.Fatal(err)
		}
		mean, _, unbiased := bnStats(xs, []int{2, 2})
		if step == 0 {
			unbiased[0] = inf
		}
		for ch := range 2 {
			rm[ch] = 0.9*rm[ch] + 0.1*mean[ch]
			rv[ch] = 0.9*rv[ch] + 0.1*unbiased[ch]
		}
		gm, err := bn.RunningMean.Data()
		if err != nil {
			t.Fatal(err)
		}
		gv, err := bn.RunningVar.Data()
		if err != nil {
			t.Fatal(err)
		}
		for ch := range 2 {
			if math.IsNaN(float64(gm[ch])) || math.Abs(float64(gm[ch])-rm[ch]) > 1e-6 {
				t.Errorf("step %d: running mean[%d] = %g, want %g", step, ch, gm[ch], rm[ch])
			}
			if g := float64(gv[ch]); !(g == rv[ch] || math.Abs(g-rv[ch]) <= 1e-5*rv[ch]) {
				t.Errorf("step %d: running var[%d] = %g, want %g", step, ch, gv[ch], rv[ch])
			}
		}
	}
}
