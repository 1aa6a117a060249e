package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// TestSumPrecision sums long rows and long columns and compares every
// result with the float64 sum of the same float32 inputs. The stated bound
// is a relative error of 1e-6 (the goal; a float32 running sum was
// 5.7% off on 2^25 copies of 0.1 and 3e-3 off on 2^24 uniform terms). Inputs
// are positive, so there is no cancellation and relative error is the
// error of the summation alone.
func TestSumPrecision(t *testing.T) {
	const bound = 1e-6
	r := rand.New(rand.NewPCG(10, 1))
	fill := func(v float32) func(int) float32 { return func(int) float32 { return v } }
	uniform := func(int) float32 { return r.Float32() }
	for _, tc := range []struct {
		name  string
		shape []int
		axis  int
		gen   func(i int) float32
	}{
		{"row/0.1x2^25", []int{1 << 25}, 0, fill(0.1)},
		{"row/uniform/2^24+37", []int{1<<24 + 37}, 0, uniform},
		{"rows/uniform/3x(2^22+5)", []int{3, 1<<22 + 5}, 1, uniform},
		{"cols/0.1/2^20x5", []int{1 << 20, 5}, 0, fill(0.1)},
		{"cols/uniform/2^20x7", []int{1 << 20, 7}, 0, uniform},
		{"cols/uniform/4096x1030", []int{4096, 1030}, 0, uniform}, // several column tiles and tasks
		{"mid/uniform/2x2^19x3", []int{2, 1 << 19, 3}, 1, uniform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, backend.NumElems(tc.shape))
			for i := range x {
				x[i] = tc.gen(i)
			}
			got := runSum(t, tc.shape, tc.axis, x)
			want := sum64(tc.shape, tc.axis, x)
			worst := 0.0
			for i := range want {
				rel := math.Abs(float64(got[i])-want[i]) / want[i]
				worst = max(worst, rel)
				if !(rel <= bound) {
					t.Fatalf("sum %d of shape %v along axis %d: got %v, want %v (relative error %.2g > %g)", i, tc.shape, tc.axis, got[i], want[i], rel, bound)
				}
			}
			t.Logf("worst relative error %.2g over %d sums", worst, len(want))
		})
	}
}

// runSum runs one OpSum node on the CPU backend and returns its output.
func runSum(t *testing.T, shape []int, axis int, x []float32) []float32 {
	t.Helper()
	out := append([]int(nil), shape...)
	out[axis] = 1
	b := &gb{}
	b.out(b.node(backend.Node{Op: backend.OpSum, In: []int{b.arg(shape...)}, Shape: out, Axis: axis}))
	c := New()
	prog, err := c.Compile(&b.g)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Release()
	in, err := c.Alloc(len(x))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(in)
	o, err := c.Alloc(backend.NumElems(out))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(o)
	if err := c.Write(in, 0, x); err != nil {
		t.Fatal(err)
	}
	if _, err := prog.Run([]backend.Buffer{in, o}); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, backend.NumElems(out))
	if err := c.Read(o, 0, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// sum64 is the float64 reference: x viewed as [outer, n, inner], summed
// over n.
func sum64(shape []int, axis int, x []float32) []float64 {
	outer, n, inner := backend.NumElems(shape[:axis]), shape[axis], backend.NumElems(shape[axis+1:])
	want := make([]float64, outer*inner)
	for o := range outer {
		for k := range n {
			row := x[(o*n+k)*inner:][:inner]
			for j, v := range row {
				want[o*inner+j] += float64(v)
			}
		}
	}
	return want
}

// TestSumRowLengths checks sumRow on every length up to three blocks and a
// tail (the block loop, the tail loop and both together) against float64,
// with TestSumPrecision's bound.
func TestSumRowLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	for n := 1; n <= 3*sumBlock+9; n++ {
		x := make([]float32, n)
		var want float64
		for i := range x {
			x[i] = r.Float32()
			want += float64(x[i])
		}
		if got := sumRow(x); math.Abs(float64(got)-want) > 1e-6*want {
			t.Fatalf("sumRow of %d terms: got %v, want %v", n, got, want)
		}
	}
}
