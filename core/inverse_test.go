package core

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Gather's gradient by Constant indices (inverse gathers, heavy rows summed
// apart) equals the scatter-add of the same indices given as data, NaN
// included: a NaN in one output row's gradient reaches only its source row.
func TestGatherInverseGradient(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(8, 8))
	for _, c := range []struct {
		name       string
		rows, n    int
		heavyReads int // reads of row 0 on top of the random ones
	}{
		{"light", 7, 20, 0},
		{"one-heavy-row", 9, 120, 80},
		{"unread-rows", 50, 10, 0},
	} {
		idx := make([]float32, c.n)
		for i := range idx {
			idx[i] = float32(r.IntN(c.rows))
		}
		for i := 0; i < c.heavyReads; i++ {
			idx[r.IntN(c.n)] = 0
		}
		idx[0] = 1.6  // rounds to 2
		idx[1] = 1000 // clamps to the last row
		xv := make([]float32, c.rows*3)
		for i := range xv {
			xv[i] = float32(r.NormFloat64())
		}
		gv := make([]float32, c.n*3)
		for i := range gv {
			gv[i] = float32(r.NormFloat64())
		}
		gv[3*5+1] = float32(math.NaN()) // output row 5
		grad := func(ix *Tensor) []float32 {
			x := dev.Param(xv, c.rows, 3)
			y := Gather(x, ix)
			if err := Sum(Mul(y, dev.Tensor(gv, c.n, 3))).Backward(); err != nil {
				t.Fatal(err)
			}
			g, err := x.Grad().Data()
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		want := grad(dev.Tensor(idx, c.n))
		ci := dev.Constant(idx, c.n)
		for rep := range 2 { // the second use reads the cached inverse
			got := grad(ci)
			for i := range want {
				if a, b := float64(got[i]), float64(want[i]); math.IsNaN(a) != math.IsNaN(b) || !math.IsNaN(a) && math.Abs(a-b) > 1e-5*(1+math.Abs(b)) {
					t.Fatalf("%s (use %d): gradient %d = %g, scatter-add gives %g", c.name, rep, i, a, b)
				}
			}
		}
		if ci.gatherInverse() == nil {
			t.Errorf("%s: no inverse map was made", c.name)
		} else if c.heavyReads > 0 && len(ci.gatherInverse().heavy) == 0 {
			t.Errorf("%s: row 0 is read %d+ times but is not heavy", c.name, c.heavyReads)
		}
	}
}
