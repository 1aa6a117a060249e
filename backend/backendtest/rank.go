package backendtest

import (
	"math/rand/v2"
	"slices"

	"github.com/ag-go/ag/backend"
)

// rankSizes are the dimensions of the rank 5 and 6 cases: 1s to drop,
// and odd sizes, kept small (six of them multiply).
var rankSizes = []int{1, 2, 3, 5}

// highShape draws a shape of rank r from rankSizes.
func highShape(r *rand.Rand, rank int) []int {
	s := make([]int, rank)
	for i := range s {
		s[i] = rankSizes[r.IntN(len(rankSizes))]
	}
	return s
}

// alternating are shapes whose broadcasts alternate axis by axis, so that
// more than 4 groups remain and the lowering materialises a broadcast.
var alternating = [][2][]int{
	{{2, 1, 3, 1, 2, 1}, {1, 3, 1, 2, 1, 5}},
	{{3, 2, 3, 2, 3, 2}, {1, 2, 1, 2, 1, 2}},
	{{2, 1, 2, 3, 1, 3}, {1, 3, 2, 1, 2, 1}},
	{{5, 1, 3, 1, 2}, {1, 2, 1, 3, 1}},
}

// highPerms are permutations of rank 5 and 6 that stay above 4 groups
// after merging (the lowering chains them), with a few that merge.
var highPerms = [][]int{
	{5, 4, 3, 2, 1, 0}, {1, 0, 3, 2, 5, 4}, {2, 4, 0, 5, 1, 3}, {5, 0, 1, 2, 3, 4},
	{4, 3, 2, 1, 0}, {0, 2, 1, 4, 3}, {3, 4, 0, 1, 2},
}

// rankCases check ranks 5 and 6 (backend.MaxRank) on the backend against
// the reference, which evaluates them as they are; a backend whose kernels
// take 4 dimensions runs plan.Expand's lowering of them.
func rankCases() []opCase {
	one := func(r *rand.Rand, op backend.Node, s []int, lo, hi float64) instance {
		var b builder
		op.In = []int{b.arg(uniform(r, backend.NumElems(s), lo, hi), s...)}
		b.out(b.node(op))
		return b.inst(max(1, backend.NumElems(s)/max(1, backend.NumElems(op.Shape))))
	}
	two := func(r *rand.Rand, op backend.Node, sa, sb []int) instance {
		var b builder
		x := b.arg(uniform(r, backend.NumElems(sa), -2, 2), sa...)
		y := b.arg(uniform(r, backend.NumElems(sb), 0.5, 2), sb...)
		op.In = []int{x, y}
		b.out(b.node(op))
		return b.inst(0)
	}
	return []opCase{
		{"rank/exp", tolKey(backend.OpExp), func(r *rand.Rand) []instance {
			var is []instance
			for _, rk := range []int{5, 6} {
				s := highShape(r, rk)
				is = append(is, one(r, backend.Node{Op: backend.OpExp, Shape: s}, s, -3, 3))
			}
			return is
		}},
		{"rank/softmax", "softmax", func(r *rand.Rand) []instance {
			var is []instance
			for _, rk := range []int{5, 6} {
				s := highShape(r, rk)
				is = append(is, one(r, backend.Node{Op: backend.OpSoftmax, Shape: s}, s, -3, 3))
			}
			return is
		}},
		{"rank/mul-broadcast", tolKey(backend.OpMul), func(r *rand.Rand) []instance {
			var is []instance
			for _, rk := range []int{5, 6} {
				for range 3 {
					out := highShape(r, rk)
					is = append(is, two(r, backend.Node{Op: backend.OpMul, Shape: out}, out, broadcastOf(r, out)))
					is = append(is, two(r, backend.Node{Op: backend.OpMul, Shape: out}, broadcastOf(r, out), out))
				}
			}
			for _, ab := range alternating {
				out, err := backend.BroadcastShape(ab[0], ab[1])
				if err != nil {
					panic(err)
				}
				is = append(is, two(r, backend.Node{Op: backend.OpMul, Shape: out}, ab[0], ab[1]))
			}
			return is
		}},
		{"rank/sum", "sum", func(r *rand.Rand) []instance {
			return reduceAlong(r, backend.OpSum, one)
		}},
		{"rank/max", "max", func(r *rand.Rand) []instance {
			return reduceAlong(r, backend.OpMax, one)
		}},
		{"rank/movement", "exact", func(r *rand.Rand) []instance {
			var is []instance
			for _, p := range highPerms {
				s := highShape(r, len(p))
				is = append(is, one(r, backend.Node{Op: backend.OpPermute, Shape: permutedShape(s, p), Perm: p}, s, -1, 1))
			}
			for _, rk := range []int{5, 6} {
				s := highShape(r, rk)
				p := r.Perm(rk)
				is = append(is, one(r, backend.Node{Op: backend.OpPermute, Shape: permutedShape(s, p), Perm: p}, s, -1, 1))
				is = append(is, one(r, backend.Node{Op: backend.OpExpand, Shape: s}, broadcastOf(r, s), -1, 1))
				is = append(is, one(r, backend.Node{Op: backend.OpReshape, Shape: []int{s[0] * s[1], backend.NumElems(s[2:])}}, s, -1, 1))
				is = append(is, one(r, backend.Node{Op: backend.OpSliceRows, Shape: append([]int{1}, s[1:]...), Start: s[0] - 1}, s, -1, 1))
				var b builder
				x := b.arg(uniform(r, backend.NumElems(s), -1, 1), s...)
				y := b.arg(uniform(r, backend.NumElems(s), -1, 1), s...)
				cat := b.op(backend.OpConcatRows, append([]int{2 * s[0]}, s[1:]...), x, y)
				idx := b.arg([]float32{1, 0, float32(2*s[0] - 1), 1}, 4)
				b.out(cat)
				b.out(b.op(backend.OpGetRows, append([]int{4}, s[1:]...), cat, idx))
				is = append(is, b.inst(0))
			}
			for _, ab := range alternating {
				out, _ := backend.BroadcastShape(ab[0], ab[1])
				is = append(is, one(r, backend.Node{Op: backend.OpExpand, Shape: out}, ab[1], -1, 1))
			}
			return is
		}},
		{"rank/matmul", "matmul", func(r *rand.Rand) []instance {
			var is []instance
			for _, batch := range [][]int{{2, 1, 3}, {3, 2, 1, 2}, {1, 2, 2, 3}} {
				for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					is = append(is, mmInst(r, batch, 1+r.IntN(9), 1+r.IntN(17), 1+r.IntN(9), tr[0], tr[1]))
				}
			}
			return is
		}},
		{"rank/attention", "attention", func(r *rand.Rand) []instance {
			var is []instance
			for _, c := range []struct{ batch, keepBatch []int }{
				{[]int{2, 3, 2}, []int{1, 1, 1}},
				{[]int{2, 3, 2}, []int{2, 1, 2}},
				{[]int{2, 1, 3, 2}, []int{2, 1, 1, 2}},
			} {
				tq, tk, d := 1+r.IntN(5), 1+r.IntN(6), 1+r.IntN(8)
				var b builder
				sh := func(last ...int) []int { return append(slices.Clone(c.batch), last...) }
				q := b.arg(uniform(r, backend.NumElems(sh(tq, d)), -2, 2), sh(tq, d)...)
				k := b.arg(uniform(r, backend.NumElems(sh(tk, d)), -2, 2), sh(tk, d)...)
				v := b.arg(uniform(r, backend.NumElems(sh(tk, d)), -2, 2), sh(tk, d)...)
				ks := append(slices.Clone(c.keepBatch), tq, tk)
				keep := make([]float32, backend.NumElems(ks))
				for i := range keep {
					keep[i] = float32(r.IntN(4) / 3) // mostly 0: some queries attend nothing
					if i%tk == 0 {
						keep[i] = 1
					}
				}
				kp := b.arg(keep, ks...)
				b.out(b.node(backend.Node{Op: backend.OpAttention, In: []int{q, k, v, kp}, Shape: sh(tq, d), A: 0.5}))
				is = append(is, b.inst(0))
			}
			return is
		}},
		{"rank/adamw", "adamw", func(r *rand.Rand) []instance {
			s := []int{2, 3, 1, 5, 2}
			var b builder
			ne := backend.NumElems(s)
			w := b.arg(uniform(r, ne, -1, 1), s...)
			g := b.arg(uniform(r, ne, -1, 1), s...)
			m := b.arg(uniform(r, ne, -0.1, 0.1), s...)
			v := b.arg(uniform(r, ne, 0, 0.1), s...)
			hp := b.arg(adamHP(3, 0.01), 7)
			b.op(backend.OpAdamW, slices.Clone(s), w, g, m, v, hp)
			in := b.inst(0)
			in.runs = 2
			return []instance{in}
		}},
	}
}

// reduceAlong is op along every axis of a rank 5 and a rank 6 shape.
func reduceAlong(r *rand.Rand, op backend.Op, one func(*rand.Rand, backend.Node, []int, float64, float64) instance) []instance {
	var is []instance
	for _, rk := range []int{5, 6} {
		s := highShape(r, rk)
		for ax := range rk {
			o := slices.Clone(s)
			o[ax] = 1
			is = append(is, one(r, backend.Node{Op: op, Shape: o, Axis: ax}, s, -2, 2))
		}
	}
	return is
}

// permutedShape is s reordered by p (output axis k is input axis p[k]).
func permutedShape(s, p []int) []int {
	out := make([]int, len(p))
	for k, a := range p {
		out[k] = s[a]
	}
	return out
}
