package nn

import (
	"fmt"
	"math"
)

// ReduceLROnPlateau lowers the learning rate when a metric fed to it once
// an epoch (a validation loss, an accuracy) stops improving: PyTorch's
// scheduler of that name, step for step. A metric that does not beat the
// best so far by Threshold for more than Patience epochs in a row
// multiplies the rate by Factor (never below MinLR), then Cooldown epochs
// pass before bad epochs count again. A NaN metric is a bad epoch.
//
// Its rate is state, not a function of the step count: Schedule gives a
// Schedule for WithSchedule that reads it. WithReduceLROnPlateau wraps an
// optimizer so that SaveState and LoadState keep that state (best, bad
// epochs, cooldown, rate) in the optimizer's state file.
type ReduceLROnPlateau struct {
	// Max: a higher metric is better (PyTorch's mode="max"); else lower.
	Max bool
	// Factor multiplies the rate on a plateau, in (0, 1) (default 0.1).
	Factor float64
	// Patience is the number of bad epochs tolerated (default 10).
	Patience int
	// Threshold is the least improvement that counts (default 1e-4):
	// relative (best*(1-Threshold) for min) unless AbsThreshold.
	Threshold    float64
	AbsThreshold bool
	// Cooldown is the number of epochs after a reduction during which bad
	// epochs do not count.
	Cooldown int
	// MinLR is the lowest rate; Eps the least change of the rate that is
	// made (default 1e-8).
	MinLR, Eps float64

	base, lr, best       float64
	bad, cooldownLeft, n int
}

// NewReduceLROnPlateau makes the scheduler for an optimizer whose learning
// rate is lr, with PyTorch's defaults (mode min, factor 0.1, patience 10,
// relative threshold 1e-4, no cooldown, min_lr 0, eps 1e-8).
func NewReduceLROnPlateau(lr float64) *ReduceLROnPlateau {
	if !(lr > 0) || math.IsInf(lr, 0) {
		panic(fmt.Sprintf("nn.NewReduceLROnPlateau: learning rate %g, want a finite value > 0", lr))
	}
	return &ReduceLROnPlateau{Factor: 0.1, Patience: 10, Threshold: 1e-4, Eps: 1e-8, base: lr, lr: lr, best: math.Inf(1)}
}

// Step takes the metric of the epoch that ended and reports whether it
// lowered the rate. It fails, changing nothing, on settings PyTorch
// refuses (a factor outside (0, 1), a negative patience, ...).
func (p *ReduceLROnPlateau) Step(metric float64) (reduced bool, err error) {
	if !(p.Factor > 0 && p.Factor < 1) || p.Patience < 0 || p.Cooldown < 0 || !(p.Threshold >= 0) ||
		!(p.MinLR >= 0) || !(p.Eps >= 0) || math.IsInf(p.Threshold+p.MinLR+p.Eps, 0) {
		return false, fmt.Errorf("nn.ReduceLROnPlateau.Step: factor %g, patience %d, cooldown %d, threshold %g, min lr %g, eps %g: want a factor in (0, 1) and the rest finite and >= 0",
			p.Factor, p.Patience, p.Cooldown, p.Threshold, p.MinLR, p.Eps)
	}
	if p.n == 0 && p.Max {
		p.best = math.Inf(-1) // set at the first epoch: Max may be set after New
	}
	p.n++
	if p.better(metric) {
		p.best, p.bad = metric, 0
	} else {
		p.bad++
	}
	if p.cooldownLeft > 0 {
		p.cooldownLeft--
		p.bad = 0
	}
	if p.bad > p.Patience {
		p.cooldownLeft, p.bad = p.Cooldown, 0
		if next := math.Max(p.lr*p.Factor, p.MinLR); p.lr-next > p.Eps {
			p.lr = next
			return true, nil
		}
	}
	return false, nil
}

// better is PyTorch's is_better: false for NaN.
func (p *ReduceLROnPlateau) better(m float64) bool {
	switch {
	case !p.Max && !p.AbsThreshold:
		return m < p.best*(1-p.Threshold)
	case !p.Max:
		return m < p.best-p.Threshold
	case !p.AbsThreshold:
		return m > p.best*(1+p.Threshold)
	default:
		return m > p.best+p.Threshold
	}
}

// LR is the current learning rate.
func (p *ReduceLROnPlateau) LR() float64 { return p.lr }

// SetLR sets the current learning rate (resuming a run).
func (p *ReduceLROnPlateau) SetLR(lr float64) {
	if !(lr >= 0) || math.IsInf(lr, 0) {
		panic(fmt.Sprintf("nn.ReduceLROnPlateau.SetLR: %g, want a finite value >= 0", lr))
	}
	p.lr = lr
}

// Schedule is the current rate as a factor of the one the scheduler was
// made with, for WithSchedule: every update reads it, whatever the step.
func (p *ReduceLROnPlateau) Schedule() Schedule {
	return func(int) float64 { return p.lr / p.base }
}

// WithReduceLROnPlateau wraps o with p's rate (p made with o's learning
// rate) and keeps p in Scheduled.State, so that SaveState writes p's state
// (best, bad epochs, cooldown, rate) into o's state file and LoadState
// restores it: a resumed run continues as the uninterrupted one would.
func WithReduceLROnPlateau(o Optimizer, p *ReduceLROnPlateau) *Scheduled {
	if p == nil {
		panic("nn.WithReduceLROnPlateau: nil scheduler")
	}
	s := WithSchedule(o, p.Schedule())
	s.State = p
	return s
}

// ScheduleKind is "reduce_lr_on_plateau".
func (p *ReduceLROnPlateau) ScheduleKind() string { return "reduce_lr_on_plateau" }

// ScheduleState returns the state that Step changes and the rate it was
// made with: best (±Inf before the first epoch), num_bad_epochs,
// cooldown_counter, epochs, lr and base_lr. Its settings (Factor,
// Patience, ...) are the program's, not state.
func (p *ReduceLROnPlateau) ScheduleState() map[string]float64 {
	return map[string]float64{"best": p.best, "num_bad_epochs": float64(p.bad), "cooldown_counter": float64(p.cooldownLeft),
		"epochs": float64(p.n), "lr": p.lr, "base_lr": p.base}
}

// CheckScheduleState reports whether st is a state ScheduleState could
// have returned, naming the first value that is not.
func (p *ReduceLROnPlateau) CheckScheduleState(st map[string]float64) error {
	if len(st) != 6 {
		return fmt.Errorf("reduce_lr_on_plateau state has %d values, want 6 (best, num_bad_epochs, cooldown_counter, epochs, lr, base_lr)", len(st))
	}
	for _, k := range []string{"num_bad_epochs", "cooldown_counter", "epochs"} {
		if v, ok := st[k]; !ok || !(v >= 0 && v <= 1<<31 && v == math.Trunc(v)) {
			return fmt.Errorf("reduce_lr_on_plateau state %q is %g (present %t), want a whole number >= 0", k, v, ok)
		}
	}
	if v, ok := st["best"]; !ok || math.IsNaN(v) {
		return fmt.Errorf("reduce_lr_on_plateau state \"best\" is %g (present %t), want a number", v, ok)
	}
	for _, k := range []string{"lr", "base_lr"} {
		if v, ok := st[k]; !ok || !(v >= 0) || math.IsInf(v, 0) || k == "base_lr" && v == 0 {
			return fmt.Errorf("reduce_lr_on_plateau state %q is %g (present %t), want a finite value >= 0 (base_lr > 0)", k, v, ok)
		}
	}
	return nil
}

// SetScheduleState restores a state of ScheduleState, changing nothing if
// CheckScheduleState refuses it.
func (p *ReduceLROnPlateau) SetScheduleState(st map[string]float64) error {
	if err := p.CheckScheduleState(st); err != nil {
		return fmt.Errorf("nn.ReduceLROnPlateau.SetScheduleState: %w", err)
	}
	p.best, p.bad, p.cooldownLeft = st["best"], int(st["num_bad_epochs"]), int(st["cooldown_counter"])
	p.n, p.lr, p.base = int(st["epochs"]), st["lr"], st["base_lr"]
	return nil
}
