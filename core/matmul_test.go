package core

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

func init() {
	gradCases = append(gradCases,
		gradCase{name: "matmul-batch-times-matrix", shapes: [][]int{{2, 3, 4}, {4, 5}}, f: func(p []*Tensor) *Tensor { return MatMul(p[0], p[1]) }},
		gradCase{name: "matmul-broadcast-both", shapes: [][]int{{2, 1, 3, 4}, {3, 4, 2}}, f: func(p []*Tensor) *Tensor { return MatMul(p[0], p[1]) }},
		gradCase{name: "matmul-matrix-vector", shapes: [][]int{{3, 4}, {4}}, f: func(p []*Tensor) *Tensor { return MatMul(p[0], p[1]) }},
		gradCase{name: "matmul-vector-batch", shapes: [][]int{{4}, {2, 4, 3}}, f: func(p []*Tensor) *Tensor { return MatMul(p[0], p[1]) }},
		gradCase{name: "matmul-broadcast-transB", shapes: [][]int{{2, 3, 4}, {5, 4}}, f: func(p []*Tensor) *Tensor { return MatMulT(p[0], p[1], false, true) }},
		gradCase{name: "matmul-broadcast-transA", shapes: [][]int{{2, 4, 3}, {4, 5}}, f: func(p []*Tensor) *Tensor { return MatMulT(p[0], p[1], true, false) }},
	)
}

// hostMatMul is numpy's matmul in float64, for shapes of rank >= 1.
func hostMatMul(a []float32, as []int, b []float32, bs []int, ta, tb bool) ([]float64, []int) {
	va, vb := len(as) == 1, len(bs) == 1
	if va {
		as, ta = []int{1, as[0]}, false
	}
	if vb {
		bs, tb = []int{bs[0], 1}, false
	}
	ra, rb := len(as), len(bs)
	batch, err := backend.BroadcastShape(as[:ra-2], bs[:rb-2])
	if err != nil {
		panic(err)
	}
	m, k := as[ra-2], as[ra-1]
	if ta {
		m, k = k, m
	}
	n := bs[rb-1]
	if tb {
		n = bs[rb-2]
	}
	at := func(x []float32, s []int, bi []int, i, j int, t bool) float64 {
		r := len(s)
		if t {
			i, j = j, i
		}
		off, stride := 0, 1
		off += j + i*s[r-1]
		stride = s[r-1] * s[r-2]
		for d := r - 3; d >= 0; d-- {
			idx := bi[len(bi)-(r-2)+d]
			if s[d] == 1 {
				idx = 0
			}
			off += idx * stride
			stride *= s[d]
		}
		return float64(x[off])
	}
	nb := backend.NumElems(batch)
	out := make([]float64, 0, nb*m*n)
	bi := make([]int, len(batch))
	for q := 0; q < nb; q++ {
		r := q
		for d := len(batch) - 1; d >= 0; d-- {
			bi[d] = r % batch[d]
			r /= batch[d]
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var acc float64
				for l := 0; l < k; l++ {
					acc += at(a, as, bi, i, l, ta) * at(b, bs, bi, l, j, tb)
				}
				out = append(out, acc)
			}
		}
	}
	s := append(slices.Clone(batch), m, n)
	switch {
	case va && vb:
		s = s[:len(s)-2]
	case va:
		s = append(s[:len(s)-2], n)
	case vb:
		s = s[:len(s)-1]
	}
	return out, s
}

func TestMatMulBroadcast(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(7, 7))
	rnd := func(s []int) []float32 {
		v := make([]float32, backend.NumElems(s))
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	cases := []struct {
		a, b   []int
		ta, tb bool
	}{
		{[]int{2, 3, 4}, []int{4, 5}, false, false},
		{[]int{2, 3, 4}, []int{5, 4}, false, true},
		{[]int{2, 4, 3}, []int{4, 5}, true, false},
		{[]int{3, 4}, []int{2, 4, 5}, false, false},
		{[]int{2, 1, 3, 4}, []int{3, 4, 2}, false, false},
		{[]int{2, 1, 4, 3}, []int{3, 2, 4}, true, true},
		{[]int{3, 4}, []int{4}, false, false},
		{[]int{4}, []int{4, 3}, false, false},
		{[]int{4}, []int{2, 4, 3}, false, false},
		{[]int{2, 3, 4}, []int{4}, false, false},
		{[]int{4}, []int{4}, false, false},
		{[]int{2, 3, 4}, []int{2, 4, 5}, false, false},
	}
	for _, c := range cases {
		av, bv := rnd(c.a), rnd(c.b)
		want, ws := hostMatMul(av, c.a, bv, c.b, c.ta, c.tb)
		y := MatMulT(dev.Tensor(av, c.a...), dev.Tensor(bv, c.b...), c.ta, c.tb)
		if !slices.Equal(y.Shape(), ws) {
			t.Errorf("MatMulT(%v, %v, %t, %t): shape %v, want %v", c.a, c.b, c.ta, c.tb, y.Shape(), ws)
			continue
		}
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Abs(float64(got[i])-want[i]) > 1e-5*(1+math.Abs(want[i])) {
				t.Errorf("MatMulT(%v, %v, %t, %t)[%d] = %g, want %g", c.a, c.b, c.ta, c.tb, i, got[i], want[i])
				break
			}
		}
	}
}

func TestMatMulBadShapes(t *testing.T) {
	dev := open(t)
	for _, c := range []struct {
		a, b []int
		msg  string
	}{
		{[]int{2, 3, 4}, []int{3, 5, 2}, "batch dimensions"},
		{[]int{3, 4}, []int{5}, "inner dimensions differ"},
		{[]int{}, []int{4}, "scalars"},
		{[]int{2, 3, 4}, []int{2, 3, 5}, "inner dimensions differ"},
	} {
		func() {
			defer func() {
				e := recover()
				if s, _ := e.(string); !strings.Contains(s, "core.MatMul") || !strings.Contains(s, c.msg) {
					t.Errorf("MatMul(%v, %v): panic %v, want one naming core.MatMul and %q", c.a, c.b, e, c.msg)
				}
			}()
			MatMul(dev.Full(0, c.a...), dev.Full(0, c.b...))
		}()
	}
}
