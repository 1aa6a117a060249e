package nn

import (
	"fmt"
	"math"
)

// OneCycleOptions are OneCycle's settings; a zero field takes PyTorch's
// default.
type OneCycleOptions struct {
	// PctStart is the fraction of the updates spent raising the rate
	// (default 0.3).
	PctStart float64
	// DivFactor: the rate starts at maxLR/DivFactor (default 25).
	DivFactor float64
	// FinalDivFactor: the rate ends at maxLR/DivFactor/FinalDivFactor
	// (default 1e4).
	FinalDivFactor float64
	// Linear anneals along straight lines instead of half cosines
	// (PyTorch's anneal_strategy="linear").
	Linear bool
	// ThreePhase falls back to the start rate symmetrically before
	// annealing to the end rate (PyTorch's three_phase=True).
	ThreePhase bool
}

// OneCycle is the 1cycle policy (Smith & Topin 2017), PyTorch's
// OneCycleLR with cycle_momentum=False, as a factor of the optimizer's
// learning rate, which is max_lr: it rises from 1/DivFactor to 1 over the
// first PctStart of total updates, then falls to
// 1/(DivFactor*FinalDivFactor) at update total. PyTorch's formula is
// followed to the rounding (update t of PyTorch's sequence is
// max_lr*OneCycle(t)). After total updates, where PyTorch raises an
// error, the factor stays at update total's.
//
// The momentum cycling of PyTorch's default (cycle_momentum=True) is not
// provided: a Schedule scales the learning rate only.
func OneCycle(total int, o OneCycleOptions) Schedule {
	pct, div, final := o.PctStart, o.DivFactor, o.FinalDivFactor
	if pct == 0 {
		pct = 0.3
	}
	if div == 0 {
		div = 25
	}
	if final == 0 {
		final = 1e4
	}
	if total < 2 || !(pct > 0 && pct < 1) || !(div > 0) || math.IsInf(div, 0) || !(final > 0) || math.IsInf(final, 0) {
		panic(fmt.Sprintf("nn.OneCycle: total %d, pct start %g, div factor %g, final div factor %g: want total >= 2, pct start in (0, 1) and finite factors > 0",
			total, pct, div, final))
	}
	// PyTorch's phases in its arithmetic: in units of max_lr, the rates are
	// 1/div and 1/div/final; each phase ends at an update number.
	start, top, end := 1/div, 1.0, 1/div/final
	type phase struct{ end, from, to float64 }
	phases := []phase{{pct*float64(total) - 1, start, top}, {float64(total) - 1, top, end}}
	if o.ThreePhase {
		phases = []phase{{pct*float64(total) - 1, start, top}, {2*pct*float64(total) - 2, top, start}, {float64(total) - 1, start, end}}
	}
	anneal := func(from, to, frac float64) float64 {
		return to + (from-to)/2*(math.Cos(math.Pi*frac)+1)
	}
	if o.Linear {
		anneal = func(from, to, frac float64) float64 { return (to-from)*frac + from }
	}
	return func(t int) float64 {
		step := float64(min(t, total))
		begin := 0.0
		for i, p := range phases {
			if step <= p.end || i == len(phases)-1 {
				return anneal(p.from, p.to, (step-begin)/(p.end-begin))
			}
			begin = p.end
		}
		panic("unreachable")
	}
}
