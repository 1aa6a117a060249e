package backend

import "math"

// The scalar functions that opInfo's elementwise rows name (OpInfo.F64,
// OpInfo.F32): the special-value rules of the table of Op written once, in
// float64 for the reference and in f32 for the cpu backend's generic path.

// max64 is ir.go's maximum: NaN if either is, else the larger, a on ties.
func max64(x, y float64) float64 {
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		return math.NaN()
	case y > x:
		return y
	}
	return x
}

// Max32 is ir.go's maximum in f32 (NaN if either is, a on ties), written
// with comparisons: Go's max is a call with NaN checks under wasm.
func Max32(a, b float32) float32 {
	switch {
	case a != a || b != b:
		return float32(math.NaN())
	case b > a:
		return b
	}
	return a
}

// Keep32 is ir.go's keep in f32: b where a is nonzero or NaN, else -0.
func Keep32(a, b float32) float32 {
	if a != 0 {
		return b
	}
	return negZero32
}

var negZero32 = float32(math.Copysign(0, -1))

func keep64(x, y float64) float64 {
	if x != 0 || math.IsNaN(x) {
		return y
	}
	return math.Copysign(0, -1)
}

// ReLU32 is max(x, 0) by comparison: NaN stays NaN and -0 becomes +0, as
// with the builtin, which is a call with NaN checks under wasm (7 ns an
// element in V8 against 1).
func ReLU32(x float32) float32 {
	if x <= 0 {
		return 0
	}
	return x
}

// Sigmoid32 is 1/(1+e^-x) in float64, written so that neither branch
// overflows.
func Sigmoid32(x float32) float32 {
	if x >= 0 {
		return float32(1 / (1 + math.Exp(-float64(x))))
	}
	e := math.Exp(float64(x))
	return float32(e / (1 + e))
}

// pow64 is C's pow (which math.Pow follows) but for the one deviation the
// table of Op states: a negative base with a non-whole exponent is NaN,
// -Inf included.
func pow64(x, a float64) float64 {
	if x < 0 && a != math.Trunc(a) {
		return math.NaN()
	}
	return math.Pow(x, a)
}

// Pow32 is x^p as OpPowConst defines it, exact (one rounding) for the
// exponents gradients use most.
func Pow32(x, p float32) float32 {
	switch p {
	case 1:
		return x
	case 2:
		return x * x
	case 3:
		return x * x * x
	case 0.5:
		return float32(math.Sqrt(float64(x) + 0)) // +0: -0^0.5 is +0 in C, Sqrt(-0) is -0
	case -1:
		return 1 / x
	}
	return float32(pow64(float64(x), float64(p)))
}

// inside64 is OpInside's mask: comparisons with NaN are false.
func inside64(x, a, b float64) float64 {
	if a < x && x < b {
		return 1
	}
	return 0
}

// RoundSig rounds x to p significant bits, ties to even, with exponents
// down to minExp (the format's smallest normal exponent; below it the
// quantum stays 2^(minExp-p+1)) and overflow from maxFinite + half a step,
// in float64: the definition of OpRoundF16 and OpRoundBF16 (and of the
// packs' rounding in package reference), independent of RoundF16's bit
// arithmetic. NaN, ±Inf and ±0 stay.
func RoundSig(x float64, p, minExp int, maxFinite float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	_, e := math.Frexp(math.Abs(x)) // |x| = f * 2^e, f in [0.5, 1)
	e--                             // |x| = m * 2^e, m in [1, 2)
	if e < minExp {
		e = minExp
	}
	q := math.Ldexp(1, e-p+1)
	r := math.RoundToEven(x/q) * q
	if math.Abs(r) > maxFinite {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}

// f64 and f32 lift a one-argument math function to a row's signature.
func f64(f func(float64) float64) func(x, y, a, b float64) float64 {
	return func(x, _, _, _ float64) float64 { return f(x) }
}

func f32(f func(float64) float64) func(x, y, a, b float32) float32 {
	return func(x, _, _, _ float32) float32 { return float32(f(float64(x))) }
}
