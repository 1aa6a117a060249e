package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
)

// RNNLayer holds one layer's weights of an LSTM or GRU, in PyTorch's
// layout: the gates stacked along the rows (LSTM: input, forget, cell,
// output; GRU: reset, update, new), WeightIH [gates*hidden, in], WeightHH
// [gates*hidden, hidden], BiasIH and BiasHH [gates*hidden].
type RNNLayer struct {
	WeightIH, WeightHH, BiasIH, BiasHH *core.Tensor
}

// rnn is what LSTM and GRU share: sizes, layers and the unrolling.
type rnn struct {
	fn                  string // "LSTM" or "GRU", for messages
	gates               int
	in, hidden, nlayers int
	batchFirst          bool
	layers              []RNNLayer
	dev                 *core.Device
}

func newRNN(fn string, gates int, dev *core.Device, in, hidden, layers int, batchFirst bool, rng *rand.Rand) rnn {
	if in < 1 || hidden < 1 || layers < 1 {
		panic(fmt.Sprintf("nn.New%s: input size %d, hidden size %d, %d layers: all must be >= 1", fn, in, hidden, layers))
	}
	checkDevice("New"+fn, dev)
	checkRNG("New"+fn, rng)
	r := rnn{fn: fn, gates: gates, in: in, hidden: hidden, nlayers: layers, batchFirst: batchFirst, dev: dev}
	// PyTorch's init: every weight and bias ~ U(-1/sqrt(hidden), 1/sqrt(hidden)),
	// drawn in the order of the parameters
	a := 1 / math.Sqrt(float64(hidden))
	g := gates * hidden
	for l := range layers {
		k := in
		if l > 0 {
			k = hidden
		}
		r.layers = append(r.layers, RNNLayer{
			WeightIH: dev.Param(uniform([]int{g, k}, rng, a), g, k),
			WeightHH: dev.Param(uniform([]int{g, hidden}, rng, a), g, hidden),
			BiasIH:   dev.Param(uniform([]int{g}, rng, a), g),
			BiasHH:   dev.Param(uniform([]int{g}, rng, a), g),
		})
	}
	return r
}

// Params lists the weights in PyTorch's order: weight_ih_l0, weight_hh_l0,
// bias_ih_l0, bias_hh_l0, then layer 1's.
func (r *rnn) Params() []*core.Tensor {
	var ps []*core.Tensor
	for _, l := range r.layers {
		ps = append(ps, l.WeightIH, l.WeightHH, l.BiasIH, l.BiasHH)
	}
	return ps
}

// NamedTensors names the weights as PyTorch's state_dict does
// (weight_ih_l0, ...), so its files load by name.
func (r *rnn) NamedTensors() []Named {
	var ns []Named
	for k, l := range r.layers {
		ns = append(ns,
			Named{fmt.Sprintf("weight_ih_l%d", k), l.WeightIH}, Named{fmt.Sprintf("weight_hh_l%d", k), l.WeightHH},
			Named{fmt.Sprintf("bias_ih_l%d", k), l.BiasIH}, Named{fmt.Sprintf("bias_hh_l%d", k), l.BiasHH})
	}
	return ns
}

// Layers returns the layers' weights (for setting them, e.g. from a file).
func (r *rnn) Layers() []RNNLayer { return r.layers }

// steps checks x and returns its time steps, each transposed to
// [in, batch] (the unrolling works on columns, so that the gates are
// row slices: views, not copies), with the sequence length and batch.
func (r *rnn) steps(x *core.Tensor) (xs []*core.Tensor, T, B int) {
	fn := "nn." + r.fn + ".Forward"
	if x == nil {
		panic(fn + ": nil input")
	}
	if x.Rank() != 3 || x.Dim(2) != r.in {
		order := "[seq, batch, %d]"
		if r.batchFirst {
			order = "[batch, seq, %d]"
		}
		panic(fmt.Sprintf("%s: input of shape %v, want "+order, fn, x.Shape(), r.in))
	}
	T, B = x.Dim(0), x.Dim(1)
	perm := []int{0, 2, 1} // [T, B, in] -> [T, in, B]
	if r.batchFirst {
		T, B = B, T
		perm = []int{1, 2, 0} // [B, T, in] -> [T, in, B]
	}
	xt := core.Permute(x, perm...)
	for t := range T {
		xs = append(xs, core.Reshape(core.SliceRows(xt, t, 1), r.in, B))
	}
	return xs, T, B
}

// state checks an initial state (h0 or c0, [layers, batch, hidden]) and
// returns each layer's, transposed to [hidden, batch]; nil for none.
func (r *rnn) state(name string, s *core.Tensor, B int) []*core.Tensor {
	out := make([]*core.Tensor, r.nlayers)
	if s == nil {
		return out
	}
	if s.Rank() != 3 || s.Dim(0) != r.nlayers || s.Dim(1) != B || s.Dim(2) != r.hidden {
		panic(fmt.Sprintf("nn.%s.Forward: %s of shape %v, want [%d %d %d] (layers, batch, hidden)", r.fn, name, s.Shape(), r.nlayers, B, r.hidden))
	}
	st := core.Permute(s, 0, 2, 1)
	for l := range out {
		out[l] = core.Reshape(core.SliceRows(st, l, 1), r.hidden, B)
	}
	return out
}

// output stacks the last layer's [hidden, batch] steps into the output's
// layout and the layers' last states into [layers, batch, hidden].
func (r *rnn) output(hs, last []*core.Tensor) (out, n *core.Tensor) {
	out = core.Stack(0, hs...) // [T, H, B]
	if r.batchFirst {
		out = core.Permute(out, 2, 0, 1)
	} else {
		out = core.Permute(out, 0, 2, 1)
	}
	return out, core.Permute(core.Stack(0, last...), 0, 2, 1)
}

// column is b as a [n, 1] column, broadcast over the batch.
func column(b *core.Tensor) *core.Tensor { return core.Reshape(b, b.Len(), 1) }

// LSTM is PyTorch's nn.LSTM (multi-layer, no dropout between layers, no
// projection, biases on): for each layer and time step,
//
//	i = σ(W_ii x + b_ii + W_hi h + b_hi)    f = σ(W_if x + b_if + W_hf h + b_hf)
//	g = tanh(W_ig x + b_ig + W_hg h + b_hg) o = σ(W_io x + b_io + W_ho h + b_ho)
//	c' = f·c + i·g                         h' = o·tanh(c')
//
// each layer's h the next layer's x. It is unrolled over time into core
// ops when it records, so a captured step (CaptureStep) records again for
// each sequence length. Its weights are named as PyTorch's (weight_ih_l0,
// weight_hh_l0, bias_ih_l0, bias_hh_l0, ...).
type LSTM struct{ rnn }

// NewLSTM makes an LSTM of layers layers on dev, taking inputs of in
// features to hidden ones, initialized as PyTorch's (every weight
// U(-1/sqrt(hidden), 1/sqrt(hidden)), drawn from rng in parameter order).
// With batchFirst inputs and outputs are [batch, seq, features], else
// [seq, batch, features].
func NewLSTM(dev *core.Device, in, hidden, layers int, batchFirst bool, rng *rand.Rand) *LSTM {
	return &LSTM{newRNN("LSTM", 4, dev, in, hidden, layers, batchFirst, rng)}
}

// Forward returns the output sequence of x from zero initial states (see
// Run).
func (m *LSTM) Forward(x *core.Tensor) *core.Tensor {
	out, _, _ := m.Run(x, nil, nil)
	return out
}

// Run returns the last layer's output sequence ([batch, seq, hidden] with
// batchFirst, else [seq, batch, hidden]) and each layer's last hidden and
// cell states hn and cn ([layers, batch, hidden]), from initial states h0
// and c0 of that shape (nil for zeros), as PyTorch's
// output, (h_n, c_n) = lstm(x, (h0, c0)).
func (m *LSTM) Run(x, h0, c0 *core.Tensor) (out, hn, cn *core.Tensor) {
	xs, _, B := m.steps(x)
	hs, cs := m.state("h0", h0, B), m.state("c0", c0, B)
	H := m.hidden
	lastC := make([]*core.Tensor, m.nlayers)
	m.dev.Scope("LSTM", func() {
		for l, w := range m.layers {
			h, c := hs[l], cs[l]
			b := column(core.Add(w.BiasIH, w.BiasHH))
			for t, xt := range xs {
				g := core.Add(core.MatMul(w.WeightIH, xt), b) // [4H, B]
				if h != nil {
					g = core.Add(g, core.MatMul(w.WeightHH, h))
				}
				i := core.Sigmoid(core.SliceRows(g, 0, H))
				f := core.Sigmoid(core.SliceRows(g, H, H))
				gg := core.Tanh(core.SliceRows(g, 2*H, H))
				o := core.Sigmoid(core.SliceRows(g, 3*H, H))
				if c == nil {
					c = core.Mul(i, gg)
				} else {
					c = core.Add(core.Mul(f, c), core.Mul(i, gg))
				}
				h = core.Mul(o, core.Tanh(c))
				xs[t] = h // the next layer's input
			}
			hs[l], lastC[l] = h, c
		}
		out, hn = m.output(xs, hs)
		cn = core.Permute(core.Stack(0, lastC...), 0, 2, 1)
	})
	return out, hn, cn
}

// GRU is PyTorch's nn.GRU (multi-layer, no dropout between layers, biases
// on): for each layer and time step,
//
//	r = σ(W_ir x + b_ir + W_hr h + b_hr)    z = σ(W_iz x + b_iz + W_hz h + b_hz)
//	n = tanh(W_in x + b_in + r·(W_hn h + b_hn))
//	h' = (1 - z)·n + z·h
//
// each layer's h the next layer's x, unrolled over time as LSTM's, with
// the same parameter names.
type GRU struct{ rnn }

// NewGRU makes a GRU as NewLSTM makes an LSTM.
func NewGRU(dev *core.Device, in, hidden, layers int, batchFirst bool, rng *rand.Rand) *GRU {
	return &GRU{newRNN("GRU", 3, dev, in, hidden, layers, batchFirst, rng)}
}

// Forward returns the output sequence of x from a zero initial state (see
// Run).
func (m *GRU) Forward(x *core.Tensor) *core.Tensor {
	out, _ := m.Run(x, nil)
	return out
}

// Run returns the last layer's output sequence and each layer's last
// hidden state hn ([layers, batch, hidden]) from initial states h0 of that
// shape (nil for zeros), as PyTorch's output, h_n = gru(x, h0).
func (m *GRU) Run(x, h0 *core.Tensor) (out, hn *core.Tensor) {
	xs, _, B := m.steps(x)
	hs := m.state("h0", h0, B)
	H := m.hidden
	m.dev.Scope("GRU", func() {
		for l, w := range m.layers {
			h := hs[l]
			bi, bh := column(w.BiasIH), column(w.BiasHH)
			for t, xt := range xs {
				gi := core.Add(core.MatMul(w.WeightIH, xt), bi) // [3H, B]
				gh := bh                                        // h = 0: W_hh h is zero
				if h != nil {
					gh = core.Add(core.MatMul(w.WeightHH, h), bh)
				}
				r := core.Sigmoid(core.Add(core.SliceRows(gi, 0, H), core.SliceRows(gh, 0, H)))
				z := core.Sigmoid(core.Add(core.SliceRows(gi, H, H), core.SliceRows(gh, H, H)))
				n := core.Tanh(core.Add(core.SliceRows(gi, 2*H, H), core.Mul(r, core.SliceRows(gh, 2*H, H))))
				if h == nil {
					h = core.Sub(n, core.Mul(z, n)) // (1 - z)·n
				} else {
					h = core.Add(n, core.Mul(z, core.Sub(h, n))) // (1 - z)·n + z·h
				}
				xs[t] = h
			}
			hs[l] = h
		}
		out, hn = m.output(xs, hs)
	})
	return out, hn
}
