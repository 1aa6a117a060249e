//go:build !amd64 || purego

package cpu

// adamWVec has no vector version here: the scalar loop does everything.
func adamWVec(w, g, m, v []float32, c [9]float32) int { return 0 }
