package cpu

import (
	"math"

	"github.com/ag-go/ag/backend"
)

// Elementwise ops. Each loop has the op switch outside it, so the loop body
// is straight-line float code the compiler can keep in registers.

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
			o[i] = maximum(a[i], b[i])
		}
	case backend.OpKeep:
		for i := range o {
			o[i] = keep(a[i], b[i])
		}
	default:
		backend.Unknown("cpu.binVV", op)
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
			o[i] = maximum(a[i], s)
		}
	case backend.OpKeep:
		for i := range o {
			o[i] = keep(a[i], s)
		}
	default:
		backend.Unknown("cpu.binVS", op)
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
			o[i] = maximum(s, b[i])
		}
	case backend.OpKeep:
		for i := range o {
			o[i] = keep(s, b[i])
		}
	default:
		backend.Unknown("cpu.binSV", op)
	}
}

// maximum is ir.go's: NaN if either is, a on ties.
func maximum(a, b float32) float32 {
	switch {
	case a != a || b != b:
		return float32(math.NaN())
	case b > a:
		return b
	}
	return a
}

// keep is ir.go's keep: b where a is nonzero or NaN, else -0.
func keep(a, b float32) float32 {
	if a != 0 {
		return b
	}
	return negZero
}

var negZero = float32(math.Copysign(0, -1))

func binSS(op backend.Op, a, b float32) float32 {
	switch op {
	case backend.OpAdd:
		return a + b
	case backend.OpSub:
		return a - b
	case backend.OpMul:
		return a * b
	case backend.OpDiv:
		return a / b
	case backend.OpMaximum:
		return maximum(a, b)
	case backend.OpKeep:
		return keep(a, b)
	}
	backend.Unknown("cpu.binSS", op)
	return 0
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
		v := binSS(op, a[0], b[0])
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
	case backend.OpExp:
		for i := range o {
			o[i] = float32(math.Exp(float64(a[i])))
		}
	case backend.OpLog:
		for i := range o {
			o[i] = float32(math.Log(float64(a[i])))
		}
	case backend.OpSqrt:
		for i := range o {
			o[i] = float32(math.Sqrt(float64(a[i])))
		}
	case backend.OpReLU:
		// max(v, 0) by comparison: NaN stays NaN and -0 becomes +0 as
		// with the builtin, which is a call with NaN checks under wasm
		// (7 ns an element in V8 against 1; 4x slower natively too)
		for i := range o {
			v := a[i]
			if v <= 0 {
				v = 0
			}
			o[i] = v
		}
	case backend.OpSigmoid:
		for i := range o {
			o[i] = sigmoid(a[i])
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
	case backend.OpSin:
		for i := range o {
			o[i] = float32(math.Sin(float64(a[i])))
		}
	case backend.OpCos:
		for i := range o {
			o[i] = float32(math.Cos(float64(a[i])))
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
		backend.Unknown("cpu.unary", op)
	}
}

// sigmoid is 1/(1+e^-x), written so that neither branch overflows.
func sigmoid(x float32) float32 {
	if x >= 0 {
		return float32(1 / (1 + math.Exp(-float64(x))))
	}
	e := math.Exp(float64(x))
	return float32(e / (1 + e))
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
