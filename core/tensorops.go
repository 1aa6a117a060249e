package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/backend"
)

// Tensor ops a PyTorch user reaches for: slicing, index-select, gather,
// scatter, pad, split, flip, roll, repeat, sort and top-k. All are
// composites of the primitives of ops.go (a permute of the axis to the
// front, a Gather or SliceRows of rows, a permute back; index tables the
// host computes from shapes alone are cached Constants), so each has its
// gradient for free and runs alike on every backend.

// toFront is the permutation moving axis to the front, and its inverse.
func toFront(rank, axis int) (perm, inv []int) {
	perm = append(perm, axis)
	for i := range rank {
		if i != axis {
			perm = append(perm, i)
		}
	}
	inv = make([]int, rank)
	for i, p := range perm {
		inv[p] = i
	}
	return perm, inv
}

// alongFront applies f (an op on axis 0) along axis: a permute there and
// back when axis is not already first.
func alongFront(x *Tensor, axis int, f func(*Tensor) *Tensor) *Tensor {
	if axis == 0 {
		return f(x)
	}
	perm, inv := toFront(x.Rank(), axis)
	return Permute(f(Permute(x, perm...)), inv...)
}

// takeIndex selects the entries idx (computed by the host, from shapes
// alone) along axis of x: a Constant table cached under key (which must
// determine idx), or a SliceRows where idx is a run of consecutive rows.
func takeIndex(x *Tensor, axis int, key string, idx []int) *Tensor {
	n := x.shape[axis]
	run := true
	for i := range idx {
		run = run && idx[i] == idx[0]+i
	}
	if run && len(idx) == n {
		return x
	}
	return alongFront(x, axis, func(f *Tensor) *Tensor {
		if run {
			return SliceRows(f, idx[0], len(idx))
		}
		t := x.dev.constant(fmt.Sprintf("index %s of %d", key, n), func() []float32 {
			v := make([]float32, len(idx))
			for i, k := range idx {
				v[i] = float32(k)
			}
			return v
		}, len(idx))
		return Gather(f, t)
	})
}

// IndexSelect picks the entries idx (a 1-D tensor of whole numbers, no
// gradient) along axis (negative counts from the end), as PyTorch's
// index_select: the result has x's shape with len(idx) on axis. Indices
// out of 0..n-1 are clamped (they never read outside x; PyTorch refuses
// them). The gradient scatter-adds back (Gather's).
func IndexSelect(x *Tensor, axis int, idx *Tensor) *Tensor {
	needTensors("IndexSelect", x, idx)
	axis = normAxis("IndexSelect", x, axis)
	if idx.Rank() != 1 {
		panic(fmt.Sprintf("core.IndexSelect: indices of shape %v, want 1-D", idx.shape))
	}
	defer x.dev.composite("IndexSelect")()
	return alongFront(x, axis, func(f *Tensor) *Tensor { return Gather(f, idx) })
}

// flatIndex is, for each position p of an index tensor idx of x's rank
// (idx.shape[d] <= x.shape[d] off axis), the row-major offset in x of p
// with p[axis] replaced by idx[p] clamped to the axis: the host's base
// offsets (a Constant) plus the device's idx times the axis's stride. It
// is 1-D, idx.Len() long.
func flatIndex(fn string, x *Tensor, axis int, idx *Tensor) *Tensor {
	if idx.Rank() != x.Rank() {
		panic(fmt.Sprintf("core.%s: indices of shape %v and input of shape %v differ in rank", fn, idx.shape, x.shape))
	}
	for d := range idx.shape {
		if d != axis && idx.shape[d] > x.shape[d] {
			panic(fmt.Sprintf("core.%s: indices of shape %v exceed input of shape %v on axis %d", fn, idx.shape, x.shape, d))
		}
	}
	if x.Len() >= 1<<24 {
		panic(fmt.Sprintf("core.%s: input of shape %v has %d elements: offsets from 2^24 on are not exact in f32", fn, x.shape, x.Len()))
	}
	stride := make([]int, x.Rank())
	s := 1
	for d := x.Rank() - 1; d >= 0; d-- {
		stride[d] = s
		s *= x.shape[d]
	}
	is := slices.Clone(idx.shape)
	base := x.dev.constant(fmt.Sprintf("gather base %v %v %d", x.shape, is, axis), func() []float32 {
		v := make([]float32, backend.NumElems(is))
		p := make([]int, len(is))
		for i := range v {
			o := 0
			for d, k := range p {
				if d != axis {
					o += k * stride[d]
				}
			}
			v[i] = float32(o)
			for d := len(p) - 1; d >= 0; d-- { // next position, row-major
				if p[d]++; p[d] < is[d] {
					break
				}
				p[d] = 0
			}
		}
		return v
	}, is...)
	n := x.shape[axis]
	at := Affine(Clamp(detach(fn, idx), 0, float32(n-1)), float32(stride[axis]), 0)
	return Reshape(Add(base, at), idx.Len())
}

// GatherAxis is PyTorch's gather(x, axis, idx): idx has x's rank, each
// dimension off axis at most x's, and out[p] = x[p with p[axis] =
// idx[p]], of idx's shape. Indices are whole numbers (no gradient); ones
// out of 0..n-1 are clamped to the axis (PyTorch refuses them), so they
// never read outside x (a NaN index reads x's first element). It is one Gather of x's elements by offsets the
// host and the device compute together; its gradient scatter-adds back.
// x must have fewer than 2^24 elements (offsets are f32).
func GatherAxis(x *Tensor, axis int, idx *Tensor) *Tensor {
	needTensors("GatherAxis", x, idx)
	axis = normAxis("GatherAxis", x, axis)
	defer x.dev.composite("GatherAxis")()
	flat := flatIndex("GatherAxis", x, axis, idx)
	return Reshape(Gather(Reshape(x, x.Len()), flat), idx.shape...)
}

// ScatterAdd is PyTorch's x.scatter_add(axis, idx, src), out of place:
// x plus, for each position p of idx, src[p] added at x's position p
// with p[axis] = idx[p]. idx has x's rank, each dimension at most src's
// and (off axis) at most x's; src beyond idx's shape is ignored, as in
// PyTorch. Indices are whole numbers (no gradient), clamped to the axis.
// The gradient is the upstream one for x and its gather for src. x must
// have fewer than 2^24 elements.
func ScatterAdd(x *Tensor, axis int, idx, src *Tensor) *Tensor {
	needTensors("ScatterAdd", x, idx, src)
	axis = normAxis("ScatterAdd", x, axis)
	defer x.dev.composite("ScatterAdd")()
	src = fitSource("ScatterAdd", idx, src)
	flat := flatIndex("ScatterAdd", x, axis, idx)
	return Add(x, Reshape(scatterAddRows(Reshape(src, src.Len()), flat, x.Len()), x.shape...))
}

// Scatter is PyTorch's x.scatter(axis, idx, src), out of place: x with,
// for each position p of idx, the element at p with p[axis] = idx[p]
// replaced by src[p]; shapes and indices as ScatterAdd. Where several
// positions of idx name one element (PyTorch leaves that undefined) it
// gets the mean of their sources, on every backend (a written -0 comes
// out +0: the sources are summed into zeros). The gradient goes to x
// where nothing was written and, divided alike, to the sources.
func Scatter(x *Tensor, axis int, idx, src *Tensor) *Tensor {
	needTensors("Scatter", x, idx, src)
	axis = normAxis("Scatter", x, axis)
	defer x.dev.composite("Scatter")()
	src = fitSource("Scatter", idx, src)
	flat := flatIndex("Scatter", x, axis, idx)
	m := src.Len()
	count := scatterAddRows(x.dev.Full(1, m), flat, x.Len())
	sum := scatterAddRows(Reshape(src, m), flat, x.Len())
	mean := Div(sum, Maximum(count, x.dev.Full(1))) // 0/0 never happens
	return Where(Reshape(count, x.shape...), Reshape(mean, x.shape...), x)
}

// fitSource checks src against the indices and cuts it to their shape.
func fitSource(fn string, idx, src *Tensor) *Tensor {
	if src.Rank() != idx.Rank() {
		panic(fmt.Sprintf("core.%s: source of shape %v and indices of shape %v differ in rank", fn, src.shape, idx.shape))
	}
	for d := range idx.shape {
		if idx.shape[d] > src.shape[d] {
			panic(fmt.Sprintf("core.%s: indices of shape %v exceed source of shape %v on axis %d", fn, idx.shape, src.shape, d))
		}
	}
	for d := range idx.shape {
		if idx.shape[d] < src.shape[d] {
			src = Narrow(src, d, 0, idx.shape[d])
		}
	}
	return src
}

// Slice is Python's x[start:stop:step] along axis (negative counts from
// the end), as PyTorch slicing: a negative start or stop counts from the
// end of the axis, both are then clamped to 0..n (so math.MaxInt as stop
// means "to the end", math.MinInt as start "from the beginning"), and
// step must be > 0 (PyTorch refuses negative steps; Flip reverses). The
// slice must not be empty (ag has no empty tensors). Step 1 is a
// SliceRows, another step a Gather of rows.
func Slice(x *Tensor, axis, start, stop, step int) *Tensor {
	needTensors("Slice", x)
	axis = normAxis("Slice", x, axis)
	n := x.shape[axis]
	if step <= 0 {
		panic(fmt.Sprintf("core.Slice: step %d, want > 0 (Flip reverses an axis)", step))
	}
	clampEnd := func(i int) int {
		if i < 0 {
			i = max(i+n, 0) // i+n cannot overflow: i < 0 <= n
		}
		return min(i, n)
	}
	b, e := clampEnd(start), clampEnd(stop)
	if b >= e {
		panic(fmt.Sprintf("core.Slice: [%d:%d:%d] of axis %d of shape %v is empty", start, stop, step, axis, x.shape))
	}
	defer x.dev.composite("Slice")()
	idx := make([]int, 0, (e-b+step-1)/step)
	for i := b; i < e; i += step {
		idx = append(idx, i)
	}
	return takeIndex(x, axis, fmt.Sprintf("slice %d:%d:%d", b, e, step), idx)
}

// Narrow is PyTorch's narrow: length entries of axis from start (a
// negative start counts from the end), which must lie inside the axis.
func Narrow(x *Tensor, axis, start, length int) *Tensor {
	needTensors("Narrow", x)
	axis = normAxis("Narrow", x, axis)
	n := x.shape[axis]
	s := start
	if s < 0 {
		s += n
	}
	if length < 1 || !backend.InRange(s, length, n) {
		panic(fmt.Sprintf("core.Narrow: start %d, length %d outside axis %d of shape %v", start, length, axis, x.shape))
	}
	if length == n {
		return x
	}
	defer x.dev.composite("Narrow")()
	return alongFront(x, axis, func(f *Tensor) *Tensor { return SliceRows(f, s, length) })
}

// SplitSizes cuts x along axis into consecutive pieces of the given
// sizes, which must add up to the axis's length (PyTorch's split with a
// list of sizes).
func SplitSizes(x *Tensor, axis int, sizes ...int) []*Tensor {
	needTensors("SplitSizes", x)
	axis = normAxis("SplitSizes", x, axis)
	total := 0
	for _, s := range sizes {
		if s < 1 {
			panic(fmt.Sprintf("core.SplitSizes: sizes %v: each must be >= 1", sizes))
		}
		total += s
	}
	if total != x.shape[axis] {
		panic(fmt.Sprintf("core.SplitSizes: sizes %v add up to %d, axis %d of shape %v is %d long", sizes, total, axis, x.shape, x.shape[axis]))
	}
	defer x.dev.composite("SplitSizes")()
	out := make([]*Tensor, len(sizes))
	at := 0
	for i, s := range sizes {
		out[i] = Narrow(x, axis, at, s)
		at += s
	}
	return out
}

// Split cuts x along axis into pieces of size entries, the last one
// shorter when size does not divide the axis (PyTorch's split with an
// int).
func Split(x *Tensor, axis, size int) []*Tensor {
	needTensors("Split", x)
	axis = normAxis("Split", x, axis)
	if size < 1 {
		panic(fmt.Sprintf("core.Split: size %d, want >= 1", size))
	}
	n := x.shape[axis]
	var sizes []int
	for at := 0; at < n; at += size {
		sizes = append(sizes, min(size, n-at))
	}
	return SplitSizes(x, axis, sizes...)
}

// Chunk cuts x along axis into at most chunks pieces of ceil(n/chunks)
// entries, the last one shorter, as PyTorch's chunk (which may return
// fewer than chunks pieces: 5 entries in 4 chunks are 2, 2, 1).
func Chunk(x *Tensor, axis, chunks int) []*Tensor {
	needTensors("Chunk", x)
	axis = normAxis("Chunk", x, axis)
	if chunks < 1 {
		panic(fmt.Sprintf("core.Chunk: %d chunks, want >= 1", chunks))
	}
	n := x.shape[axis]
	return Split(x, axis, (n+chunks-1)/chunks)
}

// Flip reverses x along each of axes (negative count from the end), as
// PyTorch's flip.
func Flip(x *Tensor, axes ...int) *Tensor {
	needTensors("Flip", x)
	seen := make([]bool, x.Rank())
	for _, a := range axes {
		a2 := normAxis("Flip", x, a)
		if seen[a2] {
			panic(fmt.Sprintf("core.Flip: axis %d given twice (axes %v)", a, axes))
		}
		seen[a2] = true
	}
	defer x.dev.composite("Flip")()
	for a, on := range seen {
		n := x.shape[a]
		if !on || n == 1 {
			continue
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = n - 1 - i
		}
		x = takeIndex(x, a, "flip", idx)
	}
	return x
}

// Roll shifts x along axis by shift entries, circularly: out[i] =
// x[(i - shift) mod n], as PyTorch's roll (shift may be negative or
// larger than the axis).
func Roll(x *Tensor, axis, shift int) *Tensor {
	needTensors("Roll", x)
	axis = normAxis("Roll", x, axis)
	n := x.shape[axis]
	s := ((shift % n) + n) % n
	if s == 0 {
		return x
	}
	defer x.dev.composite("Roll")()
	idx := make([]int, n)
	for i := range idx {
		idx[i] = (i - s + n) % n
	}
	return takeIndex(x, axis, fmt.Sprintf("roll %d", s), idx)
}

// Repeat tiles x reps[d] times along each axis d, as PyTorch's repeat:
// len(reps) must be at least x's rank, x counting as having leading axes
// of size 1 for the extra ones, and the result (whose shape is x's times
// reps) has at most backend.MaxRank (6) dimensions. The gradient sums the copies.
func Repeat(x *Tensor, reps ...int) *Tensor {
	needTensors("Repeat", x)
	if len(reps) < x.Rank() {
		panic(fmt.Sprintf("core.Repeat: %d repetitions %v for shape %v: want one per axis at least", len(reps), reps, x.shape))
	}
	return repeat("Repeat", x, reps)
}

// Tile is numpy's and PyTorch's tile: Repeat, but reps shorter than x's
// rank count as having leading 1s.
func Tile(x *Tensor, reps ...int) *Tensor {
	needTensors("Tile", x)
	if len(reps) < x.Rank() {
		reps = append(slices.Repeat([]int{1}, x.Rank()-len(reps)), reps...)
	}
	return repeat("Tile", x, reps)
}

func repeat(fn string, x *Tensor, reps []int) *Tensor {
	shape := slices.Repeat([]int{1}, len(reps)-x.Rank())
	shape = append(shape, x.shape...)
	out := make([]int, len(reps))
	for d, r := range reps {
		if r < 1 {
			panic(fmt.Sprintf("core.%s: repetitions %v for shape %v: each must be >= 1", fn, reps, x.shape))
		}
		out[d] = shape[d] * r
	}
	checkShape(fn, out)
	defer x.dev.composite(fn)()
	x = Reshape(x, shape...)
	// Axes of size 1 broadcast (one Expand at the end); the others take
	// their entries i mod n.
	for d, r := range reps {
		n := shape[d]
		if r == 1 || n == 1 {
			continue
		}
		idx := make([]int, n*r)
		for i := range idx {
			idx[i] = i % n
		}
		x = takeIndex(x, d, fmt.Sprintf("repeat %d", r), idx)
	}
	return Expand(x, out...)
}

// PadMode is how Pad fills the new entries.
type PadMode int

const (
	// PadConstant fills with the value given.
	PadConstant PadMode = iota
	// PadReflect mirrors the axis without repeating its edge (3 2 | 1 2 3
	// 4 | 3 2), as PyTorch's "reflect"; each pad must be < the axis.
	PadReflect
	// PadReplicate repeats the edge entry (1 1 | 1 2 3 | 3 3).
	PadReplicate
	// PadCircular wraps around (2 3 | 1 2 3 | 1 2); each pad must be <=
	// the axis.
	PadCircular
)

// String names the mode as PyTorch's F.pad does.
func (m PadMode) String() string {
	switch m {
	case PadConstant:
		return "constant"
	case PadReflect:
		return "reflect"
	case PadReplicate:
		return "replicate"
	case PadCircular:
		return "circular"
	}
	return fmt.Sprintf("PadMode(%d)", int(m))
}

// Pad widens x as PyTorch's F.pad: pads are (before, after) pairs, the
// first pair for the last axis, the next for the one before it, and so
// on (so Pad(x, PadConstant, 0, 1, 2) adds one entry before and two after
// along the last axis). Pads are >= 0 (PyTorch's negative constant pads,
// which crop, are refused: Narrow crops). value is used by PadConstant
// only. Unlike PyTorch, every mode pads any axis, at every rank.
func Pad(x *Tensor, mode PadMode, value float32, pads ...int) *Tensor {
	needTensors("Pad", x)
	if len(pads)%2 != 0 || len(pads)/2 > x.Rank() {
		panic(fmt.Sprintf("core.Pad: %d pads %v for shape %v: want (before, after) pairs, at most one per axis", len(pads), pads, x.shape))
	}
	if mode < PadConstant || mode > PadCircular {
		panic(fmt.Sprintf("core.Pad: unknown mode %v", mode))
	}
	for i, p := range pads {
		axis := x.Rank() - 1 - i/2
		n := x.shape[axis]
		switch {
		case p < 0:
			panic(fmt.Sprintf("core.Pad: pad %d of %v is negative (Narrow crops)", p, pads))
		case mode == PadReflect && p >= n:
			panic(fmt.Sprintf("core.Pad: reflect pad %d of axis %d of shape %v: want < %d", p, axis, x.shape, n))
		case mode == PadCircular && p > n:
			panic(fmt.Sprintf("core.Pad: circular pad %d of axis %d of shape %v: want <= %d", p, axis, x.shape, n))
		}
	}
	defer x.dev.composite("Pad")()
	for i := 0; i < len(pads); i += 2 {
		axis := x.Rank() - 1 - i/2
		lo, hi := pads[i], pads[i+1]
		if lo == 0 && hi == 0 {
			continue
		}
		if mode == PadConstant {
			parts := []*Tensor{x}
			if lo > 0 {
				s := slices.Clone(x.shape)
				s[axis] = lo
				parts = append([]*Tensor{x.dev.Full(value, s...)}, parts...)
			}
			if hi > 0 {
				s := slices.Clone(x.shape)
				s[axis] = hi
				parts = append(parts, x.dev.Full(value, s...))
			}
			x = Concat(axis, parts...)
			continue
		}
		n := x.shape[axis]
		idx := make([]int, 0, lo+n+hi)
		for j := -lo; j < n+hi; j++ {
			k := j
			switch mode {
			case PadReflect:
				if k < 0 {
					k = -k
				} else if k >= n {
					k = 2*(n-1) - k
				}
			case PadReplicate:
				k = min(max(k, 0), n-1)
			case PadCircular:
				k = (k%n + n) % n
			}
			idx = append(idx, k)
		}
		x = takeIndex(x, axis, fmt.Sprintf("pad %v %d %d", mode, lo, hi), idx)
	}
	return x
}

// Argsort returns the indices (f32 whole numbers, no gradient) that sort
// x along axis (negative counts from the end), ascending or descending,
// as PyTorch's argsort(stable=True): equal values keep their index order
// (-0 and +0 are equal), and NaN sorts as the largest value (last
// ascending, first descending; NaNs among themselves by index).
//
// It is a composite: a bitonic sorting network over the row padded to a
// power of two P, log2(P)(log2(P)+1)/2 stages, each a gather of every
// element's partner (a Constant permutation), an exact comparison and a
// select, about 20 elementwise ops. That is O(n log^2 n) work and O(n) memory per row of n (the
// axis must be at most 2^20 long, for the sort keys to stay exact in f32).
func Argsort(x *Tensor, axis int, descending bool) *Tensor {
	axis = argAxis("Argsort", x, axis)
	if n := x.shape[axis]; n > maxSortLen {
		panic(fmt.Sprintf("core.Argsort: %d elements along axis %d of %v: at most %d sort (the keys are exact in f32 up to there)", n, axis, x.shape, maxSortLen))
	}
	defer x.dev.composite("Argsort")()
	return alongFront(detach("Argsort", x), axis, func(x *Tensor) *Tensor {
		return argsortRows(x, descending)
	})
}

// maxSortLen is the longest axis Argsort sorts: its keys' differences
// reach 11 times the padded length, which must stay below 2^24.
const maxSortLen = 1 << 20

// argsortRows is Argsort along the first axis.
//
// Each element carries an order key of three parts, compared in turn: its
// value, as two finite f32 numbers v1 and v2 (below), its group g (-1, 0,
// 1 for -Inf, finite, +Inf; NaN beyond the infinities, 2 ascending or -2
// descending; 3 for the padding, which sorts last and is dropped), and
// its index. The group and the index share one exact whole number t =
// W*g + index (W = 2P > any index difference). Descending sorts the
// negated values ascending, which keeps ties in index order.
//
// The value a (clamped to the finite range; ±maxF32 at NaN and the
// padding, in the direction of their group, so that the value never
// contradicts the group) is held as v1 = a*2^-24 and v2 = a*2^64 clamped
// to ±2^126: the two differences have the sign of a's (or are 0), their
// sum is finite, and it is 0 only where a equals its partner (±0 equal)
// and at least 2^-85 in size elsewhere (v2's where both are below 2^62,
// so no subnormal difference is flushed; v1's above). Comparing the sum
// plus (difference of t)*2^-110, which is at most 2^-86 in size and never
// subnormal, orders by value, then group, then index: the order of
// cmpSign (Greater) exactly, in finite arithmetic every device agrees on.
// The select is take*partner + (1-take)*self, exact for finite values.
func argsortRows(x *Tensor, descending bool) *Tensor {
	n := x.shape[0]
	if n == 1 {
		return x.dev.Full(0, x.shape...)
	}
	b, shape := x.Len()/n, x.shape
	x = Reshape(x, n, b)
	p := 1
	for p < n {
		p *= 2
	}
	w := float32(2 * p)
	nan := isNaN(x)
	c := keep(Affine(nan, -1, 1), x) // NaN as -0, its place set below
	nanGroup, nanValue := float32(2), float32(maxF32)
	if descending {
		c, nanGroup, nanValue = Neg(c), -2, -maxF32
	}
	a := Clamp(c, -maxF32, maxF32)
	g := Add(Sign(Sub(c, a)), Scale(nan, nanGroup))
	a = Add(a, Scale(nan, nanValue))
	iota := x.dev.constant(fmt.Sprintf("argsort iota %d", n), func() []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i)
		}
		return v
	}, n, 1)
	t := Add(Scale(g, w), iota)
	v1 := Scale(a, 0x1p-24)
	v2 := Clamp(Scale(a, 0x1p64), -0x1p126, 0x1p126)
	if p > n {
		pad := x.dev.constant(fmt.Sprintf("argsort pad %d %d", n, p), func() []float32 {
			v := make([]float32, p-n)
			for i := range v {
				v[i] = 3*w + float32(n+i)
			}
			return v
		}, p-n, 1)
		t = ConcatRows(t, Add(x.dev.Full(0, p-n, b), pad))
		v1 = ConcatRows(v1, x.dev.Full(maxF32*0x1p-24, p-n, b))
		v2 = ConcatRows(v2, x.dev.Full(0x1p126, p-n, b))
	}
	// Bitonic merge stages: in stage (k, j) element i meets i^j; it keeps
	// the smaller of the two when it is the lower of the pair (i&j == 0)
	// in an ascending block (i&k == 0) or the upper in a descending one,
	// else the larger: the comparison times bitSign(j) times bitSign(k) is
	// negative where it takes its partner.
	for k := 2; k <= p; k *= 2 {
		for j := k / 2; j >= 1; j /= 2 {
			perm := x.dev.constant(fmt.Sprintf("argsort xor %d of %d", j, p), func() []float32 {
				v := make([]float32, p)
				for i := range v {
					v[i] = float32(i ^ j)
				}
				return v
			}, p)
			pt, p1, p2 := Gather(t, perm), Gather(v1, perm), Gather(v2, perm)
			d := Sub(pt, t)
			s := Add(Add(Sub(p1, v1), Sub(p2, v2)), Scale(d, 0x1p-110))
			s = Mul(s, bitSign(x.dev, j, p))
			if k < p {
				s = Mul(s, bitSign(x.dev, k, p))
			}
			take := inside(s, float32(math.Inf(-1)), 0) // s is finite and never 0
			stay := Affine(take, -1, 1)
			t = Add(t, Mul(take, d)) // whole numbers: exact
			v1 = Add(Mul(take, p1), Mul(stay, v1))
			v2 = Add(Mul(take, p2), Mul(stay, v2))
		}
	}
	// The first n hold the elements (the padding sorted last): the index
	// is t - W*g, with g counted back from thresholds of t.
	t = SliceRows(t, 0, n)
	g = x.dev.Full(-2, n, b)
	for grp := -1; grp <= 2; grp++ {
		g = Add(g, inside(t, float32(grp)*w-0.5, inf))
	}
	return Reshape(Sub(t, Scale(g, w)), shape...)
}

// bitSign is the [p, 1] Constant that is -1 at the indices i with i&bit
// set and 1 elsewhere.
func bitSign(d *Device, bit, p int) *Tensor {
	return d.constant(fmt.Sprintf("argsort bit %d of %d", bit, p), func() []float32 {
		v := make([]float32, p)
		for i := range v {
			v[i] = 1
			if i&bit != 0 {
				v[i] = -1
			}
		}
		return v
	}, p, 1)
}

// Sort returns x sorted along axis (negative counts from the end) and the
// indices that sort it, as PyTorch's sort(stable=True): see Argsort for
// the order of ties and NaN, and its cost. The values are GatherAxis of x
// by the indices, so the gradient flows back to where each came from.
// The values consume the indices: to read both, Keep the indices or pass
// both to Device.Sync before reading either.
func Sort(x *Tensor, axis int, descending bool) (values, indices *Tensor) {
	axis = argAxis("Sort", x, axis)
	defer x.dev.composite("Sort")()
	indices = Argsort(x, axis, descending)
	return GatherAxis(x, axis, indices), indices
}

// TopK returns the k largest (or, with largest false, smallest) values of
// x along axis, in order, and their indices: PyTorch's topk(sorted=True),
// with ties in the order of sort(descending=largest, stable=True) (lower
// index first; PyTorch's own topk leaves the order of ties unspecified)
// and NaN the largest. k must be in 1..n. It costs what Argsort does.
// To read both results, Keep the indices (as for Sort).
func TopK(x *Tensor, k, axis int, largest bool) (values, indices *Tensor) {
	axis = argAxis("TopK", x, axis)
	if n := x.shape[axis]; k < 1 || k > n {
		panic(fmt.Sprintf("core.TopK: k = %d for axis %d of shape %v, want 1..%d", k, axis, x.shape, n))
	}
	defer x.dev.composite("TopK")()
	indices = Narrow(Argsort(x, axis, largest), axis, 0, k)
	return GatherAxis(x, axis, indices), indices
}
