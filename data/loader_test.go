package data

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

func open(t testing.TB) *core.Device { return testdev.Open(t) }

// rows makes a table of n rows of width w whose row i holds i*10 + j.
func rows(n, w int) Table {
	d := make([]float32, n*w)
	for i := range n {
		for j := range w {
			d[i*w+j] = float32(i*10 + j)
		}
	}
	return Table{d, []int{n, w}}
}

// Every epoch serves every row once, in a new order when shuffled, the
// same orders for the same seed; x and y stay paired; DropLast drops the
// short batch.
func TestEpochs(t *testing.T) {
	dev := open(t)
	for _, c := range []struct {
		n, batch        int
		shuffle, drop   bool
		batches, served int
	}{
		{10, 4, true, false, 3, 10},
		{10, 4, false, true, 2, 8},
		{8, 4, true, true, 2, 8},
		{3, 5, false, false, 1, 3},
		{3, math.MaxInt, true, false, 1, 3}, // n + batch - 1 would overflow
	} {
		name := fmt.Sprintf("n%d-b%d-shuffle%v-drop%v", c.n, c.batch, c.shuffle, c.drop)
		x, y := rows(c.n, 3), rows(c.n, 1)
		l, err := New(dev, Options{Batch: c.batch, Shuffle: c.shuffle, DropLast: c.drop, Seed: 7}, x, y)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if l.Batches() != c.batches {
			t.Errorf("%s: Batches() = %d, want %d", name, l.Batches(), c.batches)
		}
		var orders [][]int
		for epoch := range 2 {
			var seen []int
			batches := 0
			for {
				b, ok := l.Next()
				if !ok {
					break
				}
				batches++
				xs, err := b[0].Data()
				if err != nil {
					t.Fatal(err)
				}
				ys, _ := b[1].Data()
				for r := range len(ys) {
					row := int(ys[r]) / 10
					if xs[r*3] != float32(row*10) || xs[r*3+2] != float32(row*10+2) {
						t.Errorf("%s: batch row %d: x %v does not pair with y %g", name, r, xs[r*3:r*3+3], ys[r])
					}
					seen = append(seen, row)
				}
			}
			if batches != c.batches || len(seen) != c.served || l.Epoch() != epoch+1 {
				t.Errorf("%s epoch %d: %d batches, %d rows, Epoch() %d; want %d, %d, %d", name, epoch, batches, len(seen), l.Epoch(), c.batches, c.served, epoch+1)
			}
			if distinct := slices.Compact(slices.Sorted(slices.Values(seen))); len(distinct) != len(seen) {
				t.Errorf("%s: a row served twice in one epoch: %v", name, seen)
			}
			orders = append(orders, seen)
		}
		if c.shuffle && c.n > 4 && slices.Equal(orders[0], orders[1]) {
			t.Errorf("%s: two epochs in the same order %v", name, orders[0])
		}
		if !c.shuffle && !slices.IsSorted(orders[0]) {
			t.Errorf("%s: unshuffled rows out of order: %v", name, orders[0])
		}
	}
	a, _ := New(dev, Options{Batch: 3, Shuffle: true, Seed: 1}, rows(9, 1))
	b, _ := New(dev, Options{Batch: 3, Shuffle: true, Seed: 1}, rows(9, 1))
	ia, _ := a.NextIndices()
	ib, _ := b.NextIndices()
	if !slices.Equal(ia, ib) {
		t.Errorf("the same seed gave %v and %v", ia, ib)
	}
}

func TestBadLoaders(t *testing.T) {
	dev := open(t)
	other, err := core.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, c := range []struct {
		want string
		f    func() (*Loader, error)
	}{
		{"data.New: nil device", func() (*Loader, error) { return New(nil, Options{Batch: 1}, rows(2, 1)) }},
		{"data.New: table 0: 5 values for shape [2 3]", func() (*Loader, error) {
			return New(dev, Options{Batch: 1}, Table{make([]float32, 5), []int{2, 3}})
		}},
		{"data.FromDevice: batch 0, want 1 or more", func() (*Loader, error) { return New(dev, Options{}, rows(2, 1)) }},
		{"data.FromDevice: table 1 has 3 rows, table 0 has 2", func() (*Loader, error) { return New(dev, Options{Batch: 1}, rows(2, 1), rows(3, 1)) }},
		{"data.FromDevice: 2 rows make no full batch of 4", func() (*Loader, error) { return New(dev, Options{Batch: 4, DropLast: true}, rows(2, 1)) }},
		{"data.FromDevice: no tables", func() (*Loader, error) { return FromDevice(Options{Batch: 1}) }},
		{"data.FromDevice: table 1 is on device", func() (*Loader, error) {
			return FromDevice(Options{Batch: 1}, dev.Tensor([]float32{1}, 1), other.Tensor([]float32{1}, 1))
		}},
		{"data.New: table 0: shape [0 3] has a dimension below 1", func() (*Loader, error) { return New(dev, Options{Batch: 1}, Table{nil, []int{0, 3}}) }},
		// 2^32 * 2^32 overflows to 0, the number of values
		{"data.New: table 0: 0 values for shape [4294967296 4294967296]", func() (*Loader, error) {
			return New(dev, Options{Batch: 1}, Table{[]float32{}, []int{1 << 32, 1 << 32}})
		}},
	} {
		l, err := c.f()
		if err == nil || !strings.Contains(err.Error(), c.want) || l != nil {
			t.Errorf("got %v, %v; want an error containing %q", l, err, c.want)
		}
	}
}
