package cpu

import (
	"math"

	"github.com/ag-go/ag/backend"
)

// Elementwise ops. An elementwise op is defined by its row of backend's
// op table: its F32 is the general path, run for every op without a case
// below (a new op needs none). The cases are optimisations keyed by op,
// the loops the backend had before the table, kept where the call through
// F32 per element measurably costs (cheap bodies, log, sigmoid,
// round_f16; BenchmarkElementwise) or a faster formula pays (tanh). Each
// loop has the op switch outside it, so the loop body is straight-line
// float code the compiler can keep in registers. elementwise_test.go
// checks every case against its row's F32.

// f32Of holds each elementwise op's F32, looked up once per row of work
// rather than copying its backend.OpInfo.
var f32Of = func() (t [256]func(x, y, a, b float32) float32) {
	for _, op := range backend.Ops() {
		t[op] = op.Info().F32
	}
	return t
}()

// elementwise is op's F32; it panics through backend.Unknown for an op
// whose row has none.
func elementwise(where string, op backend.Op) func(x, y, a, b float32) float32 {
	f := f32Of[op]
	if f == nil {
		backend.Unknown(where, op)
	}
	return f
}

// binVV: o[i] = a[i] op b[i].
func binVV(op backend.Op, o, a, b []float32) {
	a, b = a[:len(o)], b[:len(o)]
	switch op {
	case backend.OpAdd:
		for i := range o {
			o[i] = a[i] + b[i]
		}
	case backend.OpSub:
		for i := range o {
			o[i] = a[i] - b[i]
		}
	case backend.OpMul:
		for i := range o {
			o[i] = a[i] * b[i]
		}
	case backend.OpDiv:
		for i := range o {
			o[i] = a[i] / b[i]
		}
	case backend.OpMaximum:
		for i := range o {
			o[i] = backend.Max32(a[i], b[i])
		}
	case backend.OpKeep:
		for i := range o {
			o[i] = backend.Keep32(a[i], b[i])
		}
	default:
		f := elementwise("cpu.binVV", op)
		for i := range o {
			o[i] = f(a[i], b[i], 0, 0)
		}
	}
}

// binVS: o[i] = a[i] op s.
func binVS(op backend.Op, o, a []float32, s float32) {
	a = a[:len(o)]
	switch op {
	case backend.OpAdd:
		for i := range o {
			o[i] = a[i] + s
		}
	case backend.OpSub:
		for i := range o {
			o[i] = a[i] - s
		}
	case backend.OpMul:
		for i := range o {
			o[i] = a[i] * s
		}
	case backend.OpDiv:
		for i := range o {
			o[i] = a[i] / s
		}
	case backend.OpMaximum:
		for i := range o {
			o[i] = backend.Max32(a[i], s)
		}
	case backend.OpKeep:
		for i := range o {
			o[i] = backend.Keep32(a[i], s)
		}
	default:
		f := elementwise("cpu.binVS", op)
		for i := range o {
			o[i] = f(a[i], s, 0, 0)
		}
	}
}

// binSV: o[i] = s op b[i].
func binSV(op backend.Op, o []float32, s float32, b []float32) {
	b = b[:len(o)]
	switch op {
	case backend.OpAdd:
		for i := range o {
			o[i] = s + b[i]
		}
	case backend.OpSub:
		for i := range o {
			o[i] = s - b[i]
		}
	case backend.OpMul:
		for i := range o {
			o[i] = s * b[i]
		}
	case backend.OpDiv:
		for i := range o {
			o[i] = s / b[i]
		}
	case backend.OpMaximum:
		for i := range o {
			o[i] = backend.Max32(s, b[i])
		}
	case backend.OpKeep:
		for i := range o {
			o[i] = backend.Keep32(s, b[i])
		}
	default:
		f := elementwise("cpu.binSV", op)
		for i := range o {
			o[i] = f(s, b[i], 0, 0)
		}
	}
}

// binRow computes one output row of inner elements whose inputs start at
// a and b with inner strides sa, sb (each 0 or 1, after merging).
func binRow(op backend.Op, o, a, b []float32, sa, sb int) {
	switch {
	case sa == 1 && sb == 1:
		binVV(op, o, a, b)
	case sa == 1:
		binVS(op, o, a, b[0])
	case sb == 1:
		binSV(op, o, a[0], b)
	default:
		v := elementwise("cpu.binRow", op)(a[0], b[0], 0, 0)
		for i := range o {
			o[i] = v
		}
	}
}

// copyRow is binRow for a single broadcast input (OpExpand).
func copyRow(o, a []float32, sa int) {
	if sa == 1 {
		copy(o, a[:len(o)])
		return
	}
	v := a[0]
	for i := range o {
		o[i] = v
	}
}

// unary applies a unary op to a range: o[i] = f(a[i]).
func unary(op backend.Op, A, B float32, o, a []float32) {
	a = a[:len(o)]
	switch op {
	case backend.OpNeg:
		for i := range o {
			o[i] = -a[i]
		}
	case backend.OpLog:
		for i := range o {
			o[i] = float32(math.Log(float64(a[i])))
		}
	case backend.OpSqrt:
		for i := range o {
			o[i] = float32(math.Sqrt(float64(a[i])))
		}
	case backend.OpSigmoid:
		for i := range o {
			o[i] = backend.Sigmoid32(a[i])
		}
	case backend.OpReLU:
		for i := range o {
			o[i] = backend.ReLU32(a[i])
		}
	case backend.OpTanh:
		for i := range o {
			o[i] = tanh(a[i])
		}
	case backend.OpAffine:
		for i := range o {
			o[i] = a[i]*A + B
		}
	case backend.OpPowConst:
		powConst(o, a, A)
	case backend.OpClamp:
		for i := range o {
			o[i] = min(max(a[i], A), B)
		}
	case backend.OpAbs:
		for i := range o {
			o[i] = float32(math.Abs(float64(a[i])))
		}
	case backend.OpRoundF16:
		for i := range o {
			o[i] = backend.RoundF16(a[i])
		}
	case backend.OpRoundBF16:
		for i := range o {
			o[i] = backend.RoundBF16(a[i])
		}
	case backend.OpInside:
		for i := range o {
			v := a[i]
			if A < v && v < B {
				o[i] = 1
			} else {
				o[i] = 0
			}
		}
	default:
		f := elementwise("cpu.unary", op)
		for i := range o {
			o[i] = f(a[i], 0, A, B)
		}
	}
}

// powConst is x^p with fast paths for the exponents gradients use most. The
// general paths are C's pow but for the rule of ir.go that a negative base
// with a non-whole exponent is NaN, -Inf included (math.Pow(-Inf, 0.5) is
// +Inf).
func powConst(o, a []float32, p float32) {
	switch p {
	case 1:
		copy(o, a)
	case 2:
		for i := range o {
			o[i] = a[i] * a[i]
		}
	case 3:
		for i := range o {
			o[i] = a[i] * a[i] * a[i]
		}
	case 0.5:
		for i := range o {
			o[i] = float32(math.Sqrt(float64(a[i]) + 0)) // +0: -0^0.5 is +0 in C, Sqrt(-0) is -0
		}
	case -1:
		for i := range o {
			o[i] = 1 / a[i]
		}
	default:
		pp := float64(p)
		whole := pp == math.Trunc(pp)
		for i := range o {
			x := float64(a[i])
			if x < 0 && !whole {
				o[i] = float32(math.NaN())
				continue
			}
			o[i] = float32(math.Pow(x, pp))
		}
	}
}

// tanh is tanh to within 6e-8 absolute (the f32 result itself is rounded
// by up to 3e-8), about 4x faster than math.Tanh: a rational function of
// degree 13/6 (Eigen's float tanh) evaluated in float64, math.Tanh where
// it saturates. GELU and attention-heavy models spend much of a CPU step
// here.
func tanh(xf float32) float32 {
	const (
		a1  = 4.89352455891786e-03
		a3  = 6.37261928875436e-04
		a5  = 1.48572235717979e-05
		a7  = 5.12229709037114e-08
		a9  = -8.60467152213735e-11
		a11 = 2.00018790482477e-13
		a13 = -2.76076847742355e-16
		b0  = 4.89352518554385e-03
		b2  = 2.26843463243900e-03
		b4  = 1.18534705686654e-04
		b6  = 1.19825839466702e-06
		sat = 7.90531110763549805 // the rational's range
	)
	x := float64(xf)
	switch {
	case x != x || x > -0.0004 && x < 0.0004: // NaN, ±0 and tiny x: tanh(x) = x in f32
		return xf
	case x > sat || x < -sat:
		return float32(math.Tanh(x))
	}
	x2 := x * x
	p := x * (a1 + x2*(a3+x2*(a5+x2*(a7+x2*(a9+x2*(a11+x2*a13))))))
	q := b0 + x2*(b2+x2*(b4+x2*b6))
	return float32(p / q)
}
