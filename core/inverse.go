package core

import (
	"slices"
	"sync"

	"github.com/ag-go/ag/backend/reference"
)

// Gather's gradient is a scatter-add of the output's rows into the rows
// they came from. On a GPU a scatter-add either loops over every source row
// for each target row (WebGPU) or builds a one-hot matrix of target x
// source rows (ggml-vulkan): quadratic, and for a convolution's im2col
// gather (every input row read by about KH*KW windows) far too slow. When
// the indices are a Constant, the host knows them: the gradient is then
// the sum of a few gathers by inverse tables - table j holds, for each
// target row, its j-th source row - linear in the rows and exact. The few
// rows read very often (a padding row) are summed apart, exactly, by a
// masked reduction.

// inverseMap is the inverse of one constant index table for a gather from
// rows rows.
type inverseMap struct {
	rows, n int       // target rows, source rows
	tables  []*Tensor // [rows] each: a source row, or n (a zero row)
	heavy   []int     // target rows summed apart
	masks   []*Tensor // [n, 1] per heavy row: 1 where the source reads it
	where   *Tensor   // [rows]: a heavy row's place in heavy, else len(heavy)
}

// Bounds of the inverse gather: at most maxInverseTables tables (a row read
// more often is heavy), at most maxHeavy heavy rows.
const (
	maxInverseTables = 32
	maxHeavy         = 4
)

var inverseMu sync.Mutex

// inverseOf returns the inverse map of idx for a gather from rows rows, or
// nil when idx is not a Constant or the map would not pay.
func inverseOf(idx *Tensor, rows int) *inverseMap {
	if idx.constValues() == nil || idx.Rank() != 1 {
		return nil
	}
	inverseMu.Lock()
	defer inverseMu.Unlock()
	if m := idx.gatherInverse(); m != nil && m.rows == rows {
		return m
	}
	d := idx.dev
	n := len(idx.constValues())
	srcs := make([][]int, rows)
	for i, v := range idx.constValues() {
		r := reference.ClampIndex(float64(v), rows) // the devices' index rule
		srcs[r] = append(srcs[r], i)
	}
	var heavy []int
	depth := 0
	for r, s := range srcs {
		if len(s) > maxInverseTables {
			heavy = append(heavy, r)
			continue
		}
		depth = max(depth, len(s))
	}
	if len(heavy) > maxHeavy {
		return nil
	}
	m := &inverseMap{rows: rows, n: n, heavy: heavy}
	for j := range depth {
		t := make([]float32, rows)
		for r, s := range srcs {
			t[r] = float32(n)
			if j < len(s) && !slices.Contains(heavy, r) {
				t[r] = float32(s[j])
			}
		}
		m.tables = append(m.tables, d.Constant(t, rows))
	}
	if len(heavy) > 0 {
		w := make([]float32, rows)
		for r := range w {
			w[r] = float32(len(heavy))
		}
		for h, r := range heavy {
			w[r] = float32(h)
			mask := make([]float32, n)
			for _, i := range srcs[r] {
				mask[i] = 1
			}
			m.masks = append(m.masks, d.Constant(mask, n, 1))
		}
		m.where = d.Constant(w, rows)
	}
	idx.more().inverse = m
	return m
}

// gather is the gradient of Gather(x, idx) for the output gradient g
// ([n, ...]): [rows, ...].
func (m *inverseMap) gather(g *Tensor) *Tensor {
	d := g.dev
	defer d.composite("Gather")()
	shape := slices.Clone(g.shape)
	width := g.Len() / max(1, g.shape[0])
	g2 := Reshape(g, m.n, width)
	gz := ConcatRows(g2, d.Full(0, 1, width)) // row n: zeros
	var out *Tensor
	for _, t := range m.tables {
		part := Gather(gz, t)
		if out == nil {
			out = part
		} else {
			out = Add(out, part)
		}
	}
	if len(m.heavy) > 0 {
		// each heavy row's sum over its sources, exactly: keep gives -0
		// where the mask is 0, so a NaN elsewhere does not enter
		sums := make([]*Tensor, 0, len(m.heavy)+1)
		for _, mask := range m.masks {
			sums = append(sums, SumAxis(keep(mask, g2), 0, true))
		}
		sums = append(sums, d.Full(0, 1, width))
		part := Gather(Concat(0, sums...), m.where)
		if out == nil {
			out = part
		} else {
			out = Add(out, part)
		}
	}
	if out == nil {
		out = d.Full(0, m.rows, width)
	}
	shape[0] = m.rows
	return Reshape(out, shape...)
}
