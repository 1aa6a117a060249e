package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
)

// The checks every constructor of this package makes before it allocates
// anything: past the limits, make panicked with a bare "makeslice", an
// overflowing product of sizes looped or allocated until the process died,
// and a nil rng or device was a nil dereference deep inside. Shape mistakes
// are programming errors, so each is a panic naming the constructor and
// its values.

// elemLimit is the most elements one tensor may hold on dev: the IR's bound
// (backend.MaxElems), or the backend's largest buffer where that is smaller;
// with a nil dev, the IR's bound.
func elemLimit(dev *core.Device) (limit int, where string) {
	limit, where = backend.MaxElems, "a tensor (backend.MaxElems)"
	if dev != nil {
		if c := dev.Info(); c.MaxBufferElems > 0 && c.MaxBufferElems < limit {
			limit, where = c.MaxBufferElems, c.Name+"'s largest buffer"
		}
	}
	return limit, where
}

// checkShape panics unless every dimension of shape (what: "weight", ...)
// is >= 1 and their product, computed without overflowing, is at most
// elemLimit(dev). values names the constructor's arguments for the message.
func checkShape(fn string, dev *core.Device, values, what string, shape ...int) {
	limit, where := elemLimit(dev)
	if err := shapeWithin(shape, limit, where); err != "" {
		if values != "" {
			values += ": "
		}
		panic(fmt.Sprintf("nn.%s: %s%s of shape %v %s", fn, values, what, shape, err))
	}
}

// shapeWithin says what is wrong with shape, or "" when every dimension is
// >= 1 and the product is at most limit (where: what sets the limit).
func shapeWithin(shape []int, limit int, where string) string {
	n := 1
	for _, d := range shape {
		if d < 1 {
			return fmt.Sprintf("has a dimension %d: want every dimension >= 1", d)
		}
		if n > limit/d {
			return fmt.Sprintf("has more than %d elements, the most %s holds", limit, where)
		}
		n *= d
	}
	return ""
}

// checkDevice panics on a nil device.
func checkDevice(fn string, dev *core.Device) {
	if dev == nil {
		panic(fmt.Sprintf("nn.%s: nil device", fn))
	}
}

// checkRNG panics on a nil rng where the constructor draws from it.
func checkRNG(fn string, rng *rand.Rand) {
	if rng == nil {
		panic(fmt.Sprintf("nn.%s: nil rng: its weights are drawn from it", fn))
	}
}

// checkDraw is an initializer's own check of the shape it is asked for and
// of its rng (draws: it draws from it), made before it allocates.
func checkDraw(fn string, shape []int, rng *rand.Rand, draws bool) {
	if err := shapeWithin(shape, backend.MaxElems, "a tensor (backend.MaxElems)"); err != "" {
		panic(fmt.Sprintf("nn.%s: shape %v %s", fn, shape, err))
	}
	if draws && rng == nil {
		panic(fmt.Sprintf("nn.%s: nil rng for shape %v", fn, shape))
	}
}
