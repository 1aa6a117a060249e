// Package edge is the conformance suite's edge-point family: core's
// piecewise ops at their kinks and bounds (relu at 0, clamp at its bounds,
// ties of maximum and of max reductions, softplus at its threshold, ...),
// forward and gradient, run through core on the backend under test. Each
// point is compared twice:
//
//   - with core on the float64 reference (backendtest.ReferenceDriver: the
//     same graphs, forward and backward, run by reference.Eval), so a
//     backend's kernels agree with the reference at the points where a
//     mask or a comparison decides; and
//   - the reference's result with PyTorch's value at that point, written in
//     the table with the formula of PyTorch's derivative it comes from
//     (tools/autograd/derivatives.yaml and the op's backward kernel), so the
//     convention itself is PyTorch's: an exact zero (padding, zero init) of
//     an ELU or a clamp learns as it does there.
//
// It is a package of its own because it builds graphs with core, and
// core's own tests import backendtest. A backend's conformance test runs it
// after backendtest.Run:
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, "cpu"); edge.Run(t, "cpu") }
package edge

import (
	"fmt"
	"math"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest"
	"github.com/ag-go/ag/core"
)

// refName is the float64 reference driver core runs the same cases on.
const refName = "backendtest-edge-ref"

func init() { backend.Register(refName, 0, backendtest.ReferenceDriver(refName)) }

// Run runs the edge family ("edge/<case>" subtests) on the backend
// registered as name through core. It expects backendtest.Run to have
// skipped already where the backend is not available here.
func Run(t *testing.T, name string) {
	t.Helper()
	t.Run("edge", func(t *testing.T) {
		dev, err := core.Open(name)
		if err != nil {
			t.Fatalf("core.Open(%q): %v", name, err)
		}
		defer dev.Close()
		ref, err := core.Open(refName)
		if err != nil {
			t.Fatalf("core.Open(%q): %v", refName, err)
		}
		defer ref.Close()
		for _, c := range cases() {
			t.Run(c.name, func(t *testing.T) {
				got, err := eval(dev, c)
				if err != nil {
					t.Fatalf("on %s: %v", name, err)
				}
				want, err := eval(ref, c)
				if err != nil {
					t.Fatalf("on the reference: %v", err)
				}
				torch := append([][]float64{c.torchY}, c.torchGrad...)
				for k := range got {
					what := "forward"
					if k > 0 {
						what = fmt.Sprintf("gradient of input %d", k-1)
					}
					if msg := compare(got[k], widen(want[k]), c.tol); msg != "" {
						t.Errorf("%s, %s against the reference: %s", c.points(), what, msg)
					}
					if msg := compare(want[k], torch[k], c.torchTol); msg != "" {
						t.Errorf("%s, %s of the reference against PyTorch's: %s", c.points(), what, msg)
					}
				}
			})
		}
	})
}

// eval builds c on dev from its inputs as params and returns the forward
// values followed by each input's gradient of sum(f(inputs)) (upstream
// gradient 1).
func eval(dev *core.Device, c edgeCase) ([][]float32, error) {
	ps := make([]*core.Tensor, len(c.in))
	for i, in := range c.in {
		shape := []int{len(in)}
		if i < len(c.shapes) {
			shape = c.shapes[i]
		}
		ps[i] = dev.Param(in, shape...)
	}
	y := c.f(ps).Keep()
	loss := core.Sum(y)
	for _, p := range ps {
		// An input no gradient reaches (sign, a comparison) gets a zero
		// one, as PyTorch's zeros_like.
		loss = core.Add(loss, core.Sum(core.Scale(p, 0)))
	}
	if err := loss.Backward(); err != nil {
		return nil, err
	}
	out := make([][]float32, 0, 1+len(ps))
	v, err := y.Data()
	if err != nil {
		return nil, err
	}
	out = append(out, v)
	for i, p := range ps {
		g, err := p.Grad().Data()
		if err != nil {
			return nil, fmt.Errorf("gradient of input %d: %w", i, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// tol bounds |got - want| by abs + rel*|want|; NaN matches only NaN and an
// infinity only itself.
type tol struct{ abs, rel float64 }

// Tolerances. The piecewise-linear ops are exact but for the rounding of a
// fused multiply-add (LeakyReLU's slope*x + (1-slope)*relu(x)): two f32
// ulps. exp, log and tanh on a device are within 2^-21 absolute near 1
// (WGSL's rules; 1.3e-7 measured on NVIDIA), a few of them chained here.
var (
	exact   = tol{0, 2.4e-7}
	transc  = tol{2e-6, 2e-6}
	f32Only = tol{1e-12, 1.2e-7} // the reference against PyTorch: f32 rounding of the table's value
	// The reference computes with constants rounded to f32 (GELU's
	// sqrt(2/pi) and 0.044715): a few f32 ulps.
	f32Const = tol{2e-7, 2e-7}
	// A&S 7.1.26: erf within 1.5e-7, its derivative within 1e-5 of
	// 2/sqrt(pi)*e^(-x^2) away from 0 (core.Erf).
	asApprox = tol{1.2e-5, 0}
	// Softplus is 0 below -16 where the true value is e^x (core.Softplus).
	softplusTail = tol{2e-7, 1.2e-7}
)

func compare(got []float32, want []float64, tl tol) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := float64(got[i])
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			if math.IsNaN(w) && math.IsNaN(g) {
				continue
			}
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			if g == w {
				continue
			}
		case math.Abs(g-w) <= tl.abs+tl.rel*math.Abs(w):
			continue
		}
		return fmt.Sprintf("element %d: got %.9g, want %.9g (tolerance %+v)\n got  %v\n want %v", i, g, w, tl, got, want)
	}
	return ""
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
