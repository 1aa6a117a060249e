// Package data feeds training steps. A Loader keeps a dataset on the device
// and serves it in batches drawn by index on the device: only a batch's
// indices cross the bus, as ggmlR's ag_buffer tables are read. It shuffles
// per epoch (from a seed, reproducibly) and keeps or drops the last short
// batch, like PyTorch's DataLoader over a TensorDataset.
package data

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
)

// maxRows is the most rows a Loader serves: the IR's indices are float32,
// whole numbers exact up to 2^24.
const maxRows = 1 << 24

// Options configure a Loader.
type Options struct {
	Batch    int    // rows per batch, at least 1
	Shuffle  bool   // a new order each epoch
	DropLast bool   // leave out the last batch when it is short
	Seed     uint64 // the shuffles' seed: the same seed, the same orders
}

// Table is one host array of a dataset: Data holds Shape's elements, rows
// along the first dimension.
type Table struct {
	Data  []float32
	Shape []int
}

// Loader serves the rows of one or more tables (inputs, targets, ...) in
// batches. It is not safe for concurrent use.
type Loader struct {
	tables []*core.Tensor
	n      int
	opt    Options
	rng    *rand.Rand
	order  []int
	pos    int
	epoch  int
}

// New uploads each table once and returns a Loader over their rows; every
// table must have the same number of rows.
func New(dev *core.Device, opt Options, tables ...Table) (*Loader, error) {
	if dev == nil {
		return nil, errors.New("data.New: nil device")
	}
	ts := make([]*core.Tensor, len(tables))
	for i, t := range tables {
		n := 1
		for _, d := range t.Shape {
			if d < 1 {
				return nil, fmt.Errorf("data.New: table %d: shape %v has a dimension below 1", i, t.Shape)
			}
			if n < 0 || n > len(t.Data)/d {
				n = -1 // more elements than values (n*d might overflow to their number)
				continue
			}
			n *= d
		}
		if len(t.Shape) == 0 || n != len(t.Data) {
			return nil, fmt.Errorf("data.New: table %d: %d values for shape %v (want rows first, rank 1 or more)", i, len(t.Data), t.Shape)
		}
		ts[i] = dev.Tensor(t.Data, t.Shape...)
	}
	return FromDevice(opt, ts...)
}

// FromDevice returns a Loader over tensors already on one device (rows
// along the first dimension), such as the tables of package buffer.
func FromDevice(opt Options, tables ...*core.Tensor) (*Loader, error) {
	if len(tables) == 0 {
		return nil, errors.New("data.FromDevice: no tables")
	}
	if opt.Batch < 1 {
		return nil, fmt.Errorf("data.FromDevice: batch %d, want 1 or more", opt.Batch)
	}
	n := -1
	for i, t := range tables {
		if t == nil {
			return nil, fmt.Errorf("data.FromDevice: table %d is nil", i)
		}
		s := t.Shape()
		if len(s) == 0 {
			return nil, fmt.Errorf("data.FromDevice: table %d is a scalar, want rows along its first dimension", i)
		}
		if t.Device() != tables[0].Device() {
			return nil, fmt.Errorf("data.FromDevice: table %d is on device %v, table 0 on %v", i, t.Device(), tables[0].Device())
		}
		if n >= 0 && s[0] != n {
			return nil, fmt.Errorf("data.FromDevice: table %d has %d rows, table 0 has %d", i, s[0], n)
		}
		n = s[0]
	}
	if n == 0 {
		return nil, errors.New("data.FromDevice: the tables have no rows")
	}
	if n > maxRows {
		return nil, fmt.Errorf("data.FromDevice: %d rows, at most %d: indices are float32 on the device, exact only up to 2^24", n, maxRows)
	}
	if opt.DropLast && n < opt.Batch {
		return nil, fmt.Errorf("data.FromDevice: %d rows make no full batch of %d, and DropLast is set", n, opt.Batch)
	}
	l := &Loader{tables: tables, n: n, opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, 0x6461746a))}
	l.newEpoch()
	return l, nil
}

// newEpoch sets the order of the next epoch's rows.
func (l *Loader) newEpoch() {
	if l.order == nil {
		l.order = make([]int, l.n)
	}
	for i := range l.order {
		l.order[i] = i
	}
	if l.opt.Shuffle {
		l.rng.Shuffle(l.n, func(i, j int) { l.order[i], l.order[j] = l.order[j], l.order[i] })
	}
	l.pos = 0
}

// Rows is the number of rows of the dataset.
func (l *Loader) Rows() int { return l.n }

// Batches is the number of batches of an epoch.
func (l *Loader) Batches() int {
	if l.opt.DropLast {
		return l.n / l.opt.Batch
	}
	return (l.n-1)/l.opt.Batch + 1 // not (n + batch - 1)/batch, which overflows for a huge batch
}

// Epoch is the number of epochs finished.
func (l *Loader) Epoch() int { return l.epoch }

// NextIndices returns the row indices of the next batch, as floats ready to
// be a Capture input (core.In(idx, len(idx))) that a captured step gathers
// with core.Gather; false when the epoch is over, after which the next call
// starts a new one (reshuffled).
func (l *Loader) NextIndices() ([]float32, bool) {
	rest := l.n - l.pos
	if rest == 0 || (l.opt.DropLast && rest < l.opt.Batch) {
		l.epoch++
		l.newEpoch()
		return nil, false
	}
	k := min(l.opt.Batch, rest)
	idx := make([]float32, k)
	for i := range idx {
		idx[i] = float32(l.order[l.pos+i]) // exact: at most maxRows rows
	}
	l.pos += k
	return idx, true
}

// Next returns the next batch, one tensor per table, gathered on the
// device; false when the epoch is over (see NextIndices).
func (l *Loader) Next() ([]*core.Tensor, bool) {
	idx, ok := l.NextIndices()
	if !ok {
		return nil, false
	}
	it := l.tables[0].Device().Tensor(idx, len(idx))
	out := make([]*core.Tensor, len(l.tables))
	for i, t := range l.tables {
		out[i] = core.Gather(t, it)
	}
	return out, true
}
