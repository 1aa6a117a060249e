package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// gb builds test graphs.
type gb struct {
	g      backend.Graph
	shapes [][]int // per arg
}

// arg adds a new arg and an OpArg node reading it.
func (b *gb) arg(shape ...int) int {
	b.g.NumArgs++
	b.shapes = append(b.shapes, shape)
	return b.node(backend.Node{Op: backend.OpArg, Arg: b.g.NumArgs - 1, Shape: shape})
}

// argOf adds another OpArg node reading an existing arg.
func (b *gb) argOf(a int, shape ...int) int {
	return b.node(backend.Node{Op: backend.OpArg, Arg: a, Shape: shape})
}

func (b *gb) node(n backend.Node) int {
	b.g.Nodes = append(b.g.Nodes, n)
	return len(b.g.Nodes) - 1
}

func (b *gb) op(op backend.Op, shape []int, in ...int) int {
	return b.node(backend.Node{Op: op, In: in, Shape: shape})
}

// out makes node i an output into a new arg; it returns the arg.
func (b *gb) out(i int) int {
	b.g.NumArgs++
	b.shapes = append(b.shapes, b.g.Nodes[i].Shape)
	b.g.Outputs = append(b.g.Outputs, backend.Output{Node: i, Arg: b.g.NumArgs - 1})
	return b.g.NumArgs - 1
}

// tol is an op's stated tolerance: |got-want| <= abs + rel*|want|.
type tol struct{ abs, rel float64 }

func close32(got float32, want float64, t tol) bool {
	g := float64(got)
	switch {
	case math.IsNaN(want) || math.IsNaN(g):
		return math.IsNaN(want) && math.IsNaN(g)
	case math.IsInf(want, 0) || math.IsInf(g, 0):
		return g == want
	}
	return math.Abs(g-want) <= t.abs+t.rel*math.Abs(want)
}

// randArgs fills each arg with uniform values in [lo, hi).
func randArgs(r *rand.Rand, shapes [][]int, lo, hi float32) [][]float32 {
	args := make([][]float32, len(shapes))
	for i, s := range shapes {
		args[i] = make([]float32, backend.NumElems(s))
		for j := range args[i] {
			args[i][j] = lo + (hi-lo)*r.Float32()
		}
	}
	return args
}

// check compiles and runs b's graph on c with copies of args, runs the
// reference on the same data, and compares every arg afterwards (outputs
// and in-place updates alike).
func check(t *testing.T, c *CPU, b *gb, args [][]float32, tl tol) {
	t.Helper()
	prog, err := c.Compile(&b.g)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, b.g.String())
	}
	defer prog.Release()
	bufs := make([]backend.Buffer, len(args))
	ref := make([][]float64, len(args))
	for i, a := range args {
		buf, _ := c.Alloc(len(a))
		if err := c.Write(buf, 0, a); err != nil {
			t.Fatal(err)
		}
		bufs[i] = buf
		ref[i] = make([]float64, len(a))
		for j, v := range a {
			ref[i][j] = float64(v)
		}
	}
	if _, err := prog.Run(bufs); err != nil {
		t.Fatalf("Run: %v", err)
	}
	refEval(&b.g, ref)
	for i := range args {
		got := make([]float32, len(args[i]))
		if err := c.Read(bufs[i], 0, got); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for j := range got {
			if !close32(got[j], ref[i][j], tl) {
				if bad < 5 {
					t.Errorf("arg %d (shape %v) [%d]: got %v, want %v (tol %+v)", i, b.shapes[i], j, got[j], ref[i][j], tl)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("%d of %d values of arg %d differ\n%s", bad, len(got), i, b.g.String())
		}
	}
}

// randShape returns a shape of the given rank with dims from a set that
// includes 1 and odd sizes.
func randShape(r *rand.Rand, rank int) []int {
	dims := []int{1, 2, 3, 5, 7, 16, 33}
	s := make([]int, rank)
	for i := range s {
		s[i] = dims[r.IntN(len(dims))]
	}
	return s
}

// bcastPartner returns a shape that broadcasts with s: a suffix of s with
// some axes set to 1.
func bcastPartner(r *rand.Rand, s []int) []int {
	k := r.IntN(len(s) + 1)
	p := append([]int(nil), s[len(s)-k:]...)
	for i := range p {
		if r.IntN(3) == 0 {
			p[i] = 1
		}
	}
	return p
}

func shapeName(s ...[]int) string { return fmt.Sprint(s) }
