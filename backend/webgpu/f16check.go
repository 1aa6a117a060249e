package webgpu

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/backend"
)

// Matmul tiles in f16 (matmulKernel2's half) must give the f32 tiles'
// result bit for bit. A device offering shader-f16 gets them only after
// checking that here, at Open: matmuls of f16 operands holding subnormals,
// the largest finite f16, -0, Inf and NaN, through the vec4 and the scalar
// kernels, run both ways and compared. A device whose f16 conversions or
// workgroup memory differ (flushed subnormals, say) keeps f32 tiles and
// says why (f16Why) rather than giving another number.

// f16Shapes are the checked products: M, K, N (vec4 loads, then scalar).
var f16Shapes = [][3]int{{32, 24, 32}, {36, 20, 44}}

// f16CheckGraph multiplies RoundF16 operands for each of f16Shapes, the
// operands in args 2i and 2i+1, the products into args 2n+i.
func f16CheckGraph() (*backend.Graph, [][]float32) {
	g := &backend.Graph{}
	var args [][]float32
	arg := func(shape []int, data []float32) int {
		g.Nodes = append(g.Nodes, backend.Node{Op: backend.OpArg, Arg: g.NumArgs, Shape: shape})
		g.NumArgs++
		args = append(args, data)
		return len(g.Nodes) - 1
	}
	node := func(n backend.Node) int { g.Nodes = append(g.Nodes, n); return len(g.Nodes) - 1 }
	specials := []float32{0x1p-20, -0x1p-24, 65504, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN())}
	fill := func(n, seed int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32((i*7+seed*13)%29-14) / 7
			if (i+seed)%31 == 0 {
				d[i] = specials[(i/31+seed)%len(specials)]
			}
		}
		return d
	}
	var prods []int
	for s, sh := range f16Shapes {
		m, k, n := sh[0], sh[1], sh[2]
		a := node(backend.Node{Op: backend.OpRoundF16, In: []int{arg([]int{m, k}, fill(m*k, 2*s))}, Shape: []int{m, k}})
		b := node(backend.Node{Op: backend.OpRoundF16, In: []int{arg([]int{k, n}, fill(k*n, 2*s+1))}, Shape: []int{k, n}})
		prods = append(prods, node(backend.Node{Op: backend.OpMatMul, In: []int{a, b}, Shape: []int{m, n}}))
	}
	for _, p := range prods {
		args = append(args, make([]float32, backend.NumElems(g.Nodes[p].Shape)))
		g.Outputs = append(g.Outputs, backend.Output{Node: p, Arg: g.NumArgs})
		g.NumArgs++
	}
	return g, args
}

// checkF16Tiles runs f16CheckGraph with f32 and with f16 tiles (the small
// tiling every device runs) and returns an error naming the first element
// that differs.
func (b *Backend) checkF16Tiles() error {
	g, args := f16CheckGraph()
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		buf, err := b.Alloc(len(a))
		if err != nil {
			return err
		}
		defer b.Free(buf)
		bufs[i] = buf
	}
	force, noF16 := b.matmulForce, b.noF16
	defer func() { b.matmulForce, b.noF16 = force, noF16 }()
	b.matmulForce = &mmPlan{cfg: mmTiny, split: 1}
	var outs [2][][]float32
	for k, off := range []bool{true, false} {
		b.noF16 = off
		for i, a := range args {
			if err := b.Write(bufs[i], 0, a); err != nil {
				return err
			}
		}
		p, err := b.Compile(g)
		if err != nil {
			return err
		}
		_, err = p.Run(bufs)
		p.Release()
		if err != nil {
			return err
		}
		for _, o := range g.Outputs {
			got := make([]float32, len(args[o.Arg]))
			if err := b.Read(bufs[o.Arg], 0, got); err != nil {
				return err
			}
			outs[k] = append(outs[k], got)
		}
	}
	for s := range outs[0] {
		for i, x := range outs[0][s] {
			z := outs[1][s][i]
			if math.Float32bits(x) != math.Float32bits(z) && !(x != x && z != z) {
				return fmt.Errorf("a %v matmul's element %d is %g with f32 tiles and %g with f16 tiles", f16Shapes[s], i, x, z)
			}
		}
	}
	return nil
}
