package cpu

import "math"

// adamW updates w, m, v in place over elements lo..hi (ggml's
// opt_step_adamw): hp = [lr, beta1, beta2, eps, wd, 1/(1-beta1^t), 1/(1-beta2^t)]
// and, if it has 8 values, the gradient's scale s (g*s is used for g).
// Each step rounds like the vector version in optim_amd64.s, which handles
// the bulk where the CPU has AVX-512; this loop does the rest.
func adamW(w, g, m, v, hp []float32, lo, hi int) {
	w, g, m, v = w[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	if len(hp) < 8 {
		adamWRange(w, g, m, v, hp)
		return
	}
	// The scaled gradient in blocks on the stack, so that the vector code
	// stays as it is and g*s is rounded to f32 as a product node gives it.
	var buf [512]float32
	s := hp[7]
	for len(w) > 0 {
		k := min(len(w), len(buf))
		gs := buf[:k]
		for j, x := range g[:k] {
			gs[j] = x * s
		}
		adamWRange(w[:k], gs, m[:k], v[:k], hp)
		w, g, m, v = w[k:], g[k:], m[k:], v[k:]
	}
}

// adamWRange is adamW's step over whole slices of one length, with g
// already scaled.
func adamWRange(w, g, m, v, hp []float32) {
	lr, b1, b2, eps, wd, bc1, bc2 := hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], hp[6]
	decay := 1 - lr*wd
	done := adamWVec(w, g, m, v, [9]float32{b1, 1 - b1, b2, 1 - b2, bc2, eps, decay, lr, bc1})
	w, g, m, v = w[done:], g[done:], m[done:], v[done:]
	for i := range w {
		gi := g[i]
		mi := b1*m[i] + (1-b1)*gi
		vi := b2*v[i] + (1-b2)*gi*gi // (1-b2)*g first, then *g, as the vector code
		m[i], v[i] = mi, vi
		den := float32(math.Sqrt(float64(vi*bc2))) + eps
		w[i] = w[i]*decay - lr*(mi*bc1)/den
	}
}

// sgd updates w and vel in place over elements lo..hi: hp = [lr, momentum, wd].
func sgd(w, g, vel, hp []float32, lo, hi int) {
	lr, mom, wd := hp[0], hp[1], hp[2]
	w, g, vel = w[lo:hi], g[lo:hi], vel[lo:hi]
	g, vel = g[:len(w)], vel[:len(w)]
	for i := range w {
		gi := g[i] + wd*w[i]
		vi := mom*vel[i] + gi
		vel[i] = vi
		w[i] -= lr * vi
	}
}
