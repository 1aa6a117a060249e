package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestTensorOpsDevice runs core's tensor ops (tensorops.go) on the device
// under test (AG_TEST_DEVICE) against values PyTorch 1.13 computed
// (pasted below), against host-computed truth on larger random inputs,
// and checks their gradients there with Gradcheck.
func TestTensorOpsDevice(t *testing.T) {
	dev := openDev(t)
	nan, inf, negz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	xv := make([]float32, 24)
	for i := range xv {
		xv[i] = float32(i)
	}
	x := dev.Tensor(xv, 2, 3, 4)                                  // torch.arange(24.).reshape(2, 3, 4)
	src := dev.Tensor([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 1, 2, 4) // scatter sources
	y := dev.Tensor([]float32{3, 1, nan, 1, negz, 0, 2, nan, -inf, 3, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4}, 2, 10)
	sortV := func(x *core.Tensor, axis int, desc bool) *core.Tensor { v, _ := core.Sort(x, axis, desc); return v }
	topV := func(x *core.Tensor, k int, largest bool) *core.Tensor { v, _ := core.TopK(x, k, 1, largest); return v }
	topI := func(x *core.Tensor, k int, largest bool) *core.Tensor { _, i := core.TopK(x, k, 1, largest); return i }
	for _, c := range []struct {
		name  string
		y     func() *core.Tensor
		shape []int
		want  []float32
	}{
		{"index-select", func() *core.Tensor { return core.IndexSelect(x, 1, dev.Tensor([]float32{2, 0, 2}, 3)) }, []int{2, 3, 4}, []float32{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23, 12, 13, 14, 15, 20, 21, 22, 23}},
		{"gather", func() *core.Tensor {
			return core.GatherAxis(x, 2, dev.Tensor([]float32{3, 0, 1, 1, 2, 0, 0, 0, 3, 2, 1, 3}, 2, 3, 2))
		}, []int{2, 3, 2}, []float32{3, 0, 5, 5, 10, 8, 12, 12, 19, 18, 21, 23}},
		{"gather-axis0", func() *core.Tensor {
			return core.GatherAxis(x, -3, dev.Tensor([]float32{1, 0, 1, 0, 0, 0, 1, 1}, 2, 1, 4))
		}, []int{2, 1, 4}, []float32{12, 1, 14, 3, 0, 1, 14, 15}},
		{"slice-step", func() *core.Tensor { return core.Slice(x, 1, 0, math.MaxInt, 2) }, []int{2, 2, 4}, []float32{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23}},
		{"slice-neg", func() *core.Tensor { return core.Slice(x, -1, -3, -1, 1) }, []int{2, 3, 2}, []float32{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}},
		{"slice-step3", func() *core.Tensor { return core.Slice(x, 2, 1, math.MaxInt, 3) }, []int{2, 3, 1}, []float32{1, 5, 9, 13, 17, 21}},
		{"narrow", func() *core.Tensor { return core.Narrow(x, 2, 1, 2) }, []int{2, 3, 2}, []float32{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}},
		{"flip", func() *core.Tensor { return core.Flip(x, 0, -1) }, []int{2, 3, 4}, []float32{15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}},
		{"roll", func() *core.Tensor { return core.Roll(x, 2, 1) }, []int{2, 3, 4}, []float32{3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 19, 16, 17, 18, 23, 20, 21, 22}},
		{"roll-neg", func() *core.Tensor { return core.Roll(x, 1, -4) }, []int{2, 3, 4}, []float32{4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 16, 17, 18, 19, 20, 21, 22, 23, 12, 13, 14, 15}},
		{"repeat", func() *core.Tensor { return core.Repeat(core.Reshape(core.SliceRows(x, 0, 1), 3, 4), 2, 1, 2) }, []int{2, 3, 8}, []float32{0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11}},
		{"tile", func() *core.Tensor { return core.Tile(core.Narrow(x, 2, 0, 2), 2) }, []int{2, 3, 4}, []float32{0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 16, 17, 16, 17, 20, 21, 20, 21}},
		{"pad-constant", func() *core.Tensor { return core.Pad(x, core.PadConstant, 9, 1, 2) }, []int{2, 3, 7}, []float32{9, 0, 1, 2, 3, 9, 9, 9, 4, 5, 6, 7, 9, 9, 9, 8, 9, 10, 11, 9, 9, 9, 12, 13, 14, 15, 9, 9, 9, 16, 17, 18, 19, 9, 9, 9, 20, 21, 22, 23, 9, 9}},
		{"pad-reflect", func() *core.Tensor { return core.Pad(x, core.PadReflect, 0, 2, 1, 1, 1) }, []int{2, 5, 7}, []float32{6, 5, 4, 5, 6, 7, 6, 2, 1, 0, 1, 2, 3, 2, 6, 5, 4, 5, 6, 7, 6, 10, 9, 8, 9, 10, 11, 10, 6, 5, 4, 5, 6, 7, 6, 18, 17, 16, 17, 18, 19, 18, 14, 13, 12, 13, 14, 15, 14, 18, 17, 16, 17, 18, 19, 18, 22, 21, 20, 21, 22, 23, 22, 18, 17, 16, 17, 18, 19, 18}},
		{"pad-replicate", func() *core.Tensor { return core.Pad(x, core.PadReplicate, 0, 2, 1, 1, 1) }, []int{2, 5, 7}, []float32{0, 0, 0, 1, 2, 3, 3, 0, 0, 0, 1, 2, 3, 3, 4, 4, 4, 5, 6, 7, 7, 8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11, 12, 12, 12, 13, 14, 15, 15, 12, 12, 12, 13, 14, 15, 15, 16, 16, 16, 17, 18, 19, 19, 20, 20, 20, 21, 22, 23, 23, 20, 20, 20, 21, 22, 23, 23}},
		{"pad-circular", func() *core.Tensor { return core.Pad(x, core.PadCircular, 0, 2, 1, 1, 1) }, []int{2, 5, 7}, []float32{10, 11, 8, 9, 10, 11, 8, 2, 3, 0, 1, 2, 3, 0, 6, 7, 4, 5, 6, 7, 4, 10, 11, 8, 9, 10, 11, 8, 2, 3, 0, 1, 2, 3, 0, 22, 23, 20, 21, 22, 23, 20, 14, 15, 12, 13, 14, 15, 12, 18, 19, 16, 17, 18, 19, 16, 22, 23, 20, 21, 22, 23, 20, 14, 15, 12, 13, 14, 15, 12}},
		{"scatter-add", func() *core.Tensor {
			return core.ScatterAdd(x, 1, dev.Tensor([]float32{0, 1, 2, 0, 2, 2, 1, 0}, 1, 2, 4), src)
		}, []int{2, 3, 4}, []float32{1, 1, 2, 15, 4, 7, 13, 7, 13, 15, 13, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
		{"scatter", func() *core.Tensor {
			return core.Scatter(x, 1, dev.Tensor([]float32{0, 1, 2, 1, 2, 0, 1, 0}, 1, 2, 4), src)
		}, []int{2, 3, 4}, []float32{1, 6, 2, 8, 4, 2, 7, 4, 5, 9, 3, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}},
		{"sort-values", func() *core.Tensor { return sortV(y, 1, false) }, []int{2, 10}, []float32{-inf, negz, 0, 1, 1, 2, 3, 3, nan, nan, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5}},
		{"sort-indices", func() *core.Tensor { return core.Argsort(y, 1, false) }, []int{2, 10}, []float32{8, 4, 5, 1, 3, 6, 0, 9, 2, 7, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
		{"sort-desc-values", func() *core.Tensor { return sortV(y, -1, true) }, []int{2, 10}, []float32{nan, nan, 3, 3, 2, 1, 1, negz, 0, -inf, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4}},
		{"sort-desc-indices", func() *core.Tensor { return core.Argsort(y, -1, true) }, []int{2, 10}, []float32{2, 7, 0, 9, 6, 1, 3, 4, 5, 8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"topk-small-values", func() *core.Tensor { return topV(y, 3, false) }, []int{2, 3}, []float32{-inf, negz, 0, -4, -3, -2}},
		{"topk-small-indices", func() *core.Tensor { return topI(y, 3, false) }, []int{2, 3}, []float32{8, 4, 5, 9, 8, 7}},
		{"sort-axis0-indices", func() *core.Tensor { return core.Argsort(y, 0, true) }, []int{2, 10}, []float32{1, 1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 1}},
		// torch.topk gives the NaNs as 7, 2: TopK keeps sort(stable=True)'s order.
		{"topk-values", func() *core.Tensor { return topV(y, 4, true) }, []int{2, 4}, []float32{nan, nan, 3, 3, 5, 4, 3, 2}},
		{"topk-indices", func() *core.Tensor { return topI(y, 4, true) }, []int{2, 4}, []float32{2, 7, 0, 9, 0, 1, 2, 3}},
	} {
		y := c.y()
		if !slices.Equal(y.Shape(), c.shape) {
			t.Errorf("%s: shape %v, want %v", c.name, y.Shape(), c.shape)
			continue
		}
		got, err := y.Data()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i := range got {
			if got[i] != c.want[i] && !(got[i] != got[i] && c.want[i] != c.want[i]) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
				break
			}
		}
	}

	// Larger random inputs against host truth: rows long enough for
	// workgroup boundaries and for many stages of Argsort's sorting
	// network (2500 pads to 4096), many ties (-0 among +0), NaN,
	// infinities, the largest finite values, and normal values near 2^-126
	// whose differences are subnormal (which devices may flush to 0: the
	// order must not). The long rows lie along axis 0.
	r := rand.New(rand.NewPCG(5, 6))
	for _, sz := range []struct{ R, C, axis int }{{3, 300, -1}, {2, 2500, 0}} {
		R, C := sz.R, sz.C
		av := make([]float32, R*C) // row-major [R, C]: the rows to sort
		for i := range av {
			av[i] = float32(r.IntN(41) - 20)
			switch r.IntN(30) {
			case 0:
				av[i] = nan
			case 1:
				av[i] = inf
			case 2:
				av[i] = -inf
			case 3:
				av[i] = negz
			case 4:
				av[i] = float32(r.IntN(3)-1) * math.MaxFloat32
			case 5:
				av[i] = float32(r.IntN(2)*2-1) * 0x1p-126 * (1 + float32(r.IntN(8))/8)
			}
		}
		in, shape := dev.Tensor(av, R, C), []int{R, C}
		if sz.axis == 0 {
			tv := make([]float32, R*C)
			for i := range R {
				for j := range C {
					tv[j*R+i] = av[i*C+j]
				}
			}
			in, shape = dev.Tensor(tv, C, R), []int{C, R}
		}
		at := func(got []float32, row, i int) float32 { // element i of sorted row
			if sz.axis == 0 {
				return got[i*R+row]
			}
			return got[row*C+i]
		}
		for _, desc := range []bool{false, true} {
			// Each is a sorting network of its own: the long rows (slow on
			// lavapipe) get Sort only, which is Argsort and a gather.
			vals, ti := core.Sort(in, sz.axis, desc)
			ai, ki := ti, (*core.Tensor)(nil)
			ts := []*core.Tensor{vals, ti}
			if C < 1000 {
				ai = core.Argsort(in, sz.axis, desc)
				_, ki = core.TopK(in, C/3, sz.axis, desc)
				ts = append(ts, ai, ki)
			}
			if err := dev.Sync(ts...); err != nil {
				t.Fatal(err)
			}
			var got [4][]float32
			for k, x := range []*core.Tensor{ai, vals, ti, ki} {
				if x == nil {
					continue
				}
				var err error
				if got[k], err = x.Data(); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(ti.Shape(), shape) {
				t.Errorf("Sort %v: shape %v, want %v", sz, ti.Shape(), shape)
			}
			for row := range R {
				v := av[row*C : (row+1)*C]
				want := make([]int, C)
				for i := range want {
					want[i] = i
				}
				key := func(f float32) float64 { // NaN the largest
					if f != f {
						return math.Inf(1)
					}
					return float64(f)
				}
				sort.SliceStable(want, func(a, b int) bool {
					ka, kb := key(v[want[a]]), key(v[want[b]])
					na, nb := v[want[a]] != v[want[a]], v[want[b]] != v[want[b]]
					if desc {
						return ka > kb || na && !nb
					}
					return ka < kb || nb && !na
				})
				for i, w := range want {
					gi, gs, gv := at(got[0], row, i), at(got[2], row, i), at(got[1], row, i)
					wv := v[w]
					if gi != float32(w) || gs != float32(w) || math.Float32bits(gv) != math.Float32bits(wv) && !(gv != gv && wv != wv) {
						t.Errorf("Sort %v (descending %v) row %d position %d: index %g (Argsort %g), value %g, want %d, %g", sz, desc, row, i, gs, gi, gv, w, wv)
						break
					}
					if ki != nil && i < C/3 {
						var gk float32
						if sz.axis == 0 {
							gk = got[3][i*R+row]
						} else {
							gk = got[3][row*(C/3)+i]
						}
						if gk != float32(w) {
							t.Errorf("TopK %v (largest %v) row %d position %d: index %g, want %d", sz, desc, row, i, gk, w)
							break
						}
					}
				}
			}
		}
	}
	// GatherAxis and ScatterAdd along the middle axis of [5, 37, 11].
	const A, B, D, K = 5, 37, 11, 23
	gv := make([]float32, A*B*D)
	for i := range gv {
		gv[i] = float32(r.NormFloat64())
	}
	iv, sv := make([]float32, A*K*D), make([]float32, A*K*D)
	for i := range iv {
		iv[i], sv[i] = float32(r.IntN(B)), float32(r.NormFloat64())
	}
	gx, gi := dev.Tensor(gv, A, B, D), dev.Tensor(iv, A, K, D)
	gathered, err := core.GatherAxis(gx, 1, gi).Data()
	if err != nil {
		t.Fatal(err)
	}
	added, err := core.ScatterAdd(gx, 1, gi, dev.Tensor(sv, A, K, D)).Data()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(gv)
	for a := range A {
		for k := range K {
			for d := range D {
				p := (a*K+k)*D + d
				q := (a*B+int(iv[p]))*D + d
				if gathered[p] != gv[q] {
					t.Fatalf("GatherAxis at %d: %g, want %g", p, gathered[p], gv[q])
				}
				want[q] += sv[p]
			}
		}
	}
	for i := range want {
		if math.Abs(float64(added[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("ScatterAdd at %d: %g, want %g", i, added[i], want[i])
		}
	}

	// Gradients on the device, at distinct values 0.05 apart (so that no
	// finite difference reorders a sort).
	perm := r.Perm(24)
	pv, qv := make([]float32, 24), make([]float32, 8)
	for i, k := range perm {
		pv[i] = float32(k)*0.05 - 0.6
	}
	for i := range qv {
		qv[i] = float32(i)*0.1 - 0.3
	}
	p, q := dev.Param(pv, 2, 3, 4), dev.Param(qv, 1, 2, 4)
	loss := func(y *core.Tensor) *core.Tensor {
		w := make([]float32, y.Len())
		for i := range w {
			w[i] = float32(i%7) - 2.5
		}
		return core.Sum(core.Mul(core.Tanh(y), dev.Tensor(w, y.Shape()...)))
	}
	gidx := dev.Tensor([]float32{3, 0, 1, 1, 2, 0, 0, 0, 3, 2, 1, 3}, 2, 3, 2)
	sidx := dev.Tensor([]float32{0, 1, 2, 0, 2, 2, 1, 0}, 1, 2, 4)
	for _, c := range []struct {
		name string
		f    func() *core.Tensor
		ps   []*core.Tensor
	}{
		{"IndexSelect", func() *core.Tensor { return loss(core.IndexSelect(p, 1, dev.Tensor([]float32{2, 0, 2}, 3))) }, []*core.Tensor{p}},
		{"GatherAxis", func() *core.Tensor { return loss(core.GatherAxis(p, 2, gidx)) }, []*core.Tensor{p}},
		{"Slice", func() *core.Tensor { return loss(core.Slice(p, 2, 1, math.MaxInt, 2)) }, []*core.Tensor{p}},
		{"Split", func() *core.Tensor { s := core.Split(p, 2, 3); return core.Add(loss(s[0]), loss(s[1])) }, []*core.Tensor{p}},
		{"Flip-Roll", func() *core.Tensor { return loss(core.Roll(core.Flip(p, 0, 2), 1, -1)) }, []*core.Tensor{p}},
		{"Repeat", func() *core.Tensor { return loss(core.Repeat(p, 1, 2, 1, 2)) }, []*core.Tensor{p}},
		{"Pad-reflect", func() *core.Tensor { return loss(core.Pad(p, core.PadReflect, 0, 2, 1, 1, 2)) }, []*core.Tensor{p}},
		{"Pad-constant", func() *core.Tensor { return loss(core.Pad(p, core.PadConstant, 0.5, 1, 0, 0, 2)) }, []*core.Tensor{p}},
		{"ScatterAdd", func() *core.Tensor { return loss(core.ScatterAdd(p, 1, sidx, q)) }, []*core.Tensor{p, q}},
		{"Scatter", func() *core.Tensor { return loss(core.Scatter(p, 1, sidx, q)) }, []*core.Tensor{p, q}},
		{"Sort", func() *core.Tensor { v, _ := core.Sort(p, 1, true); return loss(v) }, []*core.Tensor{p}},
		{"TopK", func() *core.Tensor { v, _ := core.TopK(p, 2, -1, false); return loss(v) }, []*core.Tensor{p}},
	} {
		if err := core.Gradcheck(c.f, c.ps, nil); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
