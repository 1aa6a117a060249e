package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"

	"github.com/ag-go/ag/core"
)

// Initializer makes the initial values of a parameter of shape, drawing
// from rng: the same rng state gives the same values, on every backend,
// because they are made on the host (a device RNG is a separate matter).
// A function of your own is an Initializer too.
type Initializer func(shape []int, rng *rand.Rand) []float32

// NewRNG returns the host generator the initializers draw from, seeded
// deterministically: NewRNG(seed) always gives the same sequence.
func NewRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// NewParam makes a parameter of shape on dev with values from init; rng may
// be nil for initializers that draw nothing (Constant, Values).
func NewParam(dev *core.Device, init Initializer, rng *rand.Rand, shape ...int) *core.Tensor {
	if dev == nil || init == nil {
		panic("nn.NewParam: nil device or initializer")
	}
	checkShape("NewParam", dev, "", "parameter", shape...)
	if rng == nil {
		defer func() {
			// only a nil dereference is the rng's: other panics are the
			// initializer's own, and say so
			r := recover()
			if e, ok := r.(runtime.Error); ok && strings.Contains(e.Error(), "nil pointer") {
				panic(fmt.Sprintf("nn.NewParam: nil rng for an initializer that draws, shape %v (%v)", shape, e))
			} else if r != nil {
				panic(r)
			}
		}()
	}
	v := init(shape, rng)
	n := 1
	for _, s := range shape {
		n *= s
	}
	if len(v) != n {
		panic(fmt.Sprintf("nn.NewParam: the initializer gave %d values for shape %v (%d elements)", len(v), shape, n))
	}
	return dev.Param(v, shape...)
}

// Fans returns the fan-in and fan-out of a parameter of shape in ag's
// layout, where a Linear's W is [in, out]: for 2-D shapes shape[0] and
// shape[1]; for higher ranks both are multiplied by the product of
// shape[2:] (the receptive field); a 1-D shape has fan-in = fan-out = its
// size.
func Fans(shape []int) (fanIn, fanOut int) {
	switch len(shape) {
	case 0:
		return 1, 1
	case 1:
		return shape[0], shape[0]
	}
	rf := 1
	for _, s := range shape[2:] {
		rf *= s
	}
	return shape[0] * rf, shape[1] * rf
}

func checkGain(fn string, g float64) {
	if !(g > 0) || math.IsInf(g, 0) {
		panic(fmt.Sprintf("nn.%s: gain %g, want a finite value > 0", fn, g))
	}
}

// uniform is U(-a, a), drawn as NewLinear always has.
func uniform(shape []int, rng *rand.Rand, a float64) []float32 {
	n := count(shape)
	w := make([]float32, n)
	for i := range w {
		w[i] = float32((2*rng.Float64() - 1) * a)
	}
	return w
}

func normal(shape []int, rng *rand.Rand, mean, std float64) []float32 {
	n := count(shape)
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(mean + std*rng.NormFloat64())
	}
	return w
}

func count(shape []int) int {
	n := 1
	for _, s := range shape {
		if s < 1 {
			panic(fmt.Sprintf("nn: initializer for shape %v: dimensions must be >= 1", shape))
		}
		n *= s
	}
	return n
}

// defaultInit is PyTorch's default weight initialization of nn.Linear and
// nn.Conv*: kaiming_uniform_ with a = sqrt(5), whose gain sqrt(2/(1+5))
// makes it U(-b, b) with b = 1/sqrt(fanIn). NewLinear, MLP and the
// convolutions draw their weights from it and their biases from
// defaultBias, so a model built from them starts where PyTorch's would.
func defaultInit() Initializer { return KaimingUniform(math.Sqrt(1.0 / 3)) }

// defaultBias draws PyTorch's default bias of a layer of fan-in fanIn:
// U(-b, b) with b = 1/sqrt(fanIn), the weights' bound.
func defaultBias(n, fanIn int, rng *rand.Rand) []float32 {
	return uniform([]int{n}, rng, 1/math.Sqrt(float64(fanIn)))
}

// GlorotUniform (Xavier uniform) draws U(-a, a) with a =
// gain*sqrt(6/(fanIn+fanOut)), as PyTorch's xavier_uniform_.
// NewLinearInit(dev, in, out, bias, GlorotUniform(1), rng) is the Linear
// ag made before it followed PyTorch's default (zero bias).
func GlorotUniform(gain float64) Initializer {
	checkGain("GlorotUniform", gain)
	return func(shape []int, rng *rand.Rand) []float32 {
		checkDraw("GlorotUniform", shape, rng, true)
		fi, fo := Fans(shape)
		return uniform(shape, rng, gain*math.Sqrt(6/float64(fi+fo)))
	}
}

// GlorotNormal (Xavier normal) draws N(0, std^2) with std =
// gain*sqrt(2/(fanIn+fanOut)), as PyTorch's xavier_normal_.
func GlorotNormal(gain float64) Initializer {
	checkGain("GlorotNormal", gain)
	return func(shape []int, rng *rand.Rand) []float32 {
		checkDraw("GlorotNormal", shape, rng, true)
		fi, fo := Fans(shape)
		return normal(shape, rng, 0, gain*math.Sqrt(2/float64(fi+fo)))
	}
}

// Gain values for Kaiming initialization, as PyTorch's calculate_gain:
// ReLUGain is sqrt(2); LeakyReLUGain(slope) is sqrt(2/(1+slope^2)); linear
// and sigmoid layers use 1, tanh 5/3.
const ReLUGain = math.Sqrt2

// LeakyReLUGain is the Kaiming gain for a leaky ReLU of that slope.
func LeakyReLUGain(slope float64) float64 { return math.Sqrt(2 / (1 + slope*slope)) }

// KaimingUniform (He uniform) draws U(-a, a) with a = gain*sqrt(3/fanIn),
// as PyTorch's kaiming_uniform_ in its fan_in mode (pass ReLUGain for
// ReLU layers).
func KaimingUniform(gain float64) Initializer {
	checkGain("KaimingUniform", gain)
	return func(shape []int, rng *rand.Rand) []float32 {
		checkDraw("KaimingUniform", shape, rng, true)
		fi, _ := Fans(shape)
		return uniform(shape, rng, gain*math.Sqrt(3/float64(fi)))
	}
}

// KaimingNormal (He normal) draws N(0, std^2) with std = gain/sqrt(fanIn),
// as PyTorch's kaiming_normal_ in its fan_in mode.
func KaimingNormal(gain float64) Initializer {
	checkGain("KaimingNormal", gain)
	return func(shape []int, rng *rand.Rand) []float32 {
		checkDraw("KaimingNormal", shape, rng, true)
		fi, _ := Fans(shape)
		return normal(shape, rng, 0, gain/math.Sqrt(float64(fi)))
	}
}

// Normal draws N(mean, std^2).
func Normal(mean, std float64) Initializer {
	if !(std >= 0) || math.IsInf(std, 0) || math.IsNaN(mean) || math.IsInf(mean, 0) {
		panic(fmt.Sprintf("nn.Normal: mean %g, std %g: want finite values, std >= 0", mean, std))
	}
	return func(shape []int, rng *rand.Rand) []float32 {
		checkDraw("Normal", shape, rng, true)
		return normal(shape, rng, mean, std)
	}
}

// Uniform draws U(lo, hi).
func Uniform(lo, hi float64) Initializer {
	if !(lo <= hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		panic(fmt.Sprintf("nn.Uniform: lo %g, hi %g: want finite lo <= hi", lo, hi))
	}
	return func(shape []int, rng *rand.Rand) []float32 {
		checkDraw("Uniform", shape, rng, true)
		n := count(shape)
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return w
	}
}

// Constant fills with v (zeros for biases, ones for gains).
func Constant(v float32) Initializer {
	return func(shape []int, _ *rand.Rand) []float32 {
		checkDraw("Constant", shape, nil, false)
		n := count(shape)
		w := make([]float32, n)
		for i := range w {
			w[i] = v
		}
		return w
	}
}

// Values gives the values data (user-given, row-major), copied; a shape
// of another size panics in NewParam.
func Values(data []float32) Initializer {
	return func([]int, *rand.Rand) []float32 { return append([]float32(nil), data...) }
}

// Orthogonal draws a (semi-)orthogonal matrix times gain, as PyTorch's
// orthogonal_: the shape is taken as shape[0] rows by the product of the
// rest, a Gaussian matrix of that size is orthonormalized (modified
// Gram-Schmidt in float64 along its longer side, so the shorter side's
// vectors come out orthonormal: W Wᵀ = gain² I for a wide W, Wᵀ W = gain² I
// for a tall one), and each vector keeps the sign QR with a positive
// diagonal gives it. Shapes of fewer than 2 dimensions panic when drawn.
func Orthogonal(gain float64) Initializer {
	checkGain("Orthogonal", gain)
	return func(shape []int, rng *rand.Rand) []float32 {
		if len(shape) < 2 {
			panic(fmt.Sprintf("nn.Orthogonal: shape %v has fewer than 2 dimensions", shape))
		}
		checkDraw("Orthogonal", shape, rng, true)
		rows, cols := shape[0], count(shape)/shape[0]
		// vectors of the shorter side, each of the longer side's length,
		// in one allocation: one that cannot be had fails at once, where
		// a vector at a time took memory until the process died
		k, m := min(rows, cols), max(rows, cols)
		work := make([]float64, k*m)
		v := make([][]float64, k)
		for i := range v {
			v[i] = work[i*m : (i+1)*m : (i+1)*m]
			for j := range v[i] {
				v[i][j] = rng.NormFloat64()
			}
		}
		for i := range v {
			for p := range i {
				var d float64
				for j := range m {
					d += v[i][j] * v[p][j]
				}
				for j := range m {
					v[i][j] -= d * v[p][j]
				}
			}
			var norm float64
			for _, x := range v[i] {
				norm += x * x
			}
			norm = math.Sqrt(norm)
			for j := range m {
				v[i][j] /= norm
			}
		}
		w := make([]float32, rows*cols)
		for r := range rows {
			for c := range cols {
				var x float64
				if rows <= cols {
					x = v[r][c] // rows are the vectors (a wide matrix)
				} else {
					x = v[c][r] // columns are (a tall one)
				}
				w[r*cols+c] = float32(gain * x)
			}
		}
		return w
	}
}
