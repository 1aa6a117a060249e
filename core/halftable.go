package core

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ag-go/ag/backend"
)

// ErrUnsupported is wrapped by the errors of requests the device cannot
// serve, such as a 16-bit format it cannot convert back to f32 (bf16 on
// ggml-vulkan): callers branch on it with errors.Is, to pick another
// format or device.
var ErrUnsupported = errors.New("not supported by the device")

// unsupportedErr is an error whose text is its message alone and which
// unwraps to ErrUnsupported.
type unsupportedErr struct{ msg string }

func (e *unsupportedErr) Error() string { return e.msg }
func (e *unsupportedErr) Unwrap() error { return ErrUnsupported }

func unsupportedf(format string, args ...any) error {
	return &unsupportedErr{fmt.Sprintf(format, args...)}
}

// HalfTable is a table of Rows() rows of Width() values kept on a device in
// 16 bits each, f16 or bf16: half the device memory of an f32 table of the
// same shape, for tables large enough for that to matter (a replay buffer
// of millions of records, an embedding table). Rows are written and read
// from the host (WriteRows, ReadRows) and gathered by index on the device
// (Gather), which converts them to f32 there, so only the indices cross
// the bus.
//
// Rounding. WriteRows rounds each value to the table's format on the host,
// to nearest with ties to even (backend.F16Bits, BF16Bits): f16 keeps 11
// significant bits and its subnormals (multiples of 2^-24), and holds
// magnitudes up to 65504, values from 65520 on becoming ±Inf; bf16 keeps 8
// significant bits and f32's range. A NaN is stored as a quiet NaN of its
// sign. ReadRows and Gather give back exactly the stored values (every
// f16 and bf16 value is an f32), but that a NaN's sign and payload from
// Gather are the device's (NVIDIA's conversion gives 0x7fffffff).
//
// Layout. A row is backend.PackedLen(width) 32-bit words on the device, two
// values to a word, an odd width's last word padded with a zero half, so
// that rows are whole words that get_rows can gather (see
// backend.OpUnpackF16's rows form). The words are never a Tensor: nothing
// but Gather's conversion computes with them.
//
// Lifetime. The words are a persistent value like Device.Zeros's, outside
// any run's plan: they survive any number of steps, Device.Close moves
// them to the host (bit for bit) and their next use uploads them again,
// and a captured step that gathers from the table reads the rows written
// between its replays. Release frees them at once; a table that is garbage
// collected frees them too, but never while a pending Gather reads them.
//
// A HalfTable is safe for concurrent use, like its Device.
type HalfTable struct {
	dev         *Device
	rows, width int
	words       int // per row: backend.PackedLen(width)
	prec        Precision
	mu          sync.Mutex // guards tab; held across each method, so Release waits for a write
	tab         *Tensor    // [rows, words] words; nil once released
}

// NewHalfTable allocates a table of rows rows of width values stored as p
// (PrecisionF16 or PrecisionBF16) on d, zero-filled on the device (no
// upload). It takes 4*rows*PackedLen(width) bytes. A device that cannot
// convert p back to f32 (bf16 on ggml-vulkan: unpack_bf16 is in its
// Caps.Unsupported) returns an error wrapping ErrUnsupported; there is no
// silent fallback to another format.
func (d *Device) NewHalfTable(rows, width int, p Precision) (*HalfTable, error) {
	if rows < 1 || width < 1 {
		return nil, fmt.Errorf("core.Device.NewHalfTable: rows %d and width %d must be positive", rows, width)
	}
	switch p {
	case PrecisionF16, PrecisionBF16:
	case PrecisionF32:
		return nil, fmt.Errorf("core.Device.NewHalfTable: precision %v is not a 16-bit format (an f32 table is Device.Zeros)", p)
	default:
		return nil, fmt.Errorf("core.Device.NewHalfTable: unknown precision %d", int(p))
	}
	words := backend.PackedLen(width)
	if err := backend.CheckShape([]int{rows, words}); err != nil {
		return nil, fmt.Errorf("core.Device.NewHalfTable(%d, %d, %v): %v words: %w", rows, width, p, []int{rows, words}, err)
	}
	d.lock()
	caps := d.caps
	d.mu.Unlock()
	if op := unpackOp(p); !caps.Supports(op) {
		return nil, unsupportedf("core.Device.NewHalfTable(%d, %d, %v): %s cannot read %v values back (%v is in its Caps.Unsupported)", rows, width, p, caps.Name, p, op)
	}
	tab, err := d.Zeros(rows, words)
	if err != nil {
		return nil, fmt.Errorf("core.Device.NewHalfTable(%d, %d, %v): %w", rows, width, p, err)
	}
	return &HalfTable{dev: d, rows: rows, width: width, words: words, prec: p, tab: tab}, nil
}

// Device returns the device the table lives on.
func (h *HalfTable) Device() *Device { return h.dev }

// Rows is the number of rows.
func (h *HalfTable) Rows() int { return h.rows }

// Width is the number of values per row.
func (h *HalfTable) Width() int { return h.width }

// Precision is the 16-bit format the values are stored in.
func (h *HalfTable) Precision() Precision { return h.prec }

// Bytes is the device memory the table takes: 4*Rows()*PackedLen(Width()),
// half of an f32 table's for an even width.
func (h *HalfTable) Bytes() int64 { return 4 * int64(h.rows) * int64(h.words) }

// String describes the table without syncing: "HalfTable[1000 7] f16
// (device)", where the words are on the device, on the host (moved there
// by Device.Close until their next use) or released.
func (h *HalfTable) String() string {
	return fmt.Sprintf("HalfTable[%d %d] %v (%s)", h.rows, h.width, h.prec, h.where())
}

func (h *HalfTable) where() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.tab == nil:
		return "released"
	case h.tab.OnDevice():
		return "device"
	}
	return "host"
}

// OnDevice reports whether the table's words are in device memory now
// (false once released, and while Device.Close has moved them to the host).
func (h *HalfTable) OnDevice() bool { return h.where() == "device" }

// live returns the words, or an error wrapping ErrReleased naming fn.
// Called with h.mu held.
func (h *HalfTable) live(fn string) (*Tensor, error) {
	if h.tab == nil {
		return nil, fmt.Errorf("core.HalfTable.%s: the table: %w", fn, ErrReleased)
	}
	return h.tab, nil
}

// checkRows checks that rows row..row+n-1 lie inside the table.
func (h *HalfTable) checkRows(fn string, row, n int) error {
	if !backend.InRange(row, n, h.rows) {
		return fmt.Errorf("core.HalfTable.%s: rows %d..%d are outside the table of %d rows", fn, row, row+n-1, h.rows)
	}
	return nil
}

// WriteRows writes len(values)/Width() whole rows at rows row, row+1, ...,
// each value rounded to the table's format on the host (see HalfTable), so
// half the bytes of the f32 values cross the bus. Pending work that reads
// the table runs first and sees the old rows; the write has completed when
// WriteRows returns.
func (h *HalfTable) WriteRows(row int, values []float32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	tab, err := h.live("WriteRows")
	if err != nil {
		return err
	}
	if len(values)%h.width != 0 {
		return fmt.Errorf("core.HalfTable.WriteRows: %d values are not whole rows of width %d", len(values), h.width)
	}
	n := len(values) / h.width
	if err := h.checkRows("WriteRows", row, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	words := make([]float32, n*h.words)
	bf := h.prec == PrecisionBF16
	for r := range n {
		backend.PackHalves(words[r*h.words:(r+1)*h.words], values[r*h.width:(r+1)*h.width], bf)
	}
	if err := tab.WriteAt(row*h.words, words); err != nil {
		return fmt.Errorf("core.HalfTable.WriteRows(%d, %d rows): %w", row, n, err)
	}
	return nil
}

// ReadRows returns rows row..row+n-1 as n*Width() values: the stored
// values, converted to f32 on the host. It is a sync point, and only the
// 16-bit values cross the bus.
func (h *HalfTable) ReadRows(row, n int) ([]float32, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tab, err := h.live("ReadRows")
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("core.HalfTable.ReadRows: %d rows, must be non-negative", n)
	}
	if err := h.checkRows("ReadRows", row, n); err != nil {
		return nil, err
	}
	out := make([]float32, n*h.width)
	if n == 0 {
		return out, nil
	}
	words, err := tab.ReadAt(row*h.words, n*h.words)
	if err != nil {
		return nil, fmt.Errorf("core.HalfTable.ReadRows(%d, %d): %w", row, n, err)
	}
	bf := h.prec == PrecisionBF16
	for r := range n {
		backend.UnpackHalves(out[r*h.width:(r+1)*h.width], words[r*h.words:(r+1)*h.words], bf)
	}
	return out, nil
}

// Gather selects rows of the table by the indices idx (a 1-D tensor of
// whole numbers on the table's device) and converts them to f32 on the
// device: a [len(idx), Width()] tensor without gradient, recorded lazily
// like every op. Indices are clamped to 0..Rows()-1 there (rounded to the
// nearest whole number, NaN reading row 0), so no index reads outside the
// table; check indices from the host before making them a tensor. In a
// step that repeats, the indices are an input of the program, which reads
// the table's current rows: writes between runs are seen without
// recompiling.
//
// Like the ops of this package, it panics on a programming error: indices
// of another device or not 1-D, or a released table (the panic value is
// an error wrapping ErrReleased).
func (h *HalfTable) Gather(idx *Tensor) *Tensor {
	if idx == nil {
		panic("core.HalfTable.Gather: the index tensor is nil")
	}
	if idx.dev != h.dev {
		panic(fmt.Sprintf("core.HalfTable.Gather: indices on device %s, the table on %s", idx.dev.label(), h.dev.label()))
	}
	if idx.Rank() != 1 {
		panic(fmt.Sprintf("core.HalfTable.Gather: indices of shape %v, want 1-D", idx.shape))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tab, err := h.live("Gather")
	if err != nil {
		panic(err)
	}
	t := &Tensor{op: unpackOp(h.prec), shape: []int{idx.shape[0], h.width}, gather: true}
	return h.dev.push(t, nil, "HalfTable.Gather", false, tab, idx)
}

// Release frees the table's device memory now instead of at garbage
// collection. Pending work that reads it runs first. Every later use fails
// with an error wrapping ErrReleased (Gather panics with it); Release
// itself returns nil again.
func (h *HalfTable) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tab == nil {
		return nil
	}
	if err := h.tab.Release(); err != nil {
		return fmt.Errorf("core.HalfTable.Release: pending work reading the table failed, nothing was freed: %w", err)
	}
	h.tab = nil
	return nil
}

// gatherNode appends to g the get_rows of a HalfTable.Gather's words:
// n is the Gather's unpack, reading the table's words and the indices
// (n.In); afterwards it reads the gathered words, in the unpack's rows
// form. It returns the get_rows' index.
func gatherNode(g *backend.Graph, t *Tensor, n *backend.Node) int {
	words := g.Nodes[n.In[0]].Shape[1]
	i := len(g.Nodes)
	g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpGetRows, In: n.In, Shape: []int{t.shape[0], words}})
	n.In = []int{i}
	return i
}
