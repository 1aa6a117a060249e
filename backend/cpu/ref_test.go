package cpu

import (
	"math"

	"github.com/ag-go/ag/backend"
)

// refEval is a float64 interpreter of the IR written for clarity, not
// speed: the reference the backend is checked against. args are modified
// as the backend modifies them: in-place ops update their args where they
// stand, outputs are written when the graph is done. OpArg values are the
// arg slices themselves, so reads after an in-place op see the update.
func refEval(g *backend.Graph, args [][]float64) [][]float64 {
	vals := make([][]float64, len(g.Nodes))
	for i, n := range g.Nodes {
		var x, y []float64
		if len(n.In) > 0 {
			x = vals[n.In[0]]
		}
		if len(n.In) > 1 {
			y = vals[n.In[1]]
		}
		in := func(k int) []int { return g.Nodes[n.In[k]].Shape }
		size := backend.NumElems(n.Shape)
		out := make([]float64, size)
		switch op := n.Op; {
		case op == backend.OpArg:
			out = args[n.Arg][:size]
		case op == backend.OpFill:
			for j := range out {
				out[j] = float64(n.A)
			}
		case op.IsBinary() || op == backend.OpExpand:
			for j := range out {
				idx := unravel(j, n.Shape)
				a := x[bcastIndex(idx, in(0))]
				if op == backend.OpExpand {
					out[j] = a
					continue
				}
				b := y[bcastIndex(idx, in(1))]
				switch op {
				case backend.OpAdd:
					out[j] = a + b
				case backend.OpSub:
					out[j] = a - b
				case backend.OpMul:
					out[j] = a * b
				case backend.OpDiv:
					out[j] = a / b
				}
			}
		case op.IsUnary():
			A, B := float64(n.A), float64(n.B)
			for j, a := range x {
				var r float64
				switch op {
				case backend.OpNeg:
					r = -a
				case backend.OpExp:
					r = math.Exp(a)
				case backend.OpLog:
					r = math.Log(a)
				case backend.OpSqrt:
					r = math.Sqrt(a)
				case backend.OpReLU:
					r = math.Max(a, 0)
				case backend.OpSigmoid:
					r = 1 / (1 + math.Exp(-a))
				case backend.OpTanh:
					r = math.Tanh(a)
				case backend.OpAffine:
					r = a*A + B
				case backend.OpPowConst:
					r = math.Pow(a, A)
				case backend.OpClamp:
					r = math.Min(math.Max(a, A), B)
				case backend.OpInside:
					if A < a && a < B {
						r = 1
					}
				}
				out[j] = r
			}
		case op == backend.OpSum || op == backend.OpMax:
			s := in(0)
			for j := range out {
				idx := unravel(j, n.Shape)
				acc := 0.0
				if op == backend.OpMax {
					acc = math.Inf(-1)
				}
				for k := 0; k < s[n.Axis]; k++ {
					idx[n.Axis] = k
					v := x[ravel(idx, s)]
					if op == backend.OpSum {
						acc += v
					} else {
						acc = math.Max(acc, v)
					}
				}
				out[j] = acc
			}
		case op == backend.OpSoftmax || op == backend.OpLogSoftmax:
			last := 1
			if len(n.Shape) > 0 {
				last = n.Shape[len(n.Shape)-1]
			}
			for r := 0; r < size/last; r++ {
				row := x[r*last : (r+1)*last]
				m := math.Inf(-1)
				for _, v := range row {
					m = math.Max(m, v)
				}
				s := 0.0
				for _, v := range row {
					s += math.Exp(v - m)
				}
				for j, v := range row {
					if op == backend.OpSoftmax {
						out[r*last+j] = math.Exp(v-m) / s
					} else {
						out[r*last+j] = v - m - math.Log(s)
					}
				}
			}
		case op == backend.OpReshape:
			copy(out, x)
		case op == backend.OpPermute:
			for j := range out {
				idx := unravel(j, n.Shape)
				src := make([]int, len(idx))
				for k, p := range n.Perm {
					src[p] = idx[k]
				}
				out[j] = x[ravel(src, in(0))]
			}
		case op == backend.OpSliceRows:
			w := backend.NumElems(n.Shape[1:])
			copy(out, x[n.Start*w:])
		case op == backend.OpConcatRows:
			copy(out, x)
			copy(out[len(x):], y)
		case op == backend.OpGetRows:
			w, rows := backend.NumElems(n.Shape[1:]), in(0)[0]
			for r, v := range y {
				k := refIndex(v, rows)
				copy(out[r*w:(r+1)*w], x[k*w:(k+1)*w])
			}
		case op == backend.OpScatterAddRows:
			w, rows := backend.NumElems(n.Shape[1:]), n.Shape[0]
			for r, v := range y {
				k := refIndex(v, rows)
				for c := 0; c < w; c++ {
					out[k*w+c] += x[r*w+c]
				}
			}
		case op == backend.OpOneHot:
			c := n.Shape[1]
			for r, v := range x {
				out[r*c+refIndex(v, c)] = 1
			}
		case op == backend.OpMatMul:
			refMatMul(out, x, y, in(0), in(1), n.Shape, n.TransA, n.TransB)
		case op == backend.OpAdamW:
			w, gr, m, v, hp := x, y, vals[n.In[2]], vals[n.In[3]], vals[n.In[4]]
			lr, b1, b2, eps, wd, bc1, bc2 := hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], hp[6]
			for j := range w {
				m[j] = b1*m[j] + (1-b1)*gr[j]
				v[j] = b2*v[j] + (1-b2)*gr[j]*gr[j]
				w[j] = w[j]*(1-lr*wd) - lr*(m[j]*bc1)/(math.Sqrt(v[j]*bc2)+eps)
			}
			out = w
		case op == backend.OpSGD:
			w, gr, vel, hp := x, y, vals[n.In[2]], vals[n.In[3]]
			lr, mom, wd := hp[0], hp[1], hp[2]
			for j := range w {
				gp := gr[j] + wd*w[j]
				vel[j] = mom*vel[j] + gp
				w[j] -= lr * vel[j]
			}
			out = w
		default:
			panic("refEval: op " + op.String())
		}
		vals[i] = out
	}
	// Values leave in their args once the graph is done; copy first so an
	// output that reads an arg another output overwrites sees the old value.
	final := make([][]float64, len(g.Outputs))
	for k, o := range g.Outputs {
		final[k] = append([]float64(nil), vals[o.Node]...)
	}
	for k, o := range g.Outputs {
		copy(args[o.Arg], final[k])
	}
	return vals
}

func refIndex(v float64, rows int) int {
	if math.IsNaN(v) {
		return 0
	}
	r := math.Round(v)
	return int(math.Min(math.Max(r, 0), float64(rows-1)))
}

func refMatMul(out, a, b []float64, as, bs, os []int, ta, tb bool) {
	r := len(os)
	m, n := os[r-2], os[r-1]
	k := as[r-1]
	if ta {
		k = as[r-2]
	}
	batch := backend.NumElems(os[:r-2])
	for bi := 0; bi < batch; bi++ {
		A, B, C := a[bi*m*k:], b[bi*k*n:], out[bi*m*n:]
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s := 0.0
				for p := 0; p < k; p++ {
					av := A[i*k+p]
					if ta {
						av = A[p*m+i]
					}
					bv := B[p*n+j]
					if tb {
						bv = B[j*k+p]
					}
					s += av * bv
				}
				C[i*n+j] = s
			}
		}
	}
}

func unravel(j int, shape []int) []int {
	idx := make([]int, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		idx[k] = j % shape[k]
		j /= shape[k]
	}
	return idx
}

func ravel(idx, shape []int) int {
	j := 0
	for k := range shape {
		j = j*shape[k] + idx[k]
	}
	return j
}

// bcastIndex maps an output index to the flat index of an input of shape s
// broadcast to it (right-aligned, size-1 axes read index 0).
func bcastIndex(idx, s []int) int {
	off := len(idx) - len(s)
	j := 0
	for k := range s {
		v := idx[off+k]
		if s[k] == 1 {
			v = 0
		}
		j = j*s[k] + v
	}
	return j
}
