package adversary

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/ag-go/ag/buffer"
	"github.com/ag-go/ag/core"
)

// FuzzOps runs a small program of public calls decoded from the fuzzer's
// bytes - ops with random shapes, axes, slice ranges, read/write offsets,
// gather and buffer indices - on the cpu device, twice: lazily and in eager
// mode. Invariants: no crash and no runtime panic (a panic must name its
// function: a shape mistake), errors name their function, and both runs
// agree bit for bit on every value they both computed (NaN included) - two
// different execution paths of one program, so a planner or kernel bug in
// one shows as a difference.
func FuzzOps(f *testing.F) {
	seeds := [][]byte{
		{0, 3, 2, 1, 4, 5, 6, 7, 8},
		{1, 2, 3, 9, 9, 9, 10, 11, 12, 13},
		{5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 3, 2},
		{7, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f},
		{12, 4, 4, 14, 2, 15, 3, 16, 1},
		{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
		{17, 200, 18, 0x80, 19, 7, 20, 1, 2, 3},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 256 {
			return
		}
		lazy, lp := runProg(t, prog, false, -1)
		eager, ep := runProg(t, prog, true, -1)
		// The modes may legitimately differ in which ops panic or fail (an
		// input spent by a lazy sync is kept in eager mode, a WriteAt waits
		// for pending work that failed): from the first such op on their
		// inputs differ, so both run again up to that op and are compared.
		for i := range min(len(lp), len(ep)) {
			if lp[i] != ep[i] {
				lazy, _ = runProg(t, prog, false, i)
				eager, _ = runProg(t, prog, true, i)
				break
			}
		}
		for i := range min(len(lazy), len(eager)) {
			a, b := lazy[i], eager[i]
			if a == nil || b == nil {
				continue
			}
			if len(a) != len(b) {
				t.Fatalf("value %d: %d elements lazily, %d eagerly", i, len(a), len(b))
			}
			for k := range a {
				if math.Float32bits(a[k]) != math.Float32bits(b[k]) && !(a[k] != a[k] && b[k] != b[k]) {
					t.Fatalf("value %d [%d]: lazy %g, eager %g (program %v)", i, k, a[k], b[k], prog)
				}
			}
		}
	})
}

// trace logs every op (go test -run FuzzOps/NAME -v -args -trace).
var trace = os.Getenv("AG_FUZZ_TRACE") != ""

// bytesIn reads the fuzzer's program.
type bytesIn struct{ b []byte }

func (r *bytesIn) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// dim is a dimension: mostly small, sometimes 0, negative or huge. Huge
// ones are 2^36 and more: too large for any device here, so they exercise
// the refusals; sizes in between would only exhaust the fuzzer's memory.
func (r *bytesIn) dim() int {
	switch c := r.byte(); {
	case c < 200:
		return int(c%9) + 1
	case c < 220:
		return int(c%70) + 1
	case c < 235:
		return -int(c % 3)
	default:
		return 1 << (36 + c%20)
	}
}

// offset is an int offset or count, extremes included.
func (r *bytesIn) offset() int {
	c := r.byte()
	switch {
	case c < 240:
		return int(c%12) - 2
	case c < 248:
		var b [8]byte
		for i := range b {
			b[i] = r.byte()
		}
		return int(binary.LittleEndian.Uint64(b[:]))
	default:
		return []int{math.MaxInt, math.MinInt, math.MaxInt - 1, 1 << 62}[c%4]
	}
}

// value is a float, specials included.
func (r *bytesIn) value() float32 {
	c := r.byte()
	if c >= 250 {
		return []float32{nan, pinf, ninf, 0, 1e-45, 3.4e38}[c-250]
	}
	return float32(int(c)-100) / 8
}

// runProg interprets prog (its first maxOps ops when maxOps >= 0); it
// returns the values of the ops' results, one per op (nil where the op made
// none, panicked, or reading failed), and which ops panicked or returned an
// error.
func runProg(t *testing.T, prog []byte, eager bool, maxOps int) ([][]float32, []bool) {
	d, err := core.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetEager(eager)
	r := &bytesIn{b: prog}
	var ts []*core.Tensor
	var panicked []bool
	pick := func() *core.Tensor {
		dflt := d.Tensor([]float32{1, -2, 3, nan, 0.5, -0.25}, 2, 3)
		if len(ts) == 0 {
			return dflt
		}
		if x := ts[int(r.byte())%len(ts)]; x != nil {
			return x
		}
		return dflt
	}
	var leaves []*core.Tensor // made from host data: realized in both modes
	var buf *buffer.Buffer
	for len(r.b) > 0 && len(ts) != maxOps {
		op := r.byte() % 30
		var out *core.Tensor
		var opErr error
		// Every op reads the same parameters before calling anything, so a
		// panic in one mode cannot shift the bytes the next op reads.
		a, b := pick(), pick()
		d1, d2, d3 := r.dim(), r.dim(), r.dim()
		o1, o2 := r.offset(), r.offset()
		v1, v2, v3 := r.value(), r.value(), r.value()
		k := r.byte()
		msg := callNamed(func() {
			switch op {
			case 0:
				vals := make([]float32, max(0, min(d1*d2, 1<<12)))
				for i := range vals {
					vals[i] = float32(i%7)*v1 - v2
				}
				out = d.Tensor(vals, d1, d2)
				leaves = append(leaves, out)
			case 1:
				out = d.Full(v1, d1, d2)
			case 2:
				out = core.Add(a, b)
			case 3:
				out = core.Mul(a, b)
			case 4:
				out = core.Div(a, b)
			case 5:
				out = core.SliceRows(a, o1, o2)
			case 6:
				out = core.Reshape(a, d1, -1)
			case 7:
				_, opErr = a.ReadAt(o1, o2)
			case 8:
				if len(leaves) == 0 {
					return
				}
				// Only values realized in both modes: WriteAt refuses a
				// pending value, which eager mode would have realized.
				opErr = leaves[int(k)%len(leaves)].WriteAt(o1, []float32{v1, v2})
			case 9:
				out = core.SumAxis(a, o1, k%2 == 0)
			case 10:
				out = core.MaxAxis(a, o1, k%2 == 0)
			case 11:
				out = core.MatMulT(a, b, k%2 == 0, k%4 < 2)
			case 12:
				out = core.Softmax(a)
			case 13:
				out = core.LogSoftmax(a)
			case 14:
				out = core.Transpose(a)
			case 15:
				out = core.Expand(a, d1, d2, d3)
			case 16:
				out = core.ConcatRows(a, b)
			case 17:
				out = core.Gather(a, d.Tensor([]float32{v1, v2, v3}[:k%3+1], int(k%3)+1))
			case 18:
				out = core.Clamp(a, v1, v2)
			case 19:
				out = core.Pow(a, v1)
			case 20:
				if buf == nil {
					var err error
					if buf, err = buffer.New(d, d1, d2); err != nil {
						opErr = err
						return
					}
				}
				opErr = buf.Write(o1, []float32{v1, v2, v3})
				rows, err := buf.GetRows([]int{o1, o2})
				out, opErr = rows, errors.Join(opErr, err)
			case 21:
				out = core.Permute(a, int(k%3), int(k/3%3))
			case 22:
				out = core.OneHot(core.Reshape(a, -1), d1)
			case 23:
				out = core.Sigmoid(core.Tanh(core.ReLU(a)))
			case 24:
				out = core.Where(a, a, b)
			case 25:
				out = core.Greater(a, b)
			case 26:
				out = core.RoundF16(a)
			case 27:
				out = core.ArgMax(a, o1, k%2 == 0)
			case 28:
				out = core.Attention(a, b, b, &core.AttentionOptions{Causal: k%2 == 0})
			case 29:
				out = core.Checkpoint(func(x *core.Tensor) *core.Tensor { return core.Add(core.Tanh(x), b) }, a)
			}
		})
		if msg != "" && msg != "named" {
			t.Fatalf("op %d: %s (program %v)", op, msg, prog)
		}
		if opErr != nil && !strings.Contains(opErr.Error(), "core") && !strings.Contains(opErr.Error(), "buffer") {
			t.Fatalf("op %d: unnamed error %v", op, opErr)
		}
		// An op that panicked or failed in one mode only makes the modes'
		// later inputs differ (see FuzzOps).
		panicked = append(panicked, msg == "named" || opErr != nil)
		ts = append(ts, out)
		if trace {
			t.Logf("eager=%t op %d -> %v panic=%q err=%v", eager, op, out, msg, opErr)
		}
	}
	vals := make([][]float32, len(ts))
	for i, x := range ts {
		if x == nil {
			continue
		}
		v, err := x.Data()
		if err != nil {
			if !strings.Contains(err.Error(), "core") {
				t.Fatalf("value %d: unnamed error %v", i, err)
			}
			continue
		}
		vals[i] = v
	}
	return vals, panicked
}

// callNamed runs f; it returns "" when f returns, "named" when it panics
// naming its function (a shape mistake), else what went wrong.
func callNamed(f func()) (msg string) {
	defer func() {
		r := recover()
		switch {
		case r == nil:
		case isRuntime(r):
			buf := make([]byte, 4096)
			msg = fmt.Sprintf("runtime panic %v\n%s", r, buf[:runtime.Stack(buf, false)])
		case !strings.Contains(fmt.Sprint(r), "core.") && !strings.Contains(fmt.Sprint(r), "buffer."):
			msg = fmt.Sprintf("panic without a function name: %v", r)
		default:
			msg = "named"
		}
	}()
	f()
	return ""
}
