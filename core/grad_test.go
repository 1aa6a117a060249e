package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend/backendtest"
)

// gradCase builds a scalar loss from params; shapes give the params.
type gradCase struct {
	name   string
	shapes [][]int
	gen    func(r *rand.Rand) float64 // param values; default U(-1, 1)
	f      func(p []*Tensor) *Tensor
}

// weights makes a fixed random weighting so the loss depends on every
// output element differently (a plain Sum would hide transposed gradients).
func weighted(y *Tensor, seed uint64) *Tensor {
	r := rand.New(rand.NewPCG(seed, 7))
	w := make([]float32, y.Len())
	for i := range w {
		w[i] = float32(r.Float64()*2 - 1)
	}
	return Sum(Mul(y, y.Device().Tensor(w, y.shape...)))
}

func pos(r *rand.Rand) float64 { return 0.5 + r.Float64() }

var gradCases = []gradCase{
	{name: "add-broadcast", shapes: [][]int{{3, 4}, {4}}, f: func(p []*Tensor) *Tensor { return Add(p[0], p[1]) }},
	{name: "sub-broadcast", shapes: [][]int{{3, 1}, {2, 3, 4}}, f: func(p []*Tensor) *Tensor { return Sub(p[0], p[1]) }},
	{name: "mul-broadcast", shapes: [][]int{{2, 3, 4}, {3, 1}}, f: func(p []*Tensor) *Tensor { return Mul(p[0], p[1]) }},
	{name: "div", shapes: [][]int{{3, 5}, {3, 5}}, gen: pos, f: func(p []*Tensor) *Tensor { return Div(p[0], p[1]) }},
	{name: "neg", shapes: [][]int{{5}}, f: func(p []*Tensor) *Tensor { return Neg(p[0]) }},
	{name: "scale", shapes: [][]int{{2, 3}}, f: func(p []*Tensor) *Tensor { return Scale(p[0], -2.5) }},
	{name: "affine", shapes: [][]int{{2, 3}}, f: func(p []*Tensor) *Tensor { return Affine(p[0], 0.5, 3) }},
	{name: "abs", shapes: [][]int{{4, 7}}, gen: func(r *rand.Rand) float64 { return pos(r) * float64(1-2*r.IntN(2)) }, f: func(p []*Tensor) *Tensor { return Abs(p[0]) }},
	{name: "gelu", shapes: [][]int{{4, 7}}, f: func(p []*Tensor) *Tensor { return GELU(Scale(p[0], 3)) }},
	{name: "silu", shapes: [][]int{{4, 7}}, f: func(p []*Tensor) *Tensor { return SiLU(Scale(p[0], 3)) }},
	{name: "relu", shapes: [][]int{{4, 7}}, f: func(p []*Tensor) *Tensor { return ReLU(p[0]) }},
	{name: "sigmoid", shapes: [][]int{{4, 7}}, f: func(p []*Tensor) *Tensor { return Sigmoid(p[0]) }},
	{name: "tanh", shapes: [][]int{{4, 7}}, f: func(p []*Tensor) *Tensor { return Tanh(p[0]) }},
	{name: "exp", shapes: [][]int{{3, 3}}, f: func(p []*Tensor) *Tensor { return Exp(p[0]) }},
	{name: "log", shapes: [][]int{{3, 3}}, gen: pos, f: func(p []*Tensor) *Tensor { return Log(p[0]) }},
	{name: "sqrt", shapes: [][]int{{3, 3}}, gen: pos, f: func(p []*Tensor) *Tensor { return Sqrt(p[0]) }},
	{name: "pow", shapes: [][]int{{3, 3}}, gen: pos, f: func(p []*Tensor) *Tensor { return Pow(p[0], 2.5) }},
	{name: "clamp", shapes: [][]int{{4, 5}}, f: func(p []*Tensor) *Tensor { return Clamp(p[0], -0.5, 0.5) }},
	{name: "softmax", shapes: [][]int{{3, 6}}, f: func(p []*Tensor) *Tensor { return Softmax(p[0]) }},
	{name: "log-softmax", shapes: [][]int{{2, 3, 5}}, f: func(p []*Tensor) *Tensor { return LogSoftmax(p[0]) }},
	{name: "sum-all", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Sum(Mul(p[0], p[0])) }},
	{name: "sum-axis0", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return SumAxis(p[0], 0, false) }},
	{name: "sum-axis-keep", shapes: [][]int{{2, 3, 4}}, f: func(p []*Tensor) *Tensor { return SumAxis(p[0], -1, true) }},
	{name: "mean", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Mul(Mean(p[0]), Mean(p[0])) }},
	{name: "mean-axis", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return MeanAxis(p[0], 1, false) }},
	{name: "transpose", shapes: [][]int{{3, 5}}, f: func(p []*Tensor) *Tensor { return Transpose(p[0]) }},
	{name: "permute", shapes: [][]int{{2, 3, 4}}, f: func(p []*Tensor) *Tensor { return Permute(p[0], 2, 0, 1) }},
	{name: "reshape", shapes: [][]int{{2, 6}}, f: func(p []*Tensor) *Tensor { return Reshape(p[0], 3, -1) }},
	{name: "expand", shapes: [][]int{{3, 1}}, f: func(p []*Tensor) *Tensor { return Expand(p[0], 2, 3, 4) }},
	{name: "slice-rows", shapes: [][]int{{6, 3}}, f: func(p []*Tensor) *Tensor { return SliceRows(p[0], 2, 3) }},
	{name: "concat-rows", shapes: [][]int{{2, 3}, {4, 3}}, f: func(p []*Tensor) *Tensor { return ConcatRows(p[0], p[1]) }},
	{name: "gather", shapes: [][]int{{5, 3}}, f: func(p []*Tensor) *Tensor {
		return Gather(p[0], p[0].dev.Tensor([]float32{4, 0, 4, 2}, 4))
	}},
	{name: "matmul", shapes: [][]int{{3, 4}, {4, 5}}, f: func(p []*Tensor) *Tensor { return MatMul(p[0], p[1]) }},
	{name: "matmul-transA", shapes: [][]int{{4, 3}, {4, 5}}, f: func(p []*Tensor) *Tensor { return MatMulT(p[0], p[1], true, false) }},
	{name: "matmul-transB", shapes: [][]int{{3, 4}, {5, 4}}, f: func(p []*Tensor) *Tensor { return MatMulT(p[0], p[1], false, true) }},
	{name: "matmul-transAB", shapes: [][]int{{4, 3}, {5, 4}}, f: func(p []*Tensor) *Tensor { return MatMulT(p[0], p[1], true, true) }},
	{name: "matmul-batched", shapes: [][]int{{2, 3, 4}, {2, 4, 2}}, f: func(p []*Tensor) *Tensor { return MatMul(p[0], p[1]) }},
	{name: "mlp", shapes: [][]int{{4, 3}, {3, 5}, {5}, {5, 2}}, f: func(p []*Tensor) *Tensor {
		return MatMul(Tanh(Add(MatMul(p[0], p[1]), p[2])), p[3])
	}},
	{name: "sin", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Sin(Scale(p[0], 3)) }},
	{name: "cos", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Cos(Scale(p[0], 3)) }},
	// Seeded, so the analytic and the numeric pass draw the same mask.
	{name: "dropout", shapes: [][]int{{5, 7}}, f: func(p []*Tensor) *Tensor {
		if err := p[0].dev.Seed(7); err != nil {
			panic(err)
		}
		return Dropout(Tanh(p[0]), 0.4)
	}},
	{name: "shared-input", shapes: [][]int{{3, 3}}, f: func(p []*Tensor) *Tensor { return Mul(Exp(p[0]), Sigmoid(p[0])) }},
}

// TestGradients checks every op's gradient against central finite
// differences computed in float64 on the same lowered graph (the reference
// interpreter of backendtest), so f32 rounding does not enter the reference.
func TestGradients(t *testing.T) {
	dev, err := Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for ci, c := range gradCases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 1))
			gen := c.gen
			if gen == nil {
				gen = func(r *rand.Rand) float64 { return 2*r.Float64() - 1 }
			}
			ps := make([]*Tensor, len(c.shapes))
			for i, s := range c.shapes {
				n := 1
				for _, d := range s {
					n *= d
				}
				v := make([]float32, n)
				for k := range v {
					v[k] = float32(gen(r))
				}
				ps[i] = dev.Param(v, s...)
			}
			build := func() *Tensor {
				y := c.f(ps)
				if y.Len() == 1 {
					return Reshape(y)
				}
				return weighted(y, uint64(ci))
			}
			// analytic, f32 on the backend
			loss := build()
			if err := loss.Backward(); err != nil {
				t.Fatal(err)
			}
			analytic := make([][]float32, len(ps))
			for i, p := range ps {
				if p.Grad() == nil {
					t.Fatalf("param %d has no gradient", i)
				}
				if analytic[i], err = p.Grad().Data(); err != nil {
					t.Fatal(err)
				}
				p.ZeroGrad()
			}
			// numeric, float64 on the reference interpreter
			loss = build()
			dev.mu.Lock()
			lw, err := dev.lower(false)
			if err == nil {
				err = dev.allocOutputs(lw)
			}
			dev.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			args := make([][]float64, len(lw.args))
			for i, b := range lw.args {
				v := make([]float32, b.Len())
				if err := dev.be.Read(b, 0, v); err != nil {
					t.Fatal(err)
				}
				args[i] = make([]float64, len(v))
				for k, x := range v {
					args[i][k] = float64(x)
				}
			}
			lossNode := lw.nodeOf.of(loss)
			eval := func() float64 {
				a := make([][]float64, len(args))
				for i := range args {
					a[i] = append([]float64(nil), args[i]...)
				}
				vals, err := backendtest.Eval(&lw.g, a)
				if err != nil {
					t.Fatal(err)
				}
				return vals[lossNode][0]
			}
			const h = 1e-4
			for i, p := range ps {
				arg := lw.g.Nodes[lw.nodeOfArg(p.stor)].Arg
				for k := range args[arg] {
					x := args[arg][k]
					args[arg][k] = x + h
					up := eval()
					args[arg][k] = x - h
					down := eval()
					args[arg][k] = x
					num := (up - down) / (2 * h)
					got := float64(analytic[i][k])
					if math.Abs(got-num) > 2e-3*(1+math.Abs(num)) {
						t.Errorf("param %d %v element %d: analytic %.6g, finite difference %.6g", i, p.shape, k, got, num)
					}
				}
			}
			lw.free(dev)
			dev.mu.Lock()
			dev.pending = dev.pending[:0]
			dev.mu.Unlock()
		})
	}
}

func ExampleTensor_Backward() {
	dev, _ := Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{1, 2, 3}, 3)
	y := Sum(Mul(x, x)) // y = sum x^2, dy/dx = 2x
	if err := y.Backward(); err != nil {
		panic(err)
	}
	g, _ := x.Grad().Data()
	fmt.Println(g)
	// Output: [2 4 6]
}

// nodeOfArg is lw.argOf's node, 0 for a value lw does not bind (as the map
// it replaced answered).
func (lw *lowering) nodeOfArg(s *storage) int {
	i, _ := lw.argOf(s)
	return i
}
