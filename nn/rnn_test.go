package nn

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// rnnTorchCase is one PyTorch LSTM or GRU run (rnn_torch_fixture_test.go).
type rnnTorchCase struct {
	name, kind         string
	in, hidden, layers int
	batchFirst         bool
	x                  []float32
	xShape             []int
	h0, c0             []float32
	params, grads      map[string][]float32
	r, s, u            []float32
	out, hn, cn, xGrad []float32
}

// rnnModel builds c's model on dev with c's weights and returns it and a
// function running it on x.
func (c *rnnTorchCase) model(dev *core.Device) (Module, func(x *core.Tensor) (out, hn, cn *core.Tensor)) {
	var m Module
	var run func(x *core.Tensor) (out, hn, cn *core.Tensor)
	state := func(v []float32) *core.Tensor {
		if v == nil {
			return nil
		}
		return dev.Tensor(v, c.layers, len(v)/c.layers/c.hidden, c.hidden)
	}
	if c.kind == "LSTM" {
		l := NewLSTM(dev, c.in, c.hidden, c.layers, c.batchFirst, NewRNG(1))
		m = l
		run = func(x *core.Tensor) (out, hn, cn *core.Tensor) { return l.Run(x, state(c.h0), state(c.c0)) }
	} else {
		g := NewGRU(dev, c.in, c.hidden, c.layers, c.batchFirst, NewRNG(1))
		m = g
		run = func(x *core.Tensor) (out, hn, cn *core.Tensor) {
			out, hn = g.Run(x, state(c.h0))
			return out, hn, nil
		}
	}
	return m, run
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range got {
		if e := math.Abs(float64(got[i]-want[i])) / (1 + math.Abs(float64(want[i]))); !(e <= worst) {
			worst, at = e, i
		}
	}
	if worst > tol {
		t.Errorf("%s: [%d] = %g, want %g (error %.3g > %g)", what, at, got[at], want[at], worst, tol)
	}
}

// TestRNNTorch checks LSTM and GRU against PyTorch on the device under
// test: outputs, last states, and the gradients of the weights and the
// input, with PyTorch's weights loaded by their names.
func TestRNNTorch(t *testing.T) {
	dev := openDev(t)
	for _, c := range rnnTorchCases {
		t.Run(c.name, func(t *testing.T) {
			m, run := c.model(dev)
			named, err := NamedParams(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(named) != len(c.params) {
				t.Fatalf("%d named params, PyTorch has %d", len(named), len(c.params))
			}
			for _, n := range named {
				v, ok := c.params[n.Name]
				if !ok {
					t.Fatalf("parameter %q is not PyTorch's", n.Name)
				}
				if err := n.Tensor.WriteAt(0, v); err != nil {
					t.Fatal(err)
				}
			}
			x := dev.Param(c.x, c.xShape...)
			out, hn, cn := run(x)
			out.Keep()
			hn.Keep()
			loss := core.Add(core.Sum(core.Mul(out, dev.Tensor(c.r, out.Shape()...))), core.Sum(core.Mul(hn, dev.Tensor(c.s, hn.Shape()...))))
			if cn != nil {
				cn.Keep()
				loss = core.Add(loss, core.Sum(core.Mul(cn, dev.Tensor(c.u, cn.Shape()...))))
			}
			if err := loss.Backward(); err != nil {
				t.Fatal(err)
			}
			closeTo(t, "output", data(t, out), c.out, 1e-5)
			closeTo(t, "h_n", data(t, hn), c.hn, 1e-5)
			if cn != nil {
				closeTo(t, "c_n", data(t, cn), c.cn, 1e-5)
			}
			closeTo(t, "input gradient", data(t, x.Grad()), c.xGrad, 1e-4)
			for _, n := range named {
				closeTo(t, n.Name+" gradient", data(t, n.Tensor.Grad()), c.grads[n.Name], 1e-4)
			}
		})
	}
}

// TestRNNGradcheck checks the gradients of both layers' weights, the input
// and the initial states by finite differences in float64, on the device
// under test.
func TestRNNGradcheck(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(9)
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	const in, H, L, T, B = 2, 3, 2, 3, 2
	for _, batchFirst := range []bool{false, true} {
		xs := []int{T, B, in}
		if batchFirst {
			xs = []int{B, T, in}
		}
		x := dev.Param(vals(T*B*in), xs...)
		h0, c0 := dev.Param(vals(L*B*H), L, B, H), dev.Param(vals(L*B*H), L, B, H)
		lstm := NewLSTM(dev, in, H, L, batchFirst, NewRNG(2))
		gru := NewGRU(dev, in, H, L, batchFirst, NewRNG(3))
		wo, wh := dev.Tensor(vals(T*B*H), T*B*H), dev.Tensor(vals(L*B*H), L*B*H)
		weigh := func(out, hn *core.Tensor) *core.Tensor {
			return core.Add(core.Sum(core.Mul(core.Reshape(out, -1), wo)), core.Sum(core.Mul(core.Reshape(hn, -1), wh)))
		}
		lf := func() *core.Tensor {
			out, hn, cn := lstm.Run(x, h0, c0)
			return core.Add(weigh(out, hn), core.Sum(core.Mul(cn, cn)))
		}
		if err := core.Gradcheck(lf, append(lstm.Params(), x, h0, c0), nil); err != nil {
			t.Errorf("LSTM, batch first %v: %v", batchFirst, err)
		}
		gf := func() *core.Tensor { return weigh(gru.Run(x, h0)) }
		if err := core.Gradcheck(gf, append(gru.Params(), x, h0), nil); err != nil {
			t.Errorf("GRU, batch first %v: %v", batchFirst, err)
		}
	}
}

// TestRNNTrainCaptured trains an LSTM and a GRU, each with a Linear head,
// in a captured step on the device under test to say whether a sequence
// of ±1 has more +1 than -1 in it (the sign of its sum, a task that needs
// the whole sequence): the loss must fall far, and the step record once
// per sequence length.
func TestRNNTrainCaptured(t *testing.T) {
	dev := openDev(t)
	const B, T, H = 16, 5, 8
	r := NewRNG(4)
	batch := func() (x, y []float32) {
		x, y = make([]float32, B*T), make([]float32, B)
		for b := range B {
			s := 0
			for k := range T {
				v := 2*r.IntN(2) - 1
				x[b*T+k], s = float32(v), s+v
			}
			y[b] = float32(min(1, max(-1, s)))
		}
		return x, y
	}
	for _, kind := range []string{"LSTM", "GRU"} {
		t.Run(kind, func(t *testing.T) {
			var rec Module
			if kind == "LSTM" {
				rec = NewLSTM(dev, 1, H, 2, true, NewRNG(5))
			} else {
				rec = NewGRU(dev, 1, H, 2, true, NewRNG(5))
			}
			head := NewLinear(dev, H, 1, true, NewRNG(6))
			params := append(rec.Params(), head.Params()...)
			opt := NewAdam(params, 0.02)
			step := CaptureStep(opt, func(in []*core.Tensor) *core.Tensor {
				out := rec.Forward(in[0])                               // [B, T, H]
				last := core.Reshape(core.Narrow(out, 1, T-1, 1), B, H) // the last step's
				return MSELoss(core.Tanh(head.Forward(last)), in[1])
			})
			var first, last float32
			for i := range 300 {
				x, y := batch()
				l, err := step.Step(core.In(x, B, T, 1), core.In(y, B, 1))
				if err != nil {
					t.Fatal(err)
				}
				if i < 10 {
					first += l / 10
				}
				if i >= 290 {
					last += l / 10
				}
			}
			if !(last < first/5) {
				t.Errorf("mean loss %g over the first 10 steps, %g over the last 10: want a fall of 5x", first, last)
			}
			if n := step.Records(); n > 2 {
				t.Errorf("%d recordings for one sequence length, want at most 2", n)
			}
		})
	}
}

func TestRNNPanics(t *testing.T) {
	dev := openDev(t)
	l := NewLSTM(dev, 3, 4, 2, true, NewRNG(1))
	g := NewGRU(dev, 3, 4, 1, false, NewRNG(1))
	x := dev.Tensor(make([]float32, 2*5*3), 2, 5, 3)
	checkPanics(t, []panicCase{
		{"sizes", "nn.NewLSTM: input size 0, hidden size 4, 1 layers: all must be >= 1", func() { NewLSTM(dev, 0, 4, 1, false, NewRNG(1)) }},
		{"features", "nn.LSTM.Forward: input of shape [2 5 2], want [batch, seq, 3]", func() { l.Forward(dev.Tensor(make([]float32, 20), 2, 5, 2)) }},
		{"rank", "nn.GRU.Forward: input of shape [5 3], want [seq, batch, 3]", func() { g.Forward(dev.Tensor(make([]float32, 15), 5, 3)) }},
		{"h0", "nn.LSTM.Forward: h0 of shape [1 2 4], want [2 2 4] (layers, batch, hidden)", func() {
			l.Run(x, dev.Tensor(make([]float32, 8), 1, 2, 4), nil)
		}},
		{"c0", "nn.LSTM.Forward: c0 of shape [2 5 4], want [2 2 4]", func() {
			l.Run(x, nil, dev.Tensor(make([]float32, 40), 2, 5, 4))
		}},
		{"nil", "nn.GRU.Forward: nil input", func() { g.Forward(nil) }},
	})
}
