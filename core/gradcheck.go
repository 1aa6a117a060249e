package core

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ag-go/ag/backend/reference"
)

// GradcheckOptions tunes Gradcheck; the zero value is the defaults.
type GradcheckOptions struct {
	// Step is the finite-difference step h (default 1e-4): the numeric
	// derivative is (f(x+h) - f(x-h))/2h, in float64.
	Step float64
	// Tol is the allowed difference (default 2e-3, relative to 1 +
	// |numeric|): f32 gradients of a well-conditioned function are far
	// closer, a wrong gradient is usually off by its own size.
	Tol float64
	// MaxErrors caps the mismatches listed in the error (default 10).
	MaxErrors int
}

// errGradcheck marks the values Gradcheck's second build made: they never
// ran on the device.
var errGradcheck = errors.New("core: a value built for Gradcheck's finite differences (it never runs)")

// Gradcheck checks the gradient of an op or model of your own: it compares
// what Backward gives for the one-element output of f with respect to each
// of params (leaves made by Device.Param) against central finite
// differences computed in float64 by the reference interpreter of the
// conformance suite (reference.Eval) on the same graph, so f32 rounding
// does not enter the reference. It returns nil when every element agrees
// within the tolerance, else an error listing the first mismatches.
//
// f must build its output from params anew on each call (it is called
// twice) and must not depend on values read back from the device. The
// device of params must not be used by other goroutines during the check;
// pending work on it is run first, the params' gradients are dropped, and
// the values f builds on its second call are spent (reading them is an
// error). The analytic side runs on params' device: on "cpu" it checks your
// composition, on another device that backend's gradient too. Cost: two
// evaluations of the whole graph per parameter element, so use small
// shapes.
func Gradcheck(f func() *Tensor, params []*Tensor, opt *GradcheckOptions) error {
	if f == nil || len(params) == 0 {
		return fmt.Errorf("core.Gradcheck: nil function or no parameters")
	}
	needTensors("Gradcheck", params...)
	var o GradcheckOptions
	if opt != nil {
		o = *opt
	}
	if o.Step == 0 {
		o.Step = 1e-4
	}
	if o.Tol == 0 {
		o.Tol = 2e-3
	}
	if o.MaxErrors == 0 {
		o.MaxErrors = 10
	}
	if !(o.Step > 0) || !(o.Tol > 0) || math.IsInf(o.Step, 0) {
		return fmt.Errorf("core.Gradcheck: step %g, tolerance %g: want finite values > 0", o.Step, o.Tol)
	}
	d := params[0].dev
	for i, p := range params {
		if p.dev != d {
			return fmt.Errorf("core.Gradcheck: parameter %d is on %v, parameter 0 on %v", i, p.dev, d)
		}
		if !p.isLeaf() || !p.requiresGrad {
			return fmt.Errorf("core.Gradcheck: parameter %d (%v) is not a leaf that requires grad (Device.Param)", i, p)
		}
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("core.Gradcheck: running pending work first: %w", err)
	}
	for _, p := range params {
		p.ZeroGrad()
	}

	// analytic, f32 on the device
	loss := f()
	if loss == nil || loss.Len() != 1 {
		return fmt.Errorf("core.Gradcheck: f returned %v, want a one-element tensor", loss)
	}
	if err := loss.Backward(); err != nil {
		return fmt.Errorf("core.Gradcheck: %w", err)
	}
	analytic := make([][]float32, len(params))
	for i, p := range params {
		if g := p.Grad(); g != nil {
			v, err := g.Data()
			if err != nil {
				return fmt.Errorf("core.Gradcheck: gradient of parameter %d: %w", i, err)
			}
			analytic[i] = v
		} else {
			analytic[i] = make([]float32, p.Len()) // it does not reach the output
		}
	}
	// dropped after all are read: parameters may share one gradient tensor
	// (Add's inputs get the same one), which ZeroGrad releases
	for _, p := range params {
		p.ZeroGrad()
	}

	// numeric, float64 on the reference interpreter
	loss = f()
	if loss == nil || loss.Len() != 1 {
		return fmt.Errorf("core.Gradcheck: f returned %v on its second call, want a one-element tensor", loss)
	}
	d.lock()
	defer d.mu.Unlock()
	defer d.dropPending(errGradcheck)
	if loss.state() != statePending {
		return fmt.Errorf("core.Gradcheck: f returned an existing value, not one built from params")
	}
	lw, err := d.lower(false)
	if err == nil {
		err = d.allocOutputs(lw)
	}
	if lw != nil {
		defer lw.free(d)
	}
	if err != nil {
		return fmt.Errorf("core.Gradcheck: %w", err)
	}
	args := make([][]float64, len(lw.args))
	for i, b := range lw.args {
		v := make([]float32, b.Len())
		if err := d.be.Read(b, 0, v); err != nil {
			return fmt.Errorf("core.Gradcheck: reading input %d: %w", i, err)
		}
		args[i] = make([]float64, len(v))
		for k, x := range v {
			args[i][k] = float64(x)
		}
	}
	lossNode := lw.nodeOf.of(loss)
	work := make([][]float64, len(args))
	eval := func() (float64, error) {
		for i := range args {
			work[i] = append(work[i][:0], args[i]...)
		}
		vals, err := reference.Eval(&lw.g, work)
		if err != nil {
			return 0, err
		}
		return vals[lossNode][0], nil
	}
	var bad []string
	nbad := 0
	for i, p := range params {
		node, ok := lw.argOf(p.stor)
		if !ok {
			continue // not an input of the graph: both sides are zero
		}
		arg := lw.g.Nodes[node].Arg
		for k := range args[arg] {
			x := args[arg][k]
			args[arg][k] = x + o.Step
			up, err := eval()
			if err == nil {
				args[arg][k] = x - o.Step
				var down float64
				down, err = eval()
				args[arg][k] = x
				if err == nil {
					num := (up - down) / (2 * o.Step)
					got := float64(analytic[i][k])
					if !(math.Abs(got-num) <= o.Tol*(1+math.Abs(num))) {
						nbad++
						if len(bad) < o.MaxErrors {
							bad = append(bad, fmt.Sprintf("parameter %d %v element %d: analytic %.6g, finite difference %.6g", i, p.shape, k, got, num))
						}
					}
				}
			}
			if err != nil {
				return fmt.Errorf("core.Gradcheck: evaluating the reference: %w", err)
			}
		}
	}
	if nbad > 0 {
		return fmt.Errorf("core.Gradcheck: %d gradient element(s) differ from finite differences (step %g, tolerance %g):\n\t%s",
			nbad, o.Step, o.Tol, strings.Join(bad, "\n\t"))
	}
	return nil
}

// GradGradcheck checks second derivatives, as PyTorch's gradgradcheck: the
// gradient of h = sum_i <dy/dp_i, v_i>, where y is f's one-element output,
// dy/dp_i comes from Grad with CreateGraph and the v_i are fixed
// pseudo-random weights in [-1, 1], against central finite differences of
// h, which Gradcheck takes of the recorded gradient graph in float64. So
// it checks every op's gradient of the gradient under f (a Hessian-vector
// product), on params' device. The rules and costs of Gradcheck apply
// (f is called twice, small shapes).
func GradGradcheck(f func() *Tensor, params []*Tensor, opt *GradcheckOptions) error {
	if f == nil || len(params) == 0 {
		return fmt.Errorf("core.GradGradcheck: nil function or no parameters")
	}
	needTensors("GradGradcheck", params...)
	d := params[0].dev
	var gerr error
	h := func() *Tensor {
		y := f()
		gs, err := Grad(y, params, &GradOptions{CreateGraph: true})
		if err != nil {
			gerr = err
			return y // Gradcheck's own checks pass or fail on it; gerr is returned
		}
		// every param enters with weight 0, so that a gradient constant in
		// the params (y linear in them) checks as a zero second derivative
		// rather than failing as a loss that depends on no parameter
		var h *Tensor
		for _, p := range params {
			t := Scale(Sum(p), 0)
			if h == nil {
				h = t
			} else {
				h = Add(h, t)
			}
		}
		for i, g := range gs {
			v := make([]float32, g.Len())
			for k := range v {
				// fixed, distinct per element: a plain sum hides transposes
				v[k] = float32(math.Sin(float64(1+k)*1.7 + float64(i)))
			}
			h = Add(h, Sum(Mul(g, d.Tensor(v, g.shape...))))
		}
		return h
	}
	err := Gradcheck(h, params, opt)
	if gerr != nil {
		return fmt.Errorf("core.GradGradcheck: %w", gerr)
	}
	if err != nil {
		return fmt.Errorf("core.GradGradcheck: %w", err)
	}
	return nil
}
