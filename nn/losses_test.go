package nn

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

func item(t *testing.T, x *core.Tensor) float64 {
	t.Helper()
	v, err := x.Item()
	if err != nil {
		t.Fatal(err)
	}
	return float64(v)
}

func TestBinaryLosses(t *testing.T) {
	dev := openDev(t)
	xs := []float64{-100, -20, -3, -0.5, 0, 0.7, 4, 25, 100}
	ts := []float64{0, 1, 0.3, 1, 0.5, 0, 1, 0, 1}
	var wantLogits, wantBCE float64
	ps := make([]float64, len(xs))
	for i, x := range xs {
		// float64 reference: softplus(x) - t*x, with softplus = max(x,0) + log1p(exp(-|x|))
		wantLogits += (math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) - ts[i]*x) / float64(len(xs))
		p := 1 / (1 + math.Exp(-x/10)) // moderate probabilities for BCE
		ps[i] = p
	}
	pf := f32s(ps)
	for i := range ps {
		p := float64(pf[i])
		wantBCE -= (ts[i]*math.Max(math.Log(p), -100) + (1-ts[i])*math.Max(math.Log(1-p), -100)) / float64(len(xs))
	}
	x, tt := dev.Tensor(f32s(xs), len(xs)), dev.Tensor(f32s(ts), len(ts))
	if got := item(t, BCEWithLogits(x, tt)); math.Abs(got-wantLogits) > 1e-5*(1+wantLogits) {
		t.Errorf("BCEWithLogits = %g, want %g", got, wantLogits)
	}
	if got := item(t, BCE(dev.Tensor(pf, len(pf)), tt)); math.Abs(got-wantBCE) > 1e-5*(1+wantBCE) {
		t.Errorf("BCE = %g, want %g", got, wantBCE)
	}
	// p = 0 and 1 give the clamped log, not Inf or NaN: -(1*(-100) + 0)/2 ... per element
	if got := item(t, BCE(dev.Tensor([]float32{0, 1, 1}, 3), dev.Tensor([]float32{1, 0, 1}, 3))); got != 200.0/3 && math.Abs(got-200.0/3) > 1e-4 {
		t.Errorf("BCE at 0 and 1 = %g, want %g", got, 200.0/3)
	}
	// BCE's gradient at p = 0 and 1: none through the clamped log, the
	// other term's as it is (not 0*Inf = NaN)
	{
		p := dev.Param([]float32{0, 1, 0.5, 0, 1}, 5)
		if err := BCE(p, dev.Tensor([]float32{0, 1, 0.5, 1, 0}, 5)).Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := p.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		// -(t*log p + (1-t)*log(1-p))/5: 1/(1-p)/5 at p = 0, t = 0; -t/p/5 at p = 1, t = 1
		if want := []float32{0.2, -0.2, 0, 0, 0}; !slices.Equal(g, want) {
			t.Errorf("BCE gradient at p {0, 1, 0.5, 0, 1}, t {0, 1, 0.5, 1, 0}: %v, want %v", g, want)
		}
	}
	// gradient: (sigmoid(x) - t)/n, exactly the stable one even at ±100
	xp := dev.Param(f32s(xs), len(xs))
	if err := BCEWithLogits(xp, tt).Backward(); err != nil {
		t.Fatal(err)
	}
	g, err := xp.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		want := (1/(1+math.Exp(-x)) - ts[i]) / float64(len(xs))
		if math.Abs(float64(g[i])-want) > 1e-7 {
			t.Errorf("BCEWithLogits gradient at %g: %g, want %g", x, g[i], want)
		}
	}
}

func TestRegressionLosses(t *testing.T) {
	dev := openDev(t)
	ds := []float64{-3, -1, -0.4, 0, 0.2, 0.99, 1.5, 7}
	pred := dev.Tensor(f32s(ds), 2, 4)
	zero := dev.Tensor(make([]float32, len(ds)), 2, 4)
	huber := func(d, delta float64) float64 {
		if a := math.Abs(d); a <= delta {
			return 0.5 * d * d
		} else {
			return delta * (a - 0.5*delta)
		}
	}
	for _, delta := range []float64{0.5, 1, 2} {
		want, wantS := 0.0, 0.0
		for _, d := range ds {
			want += huber(d, delta) / float64(len(ds))
			wantS += huber(d, delta) / delta / float64(len(ds))
		}
		if got := item(t, Huber(pred, zero, float32(delta))); math.Abs(got-want) > 1e-6*(1+want) {
			t.Errorf("Huber(delta %g) = %g, want %g", delta, got, want)
		}
		if got := item(t, SmoothL1(pred, zero, float32(delta))); math.Abs(got-wantS) > 1e-6*(1+wantS) {
			t.Errorf("SmoothL1(beta %g) = %g, want %g", delta, got, wantS)
		}
	}
	l1 := 0.0
	for _, d := range ds {
		l1 += math.Abs(d) / float64(len(ds))
	}
	if got := item(t, SmoothL1(pred, zero, 0)); math.Abs(got-l1) > 1e-6 {
		t.Errorf("SmoothL1(beta 0) = %g, want %g", got, l1)
	}
	{
		p := dev.Param(f32s([]float64{-3, -1, -0.4, 0.3, 0.2, 0.99, 1.5, 7}), 2, 4)
		target := dev.Tensor([]float32{0.1, 0, 0.2, 0, 0, 0, 0.5, 1}, 2, 4)
		for name, f := range map[string]func() *core.Tensor{
			"Huber":    func() *core.Tensor { return Huber(p, target, 0.7) },
			"SmoothL1": func() *core.Tensor { return SmoothL1(p, target, 0.7) },
			"BCE":      func() *core.Tensor { return BCE(core.Sigmoid(p), core.Sigmoid(target)) },
		} {
			if err := core.Gradcheck(f, []*core.Tensor{p}, nil); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

func TestClassLosses(t *testing.T) {
	dev := openDev(t)
	const b, c = 4, 3
	logits := []float64{1, 2, 0.5, -1, 0, 3, 0.2, 0.2, 0.2, 5, -2, 1}
	labels := []float64{1, -100, 0, 2}
	// float64 reference
	ref := func(smooth float64, ignore bool) float64 {
		total, count := 0.0, 0.0
		for i := range b {
			if ignore && labels[i] == -100 {
				continue
			}
			row := logits[i*c : i*c+c]
			mx := math.Max(row[0], math.Max(row[1], row[2]))
			z := 0.0
			for _, v := range row {
				z += math.Exp(v - mx)
			}
			for k, v := range row {
				q := smooth / c
				if float64(k) == labels[i] {
					q += 1 - smooth
				}
				total -= q * (v - mx - math.Log(z))
			}
			count++
		}
		return total / count
	}
	x := dev.Tensor(f32s(logits), b, c)
	y := dev.Tensor(f32s(labels), b)
	for _, s := range []float64{0, 0.1} {
		opt := ClassOptions{LabelSmoothing: float32(s), Ignore: true, IgnoreIndex: -100}
		if got, want := item(t, CrossEntropyLoss(x, y, opt)), ref(s, true); math.Abs(got-want) > 1e-6*(1+want) {
			t.Errorf("CrossEntropyLoss(smoothing %g, ignore -100) = %g, want %g", s, got, want)
		}
		if got, want := item(t, NLLLoss(core.LogSoftmax(x), y, opt)), ref(s, true); math.Abs(got-want) > 1e-6*(1+want) {
			t.Errorf("NLLLoss(smoothing %g, ignore -100) = %g, want %g", s, got, want)
		}
	}
	// Without ignoring, -100 is a bad label: host labels fail the sync.
	yHost := dev.Tensor(f32s(labels), b) // not uploaded yet: checked at the sync
	if _, err := CrossEntropyLoss(x, yHost, ClassOptions{}).Item(); err == nil || !strings.Contains(err.Error(), "-100") {
		t.Errorf("label -100 without Ignore: err = %v, want one naming the label", err)
	}
	// y is on the device by now: the loss is NaN instead.
	if v := item(t, CrossEntropyLoss(x, y, ClassOptions{})); !math.IsNaN(v) {
		t.Errorf("label -100 without Ignore, on the device: loss %g, want NaN", v)
	}
	// Without -100, the plain loss is SoftmaxCrossEntropy.
	y2 := dev.Tensor([]float32{1, 1, 0, 2}, b)
	a, e := item(t, CrossEntropyLoss(x, y2, ClassOptions{})), item(t, SoftmaxCrossEntropy(x, y2))
	if math.Abs(a-e) > 1e-6 {
		t.Errorf("CrossEntropyLoss %g, SoftmaxCrossEntropy %g", a, e)
	}
	// An ignored row gets no gradient; the others do.
	{
		xp := dev.Param(f32s(logits), b, c)
		opt := ClassOptions{LabelSmoothing: 0.2, Ignore: true, IgnoreIndex: -100}
		if err := core.Gradcheck(func() *core.Tensor { return CrossEntropyLoss(xp, y, opt) }, []*core.Tensor{xp}, nil); err != nil {
			t.Error(err)
		}
		if err := CrossEntropyLoss(xp, y, opt).Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := xp.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		for k := c; k < 2*c; k++ {
			if g[k] != 0 {
				t.Errorf("ignored row: gradient %v, want zeros", g[c:2*c])
				break
			}
		}
		if g[0] == 0 {
			t.Errorf("kept row 0: zero gradient")
		}
	}
	// A -Inf logit (a masked class) other than the label's is a
	// probability 0, not 0*(-Inf) = NaN; an ignored row adds nothing, even
	// -Inf or NaN; with smoothing a -Inf logit makes the loss +Inf (as
	// PyTorch's).
	{
		ninf, nan := math.Inf(-1), math.NaN()
		masked := dev.Tensor(f32s([]float64{1, ninf, 2, 0, 3, ninf}), 2, 3)
		y01 := dev.Tensor([]float32{0, 1}, 2)
		plain := (math.Log(math.E+math.Exp(2)) - 1 + math.Log(1+math.Exp(3)) - 3) / 2
		row0 := math.Log(math.E+math.Exp(2)+math.Exp(3)) - 1
		for _, c := range []struct {
			name string
			l    *core.Tensor
			want float64
		}{
			{"SoftmaxCrossEntropy, -Inf logit", SoftmaxCrossEntropy(masked, y01), plain},
			{"CrossEntropyLoss, -Inf logit", CrossEntropyLoss(masked, y01, ClassOptions{}), plain},
			{"NLLLoss, -Inf log-probability", NLLLoss(core.LogSoftmax(masked), y01, ClassOptions{}), plain},
			{"CrossEntropyLoss, smoothing, -Inf logit", CrossEntropyLoss(masked, y01, ClassOptions{LabelSmoothing: 0.1}), math.Inf(1)},
			{"CrossEntropyLoss, ignored row of -Inf", CrossEntropyLoss(dev.Tensor(f32s([]float64{1, 2, 3, ninf, ninf, 0}), 2, 3),
				dev.Tensor([]float32{0, 9}, 2), ClassOptions{Ignore: true, IgnoreIndex: 9}), row0},
			{"CrossEntropyLoss, smoothing, ignored row of NaN", CrossEntropyLoss(dev.Tensor(f32s([]float64{1, 2, 3, nan, nan, 0}), 2, 3),
				dev.Tensor([]float32{0, 9}, 2), ClassOptions{Ignore: true, IgnoreIndex: 9, LabelSmoothing: 0.1}),
				-(0.9+0.1/3)*(1-row0-1) - 0.1/3*(2-row0-1) - 0.1/3*(3-row0-1)},
		} {
			if got := item(t, c.l); !(got == c.want || math.Abs(got-c.want) <= 1e-6*(1+math.Abs(c.want))) {
				t.Errorf("%s: loss %g, want %g", c.name, got, c.want)
			}
		}
		xp := dev.Param(f32s([]float64{1, ninf, 2, 0, 3, ninf}), 2, 3)
		if err := CrossEntropyLoss(xp, y01, ClassOptions{}).Backward(); err != nil {
			t.Fatal(err)
		}
		g, err := xp.Grad().Data()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range g {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Errorf("CrossEntropyLoss gradient with a -Inf logit: %v, want finite", g)
				break
			}
		}
	}
	// A device-side label out of range makes the loss NaN.
	bad := core.AddScalar(dev.Tensor([]float32{1, 1, 0, 2}, b), 1) // 3 is out of range
	if v := item(t, CrossEntropyLoss(x, bad, ClassOptions{Ignore: true, IgnoreIndex: -100})); !math.IsNaN(v) {
		t.Errorf("a label out of range gave %g, want NaN", v)
	}
}

func TestLossPanics(t *testing.T) {
	dev := openDev(t)
	x := dev.Tensor(make([]float32, 6), 2, 3)
	cases := []panicCase{
		{"shape", "nn.BCEWithLogits: logits [2 3] and target [3 2] differ", func() { BCEWithLogits(x, core.Transpose(x)) }},
		{"delta", "nn.Huber: delta 0", func() { Huber(x, x, 0) }},
		{"beta", "nn.SmoothL1: beta -1", func() { SmoothL1(x, x, -1) }},
		{"smoothing", "nn.CrossEntropyLoss: label smoothing 1", func() {
			CrossEntropyLoss(x, dev.Tensor([]float32{0, 1}, 2), ClassOptions{LabelSmoothing: 1})
		}},
		{"labels", "nn.NLLLoss: input [2 3], labels [3]", func() { NLLLoss(x, dev.Tensor([]float32{0, 1, 2}, 3), ClassOptions{}) }},
	}
	checkPanics(t, cases)
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
