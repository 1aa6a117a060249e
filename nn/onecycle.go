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
	// NoCycleMomentum keeps the optimizer's own momentum (PyTorch's
	// cycle_momentum=False); by default WithOneCycle cycles it.
	NoCycleMomentum bool
	// BaseMomentum and MaxMomentum bound the cycled momentum (defaults
	// 0.85 and 0.95): it falls from MaxMomentum to BaseMomentum while the
	// rate rises, and back while it falls.
	BaseMomentum, MaxMomentum float64
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
// A Schedule scales the learning rate only: WithOneCycle also cycles the
// momentum, as PyTorch's default (cycle_momentum=True) does.
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
	// 1/div and 1/div/final.
	return oneCycle(total, pct, o, 1/div, 1, 1/div/final)
}

// oneCycle is PyTorch's OneCycleLR curve from start to top, then to end
// (three-phase: back to start first), over total updates; each phase ends
// at an update number.
func oneCycle(total int, pct float64, o OneCycleOptions, start, top, end float64) Schedule {
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

// OneCycleMomentum is the momentum of PyTorch's OneCycleLR with
// cycle_momentum=True for update t (counted as OneCycle counts): it falls
// from MaxMomentum to BaseMomentum while the rate rises and rises back
// while the rate falls (three-phase: back to MaxMomentum with the rate's
// fall to its start, then level). It is a value, not a factor: for
// Scheduled.Momentum, which WithOneCycle sets. The momenta must lie in
// [0, 1) with BaseMomentum <= MaxMomentum.
func OneCycleMomentum(total int, o OneCycleOptions) Schedule {
	base, top := o.BaseMomentum, o.MaxMomentum
	if base == 0 {
		base = 0.85
	}
	if top == 0 {
		top = 0.95
	}
	if !(base >= 0 && base <= top && top < 1) {
		panic(fmt.Sprintf("nn.OneCycleMomentum: base momentum %g, max momentum %g: want 0 <= base <= max < 1", base, top))
	}
	OneCycle(total, o) // checks the other options
	pct := o.PctStart
	if pct == 0 {
		pct = 0.3
	}
	return oneCycle(total, pct, o, top, base, top)
}

// WithOneCycle wraps o with PyTorch's OneCycleLR over total updates, o's
// learning rate being max_lr: the rate follows OneCycle and, unless
// NoCycleMomentum, the momentum (SGD's Momentum, Adam's Beta1; PyTorch
// overwrites both, even a momentum of 0) follows OneCycleMomentum. o's own
// fields are not changed: the momentum goes into each update's
// hyperparameters, a function of the step count, so a run resumed from a
// state file continues the cycle. Cycling the momentum of an optimizer
// that has none (not a MomentumHyperer) panics, as PyTorch raises.
func WithOneCycle(o Optimizer, total int, opt OneCycleOptions) *Scheduled {
	s := WithSchedule(o, OneCycle(total, opt))
	if !opt.NoCycleMomentum {
		if _, ok := o.(MomentumHyperer); !ok {
			panic(fmt.Sprintf("nn.WithOneCycle: optimizer %T has no momentum to cycle (it is not an nn.MomentumHyperer): set NoCycleMomentum", o))
		}
		s.Momentum = OneCycleMomentum(total, opt)
	}
	return s
}
