package plan

import (
	"slices"
	"testing"
)

func TestGrid(t *testing.T) {
	for _, c := range []struct {
		n, per, most int
		x, y         uint32
	}{
		{0, 64, 65535, 1, 1},
		{64, 64, 65535, 1, 1},
		{65, 64, 65535, 2, 1},
		{10, 1, 4, 4, 3}, // 10 groups folded into rows of 4
		{5, 1, 0, 1, 5},  // no limit stated: one a row
		{1 << 24, 1, 65535, 65535, 257},
	} {
		x, y := DispatchLimits{MaxGroupsPerDim: c.most}.Grid(c.n, c.per)
		if x != c.x || y != c.y {
			t.Errorf("Grid(%d, %d) with %d a dimension = %d x %d, want %d x %d", c.n, c.per, c.most, x, y, c.x, c.y)
		}
		if groups := max((c.n+c.per-1)/c.per, 1); int(x)*int(y) < groups {
			t.Errorf("Grid(%d, %d) covers %d groups of %d", c.n, c.per, x*y, groups)
		}
	}
}

// TestRangeRecords checks the split arithmetic against its definition:
// ranges of records start at aligned offsets in every buffer and the
// widest range fits one binding, and no larger count does both.
func TestRangeRecords(t *testing.T) {
	ok := func(l DispatchLimits, rc int, widths []int) bool {
		al := max(l.OffsetAlign/4, 1)
		for _, w := range widths {
			if rc*w%al != 0 || uint64(rc*w)*4 > l.MaxBindingBytes {
				return false
			}
		}
		return true
	}
	for _, bind := range []uint64{256, 1000, 4096, 128 << 20} {
		for _, align := range []int{4, 8, 16, 64, 256} {
			l := DispatchLimits{MaxBindingBytes: bind, OffsetAlign: align}
			for _, widths := range [][]int{{1}, {2}, {3}, {4}, {1, 2}, {7, 4}, {5, 3}, {100}, {1 << 20}} {
				rc := l.RangeRecords(widths...)
				if rc > 0 && !ok(l, rc, widths) {
					t.Errorf("RangeRecords(%v) with binding %d, align %d = %d: not aligned or too large", widths, bind, align, rc)
				}
				// the next count that is aligned everywhere does not fit
				for next := rc + 1; next <= rc+4096; next++ {
					if ok(l, next, widths) {
						t.Errorf("RangeRecords(%v) with binding %d, align %d = %d, but %d fits", widths, bind, align, rc, next)
						break
					}
				}
			}
		}
	}
	// the counts the webgpu backend splits by, as it computed them before
	l := DispatchLimits{MaxBindingBytes: 128 << 20, OffsetAlign: 256}
	if got, want := l.RangeRecords(1), (128<<20)/4; got != want {
		t.Errorf("RangeRecords(1) = %d, want %d", got, want)
	}
	if got, want := l.RangeRecords(1, 2), (128<<20)/8; got != want {
		t.Errorf("RangeRecords(1, 2) = %d, want %d", got, want)
	}
}

func TestPackParams(t *testing.T) {
	words, offs := PackParams([][]uint32{{1, 2, 3}, nil, {4}}, 8)
	want := []uint32{1, 2, 3, 0, 0, 0, 4}
	if !slices.Equal(words, want) || !slices.Equal(offs, []uint64{0, 16, 24}) {
		t.Errorf("PackParams = %v at %v, want %v at [0 16 24]", words, offs, want)
	}
	if words, offs := PackParams(nil, 256); !slices.Equal(words, []uint32{0}) || len(offs) != 0 {
		t.Errorf("PackParams(nil) = %v, %v; want one word, no offsets", words, offs)
	}
}
