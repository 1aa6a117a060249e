package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
)

// The memory plan: values must survive until their last read whatever the
// reuse, outputs must never share memory with intermediates, and graphs that
// read an arg they also write must see the values the IR promises.

func TestPlanDiamondAndReuse(t *testing.T) {
	// x -> a=exp(x) -> a long chain that recycles slots -> c; then a is read
	// again at the end. If a's slot were reused by the chain, d would be wrong.
	b := &gb{}
	s := []int{17, 9}
	x := b.arg(s...)
	a := b.op(backend.OpExp, s, x)
	cur := a
	for range 8 {
		cur = b.op(backend.OpNeg, s, cur)
		cur = b.node(backend.Node{Op: backend.OpAffine, In: []int{cur}, Shape: s, A: 0.5, B: 0.25})
	}
	d := b.op(backend.OpMul, s, cur, a)
	e := b.op(backend.OpAdd, s, d, a)
	b.out(e)
	c := New()
	check(t, c, b, randArgs(rand.New(rand.NewPCG(20, 1)), b.shapes, -1, 1), tolMath)

	prog, err := c.Compile(&b.g)
	if err != nil {
		t.Fatal(err)
	}
	// a lives to the end; the chain needs two more slots at a time; the
	// output goes straight into its arg.
	if n := len(prog.(*program).slots); n != 3 {
		t.Errorf("diamond with a chain of 16 ops uses %d slots, want 3 (reuse by liveness)", n)
	}
}

func TestPlanProgramsDoNotAliasArgs(t *testing.T) {
	c := New()
	progs := []*program{}
	for k := 0; k < 2; k++ {
		b := &gb{}
		s := []int{8, 8}
		x := b.arg(s...)
		y := b.op(backend.OpExp, s, x)
		z := b.op(backend.OpMatMul, s, y, y)
		b.out(b.op(backend.OpAdd, s, z, y))
		p, err := c.Compile(&b.g)
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, p.(*program))
	}
	x, _ := c.Alloc(64)
	o1, _ := c.Alloc(64)
	o2, _ := c.Alloc(64)
	_ = c.Write(x, 0, randArgs(rand.New(rand.NewPCG(21, 1)), [][]int{{64}}, -1, 1)[0])
	if _, err := progs[0].Run([]backend.Buffer{x, o1}); err != nil {
		t.Fatal(err)
	}
	first := append([]float32(nil), o1.(*Buffer).data...)
	if _, err := progs[1].Run([]backend.Buffer{x, o2}); err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if o1.(*Buffer).data[i] != first[i] || o2.(*Buffer).data[i] != first[i] {
			t.Fatalf("output %d changed or differs after another program ran: %v, %v, %v", i, first[i], o1.(*Buffer).data[i], o2.(*Buffer).data[i])
		}
	}
	for _, p := range progs {
		for _, s := range p.slots {
			for _, buf := range []backend.Buffer{x, o1, o2} {
				if &s[:1][0] == &buf.(*Buffer).data[0] {
					t.Fatal("an intermediate slot is an arg buffer")
				}
			}
		}
	}
	if &progs[0].slots[0][0] == &progs[1].slots[0][0] {
		t.Fatal("two programs share an intermediate slot")
	}
}

func TestPlanArgsWrittenAndRead(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 1))
	c := New()
	s := []int{5, 7}
	cases := map[string]func(b *gb) (fixed map[int][]float32){
		// An output goes to arg 0, which a later node still reads: that read
		// must see the old value (outputs leave when the run is done).
		"output into an arg read later": func(b *gb) map[int][]float32 {
			x := b.arg(s...)
			y := b.op(backend.OpNeg, s, x)
			b.g.Outputs = append(b.g.Outputs, backend.Output{Node: y, Arg: 0})
			z := b.op(backend.OpExp, s, x)
			b.out(b.op(backend.OpAdd, s, z, y))
			return nil
		},
		// The same value leaves through two args, and an arg leaves through another.
		"two outputs of one node, arg to arg": func(b *gb) map[int][]float32 {
			x := b.arg(s...)
			y := b.op(backend.OpTanh, s, x)
			b.out(y)
			b.out(y)
			b.out(x)
			return nil
		},
		// A reshape and a row slice of a parameter taken before the AdamW
		// that updates it are read after the update: they must hold the old
		// values; a plain read of the arg after the update sees the new ones.
		"views of an arg updated in place": func(b *gb) map[int][]float32 {
			w := b.arg(s...)
			g, m, v, hp := b.arg(s...), b.arg(s...), b.arg(s...), b.arg(7)
			rs := b.op(backend.OpReshape, []int{35}, w)
			sl := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{w}, Shape: []int{2, 7}, Start: 3})
			up := b.node(backend.Node{Op: backend.OpAdamW, In: []int{w, g, m, v, hp}, Shape: s})
			b.out(b.op(backend.OpNeg, []int{35}, rs))
			b.out(b.op(backend.OpNeg, []int{2, 7}, sl))
			b.out(b.op(backend.OpNeg, s, b.argOf(0, s...)))
			b.out(up) // the updated w leaves through another arg too
			return map[int][]float32{4: {0.1, 0.9, 0.999, 1e-8, 0.01, 10, 1000}}
		},
		// Views of intermediates (reshape, slice of a reshape) keep their
		// storage alive past other values.
		"views of intermediates": func(b *gb) map[int][]float32 {
			x := b.arg(s...)
			y := b.op(backend.OpExp, s, x)
			rs := b.op(backend.OpReshape, []int{7, 5}, y)
			sl := b.node(backend.Node{Op: backend.OpSliceRows, In: []int{rs}, Shape: []int{3, 5}, Start: 2})
			t1 := b.op(backend.OpNeg, s, x)
			t2 := b.op(backend.OpSqrt, s, b.op(backend.OpMul, s, t1, t1))
			t3 := b.node(backend.Node{Op: backend.OpSum, In: []int{t2}, Shape: []int{5, 1}, Axis: 1})
			b.out(b.op(backend.OpMul, []int{3, 5}, sl, b.op(backend.OpReshape, []int{5}, t3)))
			b.out(b.op(backend.OpReshape, []int{35}, rs))
			return nil
		},
		// Dead nodes are skipped; an in-place op whose value nobody reads
		// still runs.
		"dead nodes and side effects": func(b *gb) map[int][]float32 {
			w := b.arg(s...)
			g, vel, hp := b.arg(s...), b.arg(s...), b.arg(3)
			b.op(backend.OpExp, s, w) // dead
			b.node(backend.Node{Op: backend.OpSGD, In: []int{w, g, vel, hp}, Shape: s})
			return map[int][]float32{3: {0.1, 0.9, 0.01}}
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			b := &gb{}
			fixed := build(b)
			args := randArgs(r, b.shapes, 0.1, 1)
			for i, v := range fixed {
				args[i] = v
			}
			check(t, c, b, args, tolMath)
		})
	}
}

// TestConcurrentRuns: programs of one backend may be run from several
// goroutines; runs are serialized and each gets its own right answer.
func TestConcurrentRuns(t *testing.T) {
	c := New()
	const workers = 4
	done := make(chan error, workers)
	for w := range workers {
		go func() {
			b := &gb{}
			n := 40 + w*30 // different shapes share the backend's scratch
			x := b.arg(n, n)
			b.out(b.op(backend.OpMatMul, []int{n, n}, x, x))
			prog, err := c.Compile(&b.g)
			if err != nil {
				done <- err
				return
			}
			args := randArgs(rand.New(rand.NewPCG(uint64(w), 50)), b.shapes, -1, 1)
			ref := [][]float64{make([]float64, n*n), make([]float64, n*n)}
			for j, v := range args[0] {
				ref[0][j] = float64(v)
			}
			refEval(&b.g, ref)
			xb, _ := c.Alloc(n * n)
			ob, _ := c.Alloc(n * n)
			_ = c.Write(xb, 0, args[0])
			for range 20 {
				if _, err := prog.Run([]backend.Buffer{xb, ob}); err != nil {
					done <- err
					return
				}
				for j, v := range ob.(*Buffer).data {
					if !close32(v, ref[1][j], tolMM) {
						done <- fmt.Errorf("worker %d: [%d] = %v, want %v", w, j, v, ref[1][j])
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
