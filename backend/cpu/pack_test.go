package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackVec checks packA (with the vector packing where this CPU has it)
// against the scalar loops of packPanel, panel by panel: both layouts of the
// source, ragged rows and depths around the vector widths, a destination
// full of NaNs so that padding left unwritten shows.
func TestPackVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mr := range []int{6, 12, 32} {
		for _, mc := range []int{1, 5, mr - 1, mr, mr + 3, 3 * mr} {
			for _, kc := range []int{1, 15, 16, 17, 47, 256} {
				for _, rowMajor := range []bool{false, true} {
					m, k := mc+7, kc+5 // room around the packed window
					rsA, csA := k, 1
					if !rowMajor {
						rsA, csA = 1, m
					}
					a := make([]float32, m*k)
					for i := range a {
						a[i] = rng.Float32()
					}
					i0, p0 := 3, 2
					mp := roundUp(mc, mr)
					got := slices.Repeat([]float32{float32(math.NaN())}, mp*kc)
					want := slices.Clone(got)
					packA(mr, got, a, rsA, csA, i0, mc, p0, kc)
					for ir := 0; ir < mc; ir += mr {
						packPanel(mr, want[ir*kc:(ir+mr)*kc], a, rsA, csA, i0+ir, min(mr, mc-ir), p0, kc)
					}
					for i := range want {
						if got[i] != want[i] { // a NaN left is a float not written
							t.Fatalf("mr %d mc %d kc %d row-major %v: [%d] = %v, want %v", mr, mc, kc, rowMajor, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
