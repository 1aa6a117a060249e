package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
)

// randVals are n values in [-1, 1) from a fixed stream.
func randVals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.Float64()*2 - 1)
	}
	return v
}

// convRef is a straightforward float64 convolution of x [n, c, h, w] with
// w [oc, c/groups, kh, kw] and bias b (or nil), zero padding.
func convRef(x []float32, n, c, h, wd int, w []float32, oc, kh, kw int, b []float32, s, p, d [2]int, groups int) (y []float64, oh, ow int) {
	oh = (h+2*p[0]-d[0]*(kh-1)-1)/s[0] + 1
	ow = (wd+2*p[1]-d[1]*(kw-1)-1)/s[1] + 1
	cg, og := c/groups, oc/groups
	y = make([]float64, n*oc*oh*ow)
	for in := range n {
		for o := range oc {
			grp := o / og
			for yy := range oh {
				for xx := range ow {
					sum := 0.0
					if b != nil {
						sum = float64(b[o])
					}
					for ci := range cg {
						ch := grp*cg + ci
						for i := range kh {
							ih := yy*s[0] - p[0] + i*d[0]
							if ih < 0 || ih >= h {
								continue
							}
							for j := range kw {
								iw := xx*s[1] - p[1] + j*d[1]
								if iw < 0 || iw >= wd {
									continue
								}
								sum += float64(w[((o*cg+ci)*kh+i)*kw+j]) * float64(x[((in*c+ch)*h+ih)*wd+iw])
							}
						}
					}
					y[((in*oc+o)*oh+yy)*ow+xx] = sum
				}
			}
		}
	}
	return y, oh, ow
}

// poolRef is a float64 max or average (padding counted) pool.
func poolRef(x []float32, n, c, h, wd int, k, s, p, d [2]int, isMax bool) (y []float64, oh, ow int) {
	oh = (h+2*p[0]-d[0]*(k[0]-1)-1)/s[0] + 1
	ow = (wd+2*p[1]-d[1]*(k[1]-1)-1)/s[1] + 1
	for in := range n {
		for ch := range c {
			for yy := range oh {
				for xx := range ow {
					acc := 0.0
					if isMax {
						acc = math.Inf(-1)
					}
					for i := range k[0] {
						for j := range k[1] {
							ih, iw := yy*s[0]-p[0]+i*d[0], xx*s[1]-p[1]+j*d[1]
							if ih < 0 || ih >= h || iw < 0 || iw >= wd {
								continue // padding: 0 to a sum, never the max
							}
							v := float64(x[((in*c+ch)*h+ih)*wd+iw])
							if isMax {
								acc = math.Max(acc, v)
							} else {
								acc += v
							}
						}
					}
					if !isMax {
						acc /= float64(k[0] * k[1])
					}
					y = append(y, acc)
				}
			}
		}
	}
	return y, oh, ow
}

type convCase struct {
	n, c, h, w, oc, kh, kw int
	s, p, d                [2]int
	groups                 int
	bias                   bool
}

var convCases = []convCase{
	{2, 3, 5, 6, 4, 3, 3, [2]int{1, 1}, [2]int{1, 1}, [2]int{1, 1}, 1, true},
	{1, 2, 7, 5, 3, 3, 2, [2]int{2, 1}, [2]int{1, 0}, [2]int{1, 2}, 1, true},
	{2, 4, 6, 6, 6, 3, 3, [2]int{2, 2}, [2]int{2, 1}, [2]int{2, 1}, 2, false},
	{2, 3, 4, 4, 5, 1, 1, [2]int{1, 1}, [2]int{0, 0}, [2]int{1, 1}, 1, true}, // 1x1: no gather
	{1, 4, 5, 5, 4, 2, 2, [2]int{1, 1}, [2]int{0, 0}, [2]int{1, 1}, 4, true}, // depthwise
}

func TestConv2dValues(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(11)
	for _, tc := range convCases {
		name := fmt.Sprintf("%+v", tc)
		l := NewConv2d(dev, tc.c, tc.oc, [2]int{tc.kh, tc.kw}, ConvOptions{Groups: tc.groups, NoBias: !tc.bias}, r)
		l.Stride, l.Padding, l.Dilation = tc.s, tc.p, tc.d
		xs := randVals(r, tc.n*tc.c*tc.h*tc.w)
		w, _ := l.W.Data()
		var b []float32
		if tc.bias {
			b, _ = l.B.Data()
		}
		want, oh, ow := convRef(xs, tc.n, tc.c, tc.h, tc.w, w, tc.oc, tc.kh, tc.kw, b, tc.s, tc.p, tc.d, tc.groups)
		y := l.Forward(dev.Tensor(xs, tc.n, tc.c, tc.h, tc.w))
		if !slices.Equal(y.Shape(), []int{tc.n, tc.oc, oh, ow}) {
			t.Fatalf("%s: shape %v, want %v", name, y.Shape(), []int{tc.n, tc.oc, oh, ow})
		}
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, "Conv2d "+name, got, want, 1e-5)
		// A second call of the same shape reuses the index table.
		got2, _ := l.Forward(dev.Tensor(xs, tc.n, tc.c, tc.h, tc.w)).Data()
		if !slices.Equal(got, got2) {
			t.Errorf("%s: a second Forward differs", name)
		}
	}
}

func TestConv1dValues(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(12)
	for _, tc := range []struct{ n, c, l, oc, k, s, p, d, groups int }{
		{2, 3, 10, 4, 3, 2, 1, 2, 1},
		{1, 2, 7, 4, 2, 1, 0, 1, 2},
		{3, 1, 5, 2, 5, 1, 2, 1, 1},
	} {
		name := fmt.Sprintf("%+v", tc)
		l := NewConv1d(dev, tc.c, tc.oc, tc.k, ConvOptions{Stride: tc.s, Padding: tc.p, Dilation: tc.d, Groups: tc.groups}, r)
		xs := randVals(r, tc.n*tc.c*tc.l)
		w, _ := l.W.Data()
		b, _ := l.B.Data()
		want, _, ol := convRef(xs, tc.n, tc.c, 1, tc.l, w, tc.oc, 1, tc.k, b, [2]int{1, tc.s}, [2]int{0, tc.p}, [2]int{1, tc.d}, tc.groups)
		y := l.Forward(dev.Tensor(xs, tc.n, tc.c, tc.l))
		if !slices.Equal(y.Shape(), []int{tc.n, tc.oc, ol}) {
			t.Fatalf("%s: shape %v, want %v", name, y.Shape(), []int{tc.n, tc.oc, ol})
		}
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, "Conv1d "+name, got, want, 1e-5)
	}
}

// The default initialization is PyTorch's: |w|, |b| <= 1/sqrt(fanIn),
// filling that range, and W keeps the [out, in/groups, kh, kw] layout.
func TestConvInit(t *testing.T) {
	dev := openDev(t)
	l := NewConv2d(dev, 8, 16, [2]int{3, 3}, ConvOptions{Groups: 2}, NewRNG(1))
	if !slices.Equal(l.W.Shape(), []int{16, 4, 3, 3}) || !slices.Equal(l.B.Shape(), []int{16}) {
		t.Fatalf("shapes %v %v", l.W.Shape(), l.B.Shape())
	}
	bound := 1 / math.Sqrt(4*9)
	for name, p := range map[string]*core.Tensor{"W": l.W, "B": l.B} {
		v, _ := p.Data()
		hi := 0.0
		for _, x := range v {
			hi = max(hi, math.Abs(float64(x)))
		}
		if hi > bound || hi < 0.7*bound {
			t.Errorf("%s: max |value| %g, want in [0.7, 1] x %g", name, hi, bound)
		}
	}
	// Init is called with [in/groups, out, kh, kw] and transposed into W.
	seq := func(shape []int, _ *rand.Rand) []float32 {
		v := make([]float32, count(shape))
		for i := range v {
			v[i] = float32(i)
		}
		return v
	}
	l1 := NewConv1d(dev, 2, 3, 2, ConvOptions{Init: seq, NoBias: true}, nil)
	w, _ := l1.W.Data()
	// drawn [c=2, o=3, k=2]: value (c*3+o)*2+k at W[o, c, k]
	want := []float32{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}
	if !slices.Equal(w, want) || l1.B != nil {
		t.Errorf("W %v, want %v; bias %v", w, want, l1.B)
	}
}

func TestPoolValues(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(13)
	type pc struct {
		n, c, h, w int
		k, s, p, d [2]int
	}
	for _, tc := range []pc{
		{2, 3, 6, 6, [2]int{2, 2}, [2]int{2, 2}, [2]int{0, 0}, [2]int{1, 1}},
		{1, 2, 7, 5, [2]int{3, 3}, [2]int{2, 1}, [2]int{1, 1}, [2]int{1, 1}},
		{2, 2, 8, 7, [2]int{3, 2}, [2]int{1, 2}, [2]int{1, 1}, [2]int{2, 1}},
	} {
		name := fmt.Sprintf("%+v", tc)
		xs := randVals(r, tc.n*tc.c*tc.h*tc.w)
		for i := range xs {
			xs[i] -= 2 // all negative: a zero from the padding would win a wrong max
		}
		x := dev.Tensor(xs, tc.n, tc.c, tc.h, tc.w)
		mp := &MaxPool2d{Kernel: tc.k, Stride: tc.s, Padding: tc.p, Dilation: tc.d}
		want, oh, ow := poolRef(xs, tc.n, tc.c, tc.h, tc.w, tc.k, tc.s, tc.p, tc.d, true)
		y := mp.Forward(x)
		if !slices.Equal(y.Shape(), []int{tc.n, tc.c, oh, ow}) {
			t.Fatalf("MaxPool2d %s: shape %v", name, y.Shape())
		}
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, "MaxPool2d "+name, got, want, 0)
		if tc.d == [2]int{1, 1} {
			ap := &AvgPool2d{Kernel: tc.k, Stride: tc.s, Padding: tc.p}
			want, _, _ = poolRef(xs, tc.n, tc.c, tc.h, tc.w, tc.k, tc.s, tc.p, tc.d, false)
			got, err = ap.Forward(x).Data()
			if err != nil {
				t.Fatal(err)
			}
			checkNear(t, "AvgPool2d "+name, got, want, 1e-6)
		}
	}
	// 1-D pools, and the constructors' defaults (stride = kernel)
	xs := randVals(r, 2*3*9)
	x := dev.Tensor(xs, 2, 3, 9)
	for _, tc := range []struct{ k, s, p int }{{2, 0, 0}, {3, 2, 1}, {4, 1, 2}} {
		s := tc.s
		if s == 0 {
			s = tc.k
		}
		g := func(isMax bool) []float64 {
			y, _, _ := poolRef(xs, 2, 3, 1, 9, [2]int{1, tc.k}, [2]int{1, s}, [2]int{0, tc.p}, [2]int{1, 1}, isMax)
			return y
		}
		got, err := NewMaxPool1d(tc.k, tc.s, tc.p).Forward(x).Data()
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, fmt.Sprintf("MaxPool1d %+v", tc), got, g(true), 0)
		got, err = NewAvgPool1d(tc.k, tc.s, tc.p).Forward(x).Data()
		if err != nil {
			t.Fatal(err)
		}
		checkNear(t, fmt.Sprintf("AvgPool1d %+v", tc), got, g(false), 1e-6)
	}
}

// MaxPool's gradient goes to the first maximal element of each window, all
// of it, also on ties; infinities and NaN come out as a max does.
func TestMaxPoolGradTies(t *testing.T) {
	dev := openDev(t)
	inf := float32(math.Inf(1))
	// one 4x4 channel, 2x2 windows: a tie of all four, a tie of two, a
	// single max, and +Inf with -Inf
	xs := []float32{
		1, 1, 0, 3,
		1, 1, 3, 2,
		5, -1, -inf, inf,
		2, 4, -inf, -inf,
	}
	x := dev.Param(xs, 1, 1, 4, 4)
	y := NewMaxPool2d(2, 0, 0).Forward(x)
	wts := dev.Tensor([]float32{1, 2, 3, 4}, 1, 1, 2, 2)
	loss := core.Sum(core.Mul(y, wts))
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	got, err := y.Data()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []float32{1, 3, 5, inf}) {
		t.Errorf("values %v, want [1 3 5 +Inf]", got)
	}
	g, err := x.Grad().Data()
	if err != nil {
		t.Fatal(err)
	}
	// The infinite max gets its window's gradient, as in PyTorch.
	want := []float32{
		1, 0, 0, 2,
		0, 0, 0, 0,
		3, 0, 0, 4,
		0, 0, 0, 0,
	}
	if !slices.Equal(g, want) {
		t.Errorf("gradient %v, want %v", g, want)
	}
	// NaN in a window gives NaN there only.
	x2 := dev.Tensor([]float32{1, float32(math.NaN()), 2, 0}, 1, 1, 1, 4)
	v, _ := NewMaxPool1d(2, 0, 0).Forward(core.Reshape(x2, 1, 1, 4)).Data()
	if !math.IsNaN(float64(v[0])) || v[1] != 2 {
		t.Errorf("NaN window: %v, want [NaN 2]", v)
	}
}

func TestConvPoolGradcheck(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(14)
	c2 := NewConv2d(dev, 4, 4, [2]int{3, 2}, ConvOptions{Groups: 2}, r)
	c2.Stride, c2.Padding, c2.Dilation = [2]int{2, 1}, [2]int{1, 1}, [2]int{1, 2}
	c1 := NewConv1d(dev, 2, 3, 3, ConvOptions{Padding: 1, Stride: 2}, r)
	x4 := dev.Param(randVals(r, 2*4*5*5), 2, 4, 5, 5)
	x3 := dev.Param(randVals(r, 2*2*7), 2, 2, 7)
	weighted := func(y *core.Tensor) *core.Tensor {
		w := make([]float32, y.Len())
		for i := range w {
			w[i] = float32(i%7) - 2.5
		}
		return core.Sum(core.Mul(y, dev.Tensor(w, y.Shape()...)))
	}
	check := func(name string, f func() *core.Tensor, ps ...*core.Tensor) {
		if err := core.Gradcheck(f, ps, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	check("Conv2d", func() *core.Tensor { return weighted(c2.Forward(x4)) }, x4, c2.W, c2.B)
	check("Conv1d", func() *core.Tensor { return weighted(c1.Forward(x3)) }, x3, c1.W, c1.B)
	// distinct values, so that no window has a tie within the step
	perm := r.Perm(2 * 4 * 5 * 5)
	xv := make([]float32, len(perm))
	for i, p := range perm {
		xv[i] = float32(p) / 10
	}
	xd := dev.Param(xv, 2, 4, 5, 5)
	mp := &MaxPool2d{Kernel: [2]int{3, 2}, Stride: [2]int{2, 1}, Padding: [2]int{1, 1}, Dilation: [2]int{1, 1}}
	check("MaxPool2d", func() *core.Tensor { return weighted(mp.Forward(xd)) }, xd)
	check("AvgPool2d", func() *core.Tensor { return weighted(NewAvgPool2d(3, 2, 1).Forward(xd)) }, xd)
	check("MaxPool1d", func() *core.Tensor { return weighted(NewMaxPool1d(3, 2, 1).Forward(core.Reshape(xd, 2, 4, 25))) }, xd)
	check("AvgPool1d", func() *core.Tensor { return weighted(NewAvgPool1d(2, 1, 1).Forward(x3)) }, x3)
}

func TestConvPoolPanics(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(15)
	c2 := NewConv2d(dev, 3, 4, [2]int{3, 3}, ConvOptions{}, r)
	c1 := NewConv1d(dev, 2, 2, 3, ConvOptions{}, r)
	checkPanics(t, []panicCase{
		{"conv2d rank", "nn.Conv2d.Forward: input of shape [2 3 5], want [N, 3, H, W]", func() { c2.Forward(dev.Full(0, 2, 3, 5)) }},
		{"conv2d channels", "nn.Conv2d.Forward: input of shape [1 2 5 5], want [N, 3, H, W]", func() { c2.Forward(dev.Full(0, 1, 2, 5, 5)) }},
		{"conv2d small", "nn.Conv2d.Forward: input of shape [1 3 2 5] is too small for kernel 3x3", func() { c2.Forward(dev.Full(0, 1, 3, 2, 5)) }},
		{"conv2d nil", "nn.Conv2d.Forward: nil input", func() { c2.Forward(nil) }},
		{"conv1d rank", "nn.Conv1d.Forward: input of shape [1 2 3 4], want [N, 2, L]", func() { c1.Forward(dev.Full(0, 1, 2, 3, 4)) }},
		{"groups", "nn.NewConv2d: in 3, out 4 channels: both must be divisible by groups 2", func() { NewConv2d(dev, 3, 4, [2]int{1, 1}, ConvOptions{Groups: 2}, r) }},
		{"stride", "nn.NewConv1d: stride -1", func() { NewConv1d(dev, 1, 1, 1, ConvOptions{Stride: -1}, r) }},
		{"kernel", "nn.NewConv2d: kernel [0 3], want sizes >= 1", func() { NewConv2d(dev, 1, 1, [2]int{0, 3}, ConvOptions{}, r) }},
		{"channels", "nn.NewConv1d: in 0, out 1", func() { NewConv1d(dev, 0, 1, 1, ConvOptions{}, r) }},
		{"field stride", "nn.Conv2d.Forward: kernel 3x3, stride 0x1", func() {
			c := NewConv2d(dev, 3, 4, [2]int{3, 3}, ConvOptions{}, r)
			c.Stride = [2]int{0, 1}
			c.Forward(dev.Full(0, 1, 3, 5, 5))
		}},
		{"index limit", "more than f32 indices address exactly", func() {
			NewConv1d(dev, 1, 1, 1, ConvOptions{Padding: 1}, r).Forward(dev.Full(0, 1<<12, 1, 1<<12))
		}},
		{"pool kernel", "nn.NewMaxPool2d: kernel 0, stride 0, padding 0", func() { NewMaxPool2d(0, 0, 0) }},
		{"pool padding", "nn.NewAvgPool1d: kernel 2, stride 1, padding 2", func() { NewAvgPool1d(2, 1, 2) }},
		{"pool field padding", "nn.MaxPool2d.Forward: padding [2 0] for kernel [3 3]: padding must be at most half the kernel", func() {
			p := NewMaxPool2d(3, 1, 0)
			p.Padding = [2]int{2, 0}
			p.Forward(dev.Full(0, 1, 1, 5, 5))
		}},
		{"pool rank", "nn.AvgPool2d.Forward: input of shape [1 5 5], want [N, C, H, W]", func() { NewAvgPool2d(2, 0, 0).Forward(dev.Full(0, 1, 5, 5)) }},
		{"pool1d rank", "nn.MaxPool1d.Forward: input of shape [1 5], want [N, C, L]", func() { NewMaxPool1d(2, 0, 0).Forward(dev.Full(0, 1, 5)) }},
		{"pool small", "nn.MaxPool1d.Forward: input of shape [1 1 2] is too small", func() { NewMaxPool1d(3, 0, 0).Forward(dev.Full(0, 1, 1, 2)) }},
		{"pool nil", "nn.AvgPool1d.Forward: nil input", func() { NewAvgPool1d(2, 0, 0).Forward(nil) }},
	})
}
