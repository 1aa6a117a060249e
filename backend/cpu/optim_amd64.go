//go:build amd64 && !purego

package cpu

//go:noescape
func adamW16(n int, w, grad, m, v *float32, c *[9]float32)

// adamWVec updates the largest multiple of 16 elements with AVX-512 and
// returns how many it did (0 without AVX-512).
func adamWVec(w, g, m, v []float32, c [9]float32) int {
	n := len(w) &^ 15
	if !hasAVX512 || n == 0 {
		return 0
	}
	_, _, _ = g[n-1], m[n-1], v[n-1]
	adamW16(n, &w[0], &g[0], &m[0], &v[0], &c)
	return n
}
