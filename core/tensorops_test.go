package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The gradients of the tensor ops of tensorops.go, checked by
// TestGradients against float64 finite differences of the same lowered
// graph. The values, on every device, are in nn's TestTensorOpsDevice.
func init() {
	idx := func(p []*Tensor, v []float32, shape ...int) *Tensor { return p[0].dev.Tensor(v, shape...) }
	gradCases = append(gradCases,
		gradCase{name: "index-select-axis1", shapes: [][]int{{2, 3, 4}}, f: func(p []*Tensor) *Tensor {
			return IndexSelect(p[0], 1, idx(p, []float32{2, 0, 2, 1}, 4))
		}},
		gradCase{name: "gather-axis-last", shapes: [][]int{{2, 3, 4}}, f: func(p []*Tensor) *Tensor {
			return GatherAxis(p[0], -1, idx(p, []float32{3, 0, 1, 1, 2, 0, 0, 0, 3, 2, 1, 3}, 2, 3, 2))
		}},
		gradCase{name: "slice-step2", shapes: [][]int{{5, 3}}, f: func(p []*Tensor) *Tensor { return Slice(p[0], 0, -4, math.MaxInt, 2) }},
		gradCase{name: "narrow-axis1", shapes: [][]int{{2, 5}}, f: func(p []*Tensor) *Tensor { return Narrow(p[0], 1, -3, 2) }},
		gradCase{name: "chunk", shapes: [][]int{{3, 5}}, f: func(p []*Tensor) *Tensor {
			c := Chunk(p[0], 1, 2)
			return Add(Sum(Mul(c[0], c[0])), Sum(Scale(c[1], 3)))
		}},
		gradCase{name: "flip-roll", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Roll(Flip(p[0], 0, 1), 1, 5) }},
		gradCase{name: "repeat-tile", shapes: [][]int{{2, 3}}, f: func(p []*Tensor) *Tensor { return Add(Repeat(p[0], 2, 1, 2), Tile(p[0], 2, 1, 2)) }},
		gradCase{name: "pad-reflect", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Pad(p[0], PadReflect, 0, 3, 2, 1, 2) }},
		gradCase{name: "pad-replicate", shapes: [][]int{{3, 4}}, f: func(p []*Tensor) *Tensor { return Pad(p[0], PadReplicate, 0, 2, 3) }},
		gradCase{name: "pad-circular", shapes: [][]int{{2, 3, 2}}, f: func(p []*Tensor) *Tensor { return Pad(p[0], PadCircular, 0, 1, 2, 3, 0) }},
		gradCase{name: "pad-constant", shapes: [][]int{{2, 3}}, f: func(p []*Tensor) *Tensor { return Pad(p[0], PadConstant, 2, 1, 1, 2, 0) }},
		gradCase{name: "scatter-add", shapes: [][]int{{3, 4}, {2, 5}}, f: func(p []*Tensor) *Tensor {
			return ScatterAdd(p[0], 0, idx(p, []float32{0, 2, 2, 1, 0, 0, 1, 0}, 2, 4), p[1])
		}},
		gradCase{name: "scatter-duplicates", shapes: [][]int{{3, 4}, {2, 4}}, f: func(p []*Tensor) *Tensor {
			return Scatter(p[0], 0, idx(p, []float32{0, 2, 2, 1, 0, 0, 1, 1}, 2, 4), p[1])
		}},
		// Sort and TopK: U(-1, 1) values are distinct, far apart next to
		// the finite-difference step.
		gradCase{name: "sort-axis0", shapes: [][]int{{5, 3}}, f: func(p []*Tensor) *Tensor { v, _ := Sort(p[0], 0, false); return v }},
		gradCase{name: "topk", shapes: [][]int{{3, 6}}, f: func(p []*Tensor) *Tensor { v, _ := TopK(p[0], 2, 1, true); return v }},
	)
}

func TestTensorOpsPanics(t *testing.T) {
	dev := open(t)
	x := dev.Tensor(make([]float32, 24), 2, 3, 4)
	i3 := dev.Tensor([]float32{0, 1, 2}, 3)
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"index-select-axis", "core.IndexSelect: axis 3 out of range for shape [2 3 4]", func() { IndexSelect(x, 3, i3) }},
		{"index-select-rank", "core.IndexSelect: indices of shape [2 3 4], want 1-D", func() { IndexSelect(x, 0, x) }},
		{"gather-rank", "core.GatherAxis: indices of shape [3] and input of shape [2 3 4] differ in rank", func() { GatherAxis(x, 0, i3) }},
		{"gather-shape", "core.GatherAxis: indices of shape [3 1 1] exceed input of shape [2 3 4] on axis 0", func() { GatherAxis(x, 1, Reshape(i3, 3, 1, 1)) }},
		{"scatter-source", "core.ScatterAdd: indices of shape [2 3 4] exceed source of shape [3 1 1] on axis 1", func() { ScatterAdd(x, 1, x, Reshape(i3, 3, 1, 1)) }},
		{"slice-step", "core.Slice: step 0, want > 0", func() { Slice(x, 1, 0, 3, 0) }},
		{"slice-negative-step", "core.Slice: step -1, want > 0", func() { Slice(x, 1, 0, 3, -1) }},
		{"slice-empty", "core.Slice: [2:1:1] of axis 2 of shape [2 3 4] is empty", func() { Slice(x, -1, 2, 1, 1) }},
		{"narrow", "core.Narrow: start -2, length 3 outside axis 1 of shape [2 3 4]", func() { Narrow(x, 1, -2, 3) }},
		{"split-sizes", "core.SplitSizes: sizes [1 2] add up to 3, axis 2 of shape [2 3 4] is 4", func() { SplitSizes(x, 2, 1, 2) }},
		{"split-size", "core.Split: size 0, want >= 1", func() { Split(x, 0, 0) }},
		{"chunk", "core.Chunk: 0 chunks, want >= 1", func() { Chunk(x, 0, 0) }},
		{"flip-twice", "core.Flip: axis -1 given twice (axes [2 -1])", func() { Flip(x, 2, -1) }},
		{"repeat-short", "core.Repeat: 2 repetitions [2 2] for shape [2 3 4]: want one per axis at least", func() { Repeat(x, 2, 2) }},
		{"repeat-zero", "core.Tile: repetitions [1 0 1] for shape [2 3 4]: each must be >= 1", func() { Tile(x, 1, 0, 1) }},
		{"repeat-rank", "core.Repeat: shape [2 1 1 1 2 3 8] has 7 dimensions, more than backend.MaxRank = 6", func() { Repeat(x, 2, 1, 1, 1, 1, 1, 2) }},
		{"pad-odd", "core.Pad: 3 pads [1 1 1] for shape [2 3 4]", func() { Pad(x, PadConstant, 0, 1, 1, 1) }},
		{"pad-negative", "core.Pad: pad -1 of [0 -1] is negative", func() { Pad(x, PadConstant, 0, 0, -1) }},
		{"pad-reflect", "core.Pad: reflect pad 3 of axis 1 of shape [2 3 4]: want < 3", func() { Pad(x, PadReflect, 0, 1, 1, 3, 0) }},
		{"pad-circular", "core.Pad: circular pad 5 of axis 2 of shape [2 3 4]: want <= 4", func() { Pad(x, PadCircular, 0, 5, 0) }},
		{"pad-mode", "core.Pad: unknown mode PadMode(7)", func() { Pad(x, PadMode(7), 0, 1, 1) }},
		{"topk-k", "core.TopK: k = 5 for axis 2 of shape [2 3 4], want 1..4", func() { TopK(x, 5, -1, true) }},
		{"topk-zero", "core.TopK: k = 0 for axis 0 of shape [2 3 4], want 1..2", func() { TopK(x, 0, 0, true) }},
		{"argsort-axis", "core.Argsort: axis -4 out of range for shape [2 3 4]", func() { Argsort(x, -4, false) }},
		{"argsort-long", "core.Argsort: 1048577 elements along axis 1 of [1 1048577]: at most 1048576 sort",
			func() { Argsort(x.dev.Full(0, 1, 1<<20+1), -1, false) }},
	} {
		func() {
			defer func() {
				s := fmt.Sprint(recover())
				if !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %q, want one containing %q", c.name, s, c.want)
				}
			}()
			c.f()
		}()
	}
}

// TestArgsortLengths sorts rows of every length 1..70 (powers of two and
// the lengths between, padded), both ways, with ties, -0 and +0, NaN,
// infinities and the largest finite values, against a stable host sort.
func TestArgsortLengths(t *testing.T) {
	dev := open(t)
	r := rand.New(rand.NewPCG(1, 2))
	pick := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0, maxF32, -maxF32, 1, -1, 0.5}
	for n := 1; n <= 70; n++ {
		const rows = 3
		v := make([]float32, rows*n)
		for i := range v {
			v[i] = pick[r.IntN(len(pick))]
		}
		for _, desc := range []bool{false, true} {
			got, err := Argsort(dev.Tensor(v, rows, n), 1, desc).Data()
			if err != nil {
				t.Fatal(err)
			}
			for row := range rows {
				x := v[row*n : (row+1)*n]
				want := make([]int, n)
				for i := range want {
					want[i] = i
				}
				// before: x[a] goes before x[b] (NaN the largest).
				before := func(a, b float32) bool {
					if desc {
						a, b = b, a
					}
					return a < b || a == a && b != b
				}
				slices.SortStableFunc(want, func(i, j int) int {
					switch {
					case before(x[i], x[j]):
						return -1
					case before(x[j], x[i]):
						return 1
					}
					return 0
				})
				for i, w := range want {
					if got[row*n+i] != float32(w) {
						t.Errorf("n %d descending %v row %d: %v, want %v (values %v)", n, desc, row, got[row*n:(row+1)*n], want, x)
						break
					}
				}
			}
		}
	}
}
