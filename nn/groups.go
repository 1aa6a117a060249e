package nn

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ag-go/ag/core"
)

// Groups is one optimizer made of parameter groups, each an optimizer of
// its own with its own learning rate, weight decay and the rest: PyTorch's
// param_groups, e.g. no weight decay on biases and norms:
//
//	opt := nn.NewGroups(nn.NewAdamW(weights, 1e-3, 0.1), nn.NewAdamW(biases, 1e-3, 0))
//
// Its Hyper is the groups' values one after the other (each group's at a
// multiple of 64 floats), so it travels as one
// program input (a changed rate never recompiles, CaptureStep works), and a
// schedule (WithSchedule) scales every group's rate. The groups share
// Groups' step count. State files work when every group is a Checkpointer
// with the same state slots (e.g. all Adam); hyperparameters are saved as
// "0.lr", "1.lr", ...
type Groups struct {
	groups []Optimizer
	t      int
}

// NewGroups joins optimizers over disjoint parameters into one.
func NewGroups(groups ...Optimizer) *Groups {
	if len(groups) == 0 {
		panic("nn.NewGroups: no groups")
	}
	seen := map[*core.Tensor]int{}
	for i, g := range groups {
		if g == nil {
			panic(fmt.Sprintf("nn.NewGroups: group %d is nil", i))
		}
		if len(g.Params()) == 0 {
			panic(fmt.Sprintf("nn.NewGroups: group %d has no parameters", i))
		}
		for _, p := range g.Params() {
			if j, ok := seen[p]; ok {
				panic(fmt.Sprintf("nn.NewGroups: parameter %v is in groups %d and %d", p, j, i))
			}
			seen[p] = i
		}
	}
	return &Groups{groups: slices.Clone(groups)}
}

// Group returns group i, to change its hyperparameters.
func (o *Groups) Group(i int) Optimizer { return o.groups[i] }

// Params returns every group's parameters, group by group.
func (o *Groups) Params() []*core.Tensor {
	var ps []*core.Tensor
	for _, g := range o.groups {
		ps = append(ps, g.Params()...)
	}
	return ps
}

// ZeroGrad drops every group's gradients.
func (o *Groups) ZeroGrad() {
	for _, g := range o.groups {
		g.ZeroGrad()
	}
}

// groupAlign is where each group's values start in Hyper: a multiple of 64
// floats, 256 bytes, the largest storage-buffer offset alignment Vulkan
// allows, so that a group's slice of hp is a view any device can bind
// (ggml-vulkan's fused AdamW op asserts an aligned one).
const groupAlign = 64

// layout returns where each group's values start and how many there are.
func (o *Groups) layout() (offs, lens []int, total int) {
	for _, g := range o.groups {
		n := len(g.Hyper(1))
		offs, lens = append(offs, total), append(lens, n)
		total += (n + groupAlign - 1) / groupAlign * groupAlign
	}
	return offs, lens, total
}

// Hyper is the groups' Hyper values for step, each group's starting at a
// multiple of 64 (zeros between them).
func (o *Groups) Hyper(step int) []float32 {
	offs, _, total := o.layout()
	h := make([]float32, total)
	for i, g := range o.groups {
		copy(h[offs[i]:], g.Hyper(step))
	}
	return h
}

// LRIndices are the positions of every group's learning rate in Hyper's
// values.
func (o *Groups) LRIndices() []int {
	offs, _, _ := o.layout()
	var idx []int
	for k, g := range o.groups {
		for _, i := range lrIndices(g) {
			idx = append(idx, offs[k]+i)
		}
	}
	return idx
}

// Update gives each group its slice of hp.
func (o *Groups) Update(hp, scale *core.Tensor) error {
	offs, lens, total := o.layout()
	if hp.Len() != total {
		return fmt.Errorf("nn.Groups.Update: %d hyperparameters, the groups' layout has %d", hp.Len(), total)
	}
	for i, g := range o.groups {
		if err := g.Update(core.SliceRows(hp, offs[i], lens[i]), scale); err != nil {
			return fmt.Errorf("nn.Groups.Update: group %d: %w", i, err)
		}
	}
	return nil
}

// StepCount is the number of updates made.
func (o *Groups) StepCount() int { return o.t }

// SetStepCount sets it, for every group too.
func (o *Groups) SetStepCount(n int) {
	o.t = n
	for _, g := range o.groups {
		g.SetStepCount(n)
	}
}

// Step records the next update of every group.
func (o *Groups) Step() error {
	if err := checkOptimizer("Groups.Step", o); err != nil {
		return err
	}
	return DefaultStep(o)
}

func (o *Groups) checkpointers() ([]Checkpointer, error) {
	cs := make([]Checkpointer, len(o.groups))
	for i, g := range o.groups {
		c, ok := g.(Checkpointer)
		if !ok {
			return nil, fmt.Errorf("nn.Groups: group %d (%T) is not a Checkpointer", i, g)
		}
		if i > 0 && !slices.Equal(c.StateSlots(), cs[0].StateSlots()) {
			return nil, fmt.Errorf("nn.Groups: group %d has state slots %v, group 0 %v: a state file needs the same", i, c.StateSlots(), cs[0].StateSlots())
		}
		cs[i] = c
	}
	return cs, nil
}

// Kind is "groups(" and the groups' kinds, e.g. "groups(adam,adam)".
func (o *Groups) Kind() string {
	ks := make([]string, len(o.groups))
	for i, g := range o.groups {
		if c, ok := g.(Checkpointer); ok {
			ks[i] = c.Kind()
		} else {
			ks[i] = fmt.Sprintf("%T", g)
		}
	}
	return "groups(" + strings.Join(ks, ",") + ")"
}

// Hyperparameters are every group's, prefixed by its index: "0.lr", ...
func (o *Groups) Hyperparameters() map[string]float64 {
	h := map[string]float64{}
	for i, g := range o.groups {
		if c, ok := g.(Checkpointer); ok {
			for k, v := range c.Hyperparameters() {
				h[strconv.Itoa(i)+"."+k] = v
			}
		}
	}
	return h
}

// SetHyperparameters sets each group's from its prefixed names.
func (o *Groups) SetHyperparameters(h map[string]float64) {
	for i, g := range o.groups {
		c, ok := g.(Checkpointer)
		if !ok {
			continue
		}
		prefix := strconv.Itoa(i) + "."
		mine := map[string]float64{}
		for k, v := range h {
			if name, ok := strings.CutPrefix(k, prefix); ok {
				mine[name] = v
			}
		}
		c.SetHyperparameters(mine)
	}
}

// StateSlots are the groups' (the same for every group).
func (o *Groups) StateSlots() []string {
	cs, err := o.checkpointers()
	if err != nil {
		return nil
	}
	return cs[0].StateSlots()
}

// State returns, slot by slot, every group's state tensors of that slot.
func (o *Groups) State() ([]*core.Tensor, error) {
	cs, err := o.checkpointers()
	if err != nil {
		return nil, err
	}
	sts := make([][]*core.Tensor, len(cs))
	for i, c := range cs {
		if sts[i], err = c.State(); err != nil {
			return nil, fmt.Errorf("nn.Groups: group %d: %w", i, err)
		}
	}
	var out []*core.Tensor
	for j := range cs[0].StateSlots() {
		for i, c := range cs {
			n := len(c.Params())
			out = append(out, sts[i][j*n:(j+1)*n]...)
		}
	}
	return out, nil
}

var _ Checkpointer = (*Groups)(nil)
