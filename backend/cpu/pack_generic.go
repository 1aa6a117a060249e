//go:build !amd64 || purego

package cpu

// packVec has no vector version here: packA's loops do everything.
func packVec(mr int, d, a []float32, rsA, csA, i0, rows, p0, kc int) int { return 0 }
