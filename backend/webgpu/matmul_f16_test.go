package webgpu

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// TestMatmulF16Tiles: on a device with shader-f16, a matmul of RoundF16
// operands stages its tiles as f16 and gives the f32 tiles' result bit for
// bit - every tiling, transposes, unaligned sizes (scalar loads), K split,
// a fused epilogue, and operands holding f16 subnormals, the largest
// finite f16, -0, Inf and NaN.
func TestMatmulF16Tiles(t *testing.T) {
	be := openTest(t)
	needF16(t, be)
	type mcase struct {
		m, k, n, batch int
		ta, tb         bool
		force          *mmPlan
		epi            bool
	}
	cases := []mcase{
		{m: 256, k: 128, n: 256, batch: 1, force: &mmPlan{cfg: mmLarge, split: 1}},
		{m: 128, k: 64, n: 128, batch: 2, ta: true, force: &mmPlan{cfg: mmMedium, split: 1}},
		{m: 64, k: 512, n: 64, batch: 1, tb: true, force: &mmPlan{cfg: mmSmall, split: 4}},
		{m: 37, k: 29, n: 41, batch: 1, ta: true, tb: true, force: &mmPlan{cfg: mmTiny, split: 1}},
		{m: 37, k: 29, n: 41, batch: 3, force: &mmPlan{cfg: mmSmall, split: 1}},
		{m: 96, k: 64, n: 80, batch: 1, epi: true},
		{m: 64, k: 1024, n: 64, batch: 1, tb: true}, // picked plan: split K
		// the TN tiles, operands transposed first (copies of f16 values)
		{m: 260, k: 96, n: 132, batch: 2, force: &mmPlan{cfg: mmTN, split: 1, tA: true}},
		{m: 130, k: 70, n: 66, batch: 1, tb: true, force: &mmPlan{cfg: mmTN, split: 2, tA: true, tB: true}},
	}
	for _, c := range cases {
		b := newGB(uint64(c.m*c.k + c.n))
		sa := []int{c.m, c.k}
		if c.ta {
			sa = []int{c.k, c.m}
		}
		sb := []int{c.k, c.n}
		if c.tb {
			sb = []int{c.n, c.k}
		}
		if c.batch > 1 {
			sa = append([]int{c.batch}, sa...)
			sb = append([]int{c.batch}, sb...)
		}
		a := b.arg(f16Data(b, backend.NumElems(sa)), sa...)
		bb := b.arg(f16Data(b, backend.NumElems(sb)), sb...)
		ra := b.op(backend.OpRoundF16, sa, a)
		rb := b.op(backend.OpRoundF16, sb, bb)
		so := []int{c.m, c.n}
		if c.batch > 1 {
			so = append([]int{c.batch}, so...)
		}
		y := b.node(backend.Node{Op: backend.OpMatMul, In: []int{ra, rb}, Shape: so, TransA: c.ta, TransB: c.tb})
		if c.epi {
			bias := b.rand(-1, 1, c.n)
			y = b.op(backend.OpReLU, so, b.op(backend.OpAdd, so, y, bias))
		}
		b.out(y)
		be.matmulForce = c.force
		var outs [2][]float32
		for k, off := range []bool{true, false} {
			be.noF16 = off
			got, _ := runGraph(t, be, &b.g, b.args, 1, true)
			outs[k] = got[len(got)-1]
			if n := f16Kernels(t, be, &b.g); (n > 0) == off {
				t.Errorf("%+v: shader-f16 off=%t compiled %d kernels with f16 tiles", c, off, n)
			}
		}
		be.matmulForce, be.noF16 = nil, false
		bad := 0
		for i := range outs[0] {
			x, z := outs[0][i], outs[1][i]
			same := math.Float32bits(x) == math.Float32bits(z) || (x != x && z != z)
			if !same {
				if bad < 3 {
					t.Errorf("%+v: element %d: f32 tiles %g (%#08x), f16 tiles %g (%#08x)", c, i, x, math.Float32bits(x), z, math.Float32bits(z))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%+v: %d of %d elements differ", c, bad, len(outs[0]))
		}
	}
}

// needF16 skips t unless be stages matmul tiles in f16.
func needF16(t *testing.T, be *Backend) {
	t.Helper()
	if !be.info.F16 {
		testenv.Skipf(t, "%s: %s: %s. f16 tiles run where a device offers shader-f16 to a WGSL compiler that takes it, which none of the machines here does (wgpu-native 0.23's Naga knows no f16; SwiftShader and Chromium 156 on the H200 offer no shader-f16); Open checks them against f32 tiles bit for bit before using them (TestCheckF16Tiles)", t.Name(), be.info, be.f16Why)
	}
}

// TestMatmulSpeed measures square matmuls on a GPU (in the browser too,
// where the page's speed is in question): TFLOP/s by the host clock over
// runs ended by a read, and by the device clock of RunTimed; where f16
// tiles run, RoundF16 operands with f16 tiles against f32 tiles side by
// side. It checks only that they run: speed is for benchmarks, not tests.
func TestMatmulSpeed(t *testing.T) {
	be := openTest(t)
	if !be.info.GPU {
		testenv.Skipf(t, "%s: %s is not a GPU", t.Name(), be.info)
	}
	for _, n := range []int{1024, 2048, 4096} {
		flops := 2 * float64(n) * float64(n) * float64(n)
		line := fmt.Sprintf("matmul %d, TFLOP/s:", n)
		for _, round := range []bool{false, true} {
			if round && !be.info.F16 {
				continue
			}
			b := newGB(1)
			a, w := b.rand(-1, 1, n, n), b.rand(-1, 1, n, n)
			if round {
				a, w = b.op(backend.OpRoundF16, []int{n, n}, a), b.op(backend.OpRoundF16, []int{n, n}, w)
			}
			b.out(b.op(backend.OpMatMul, []int{n, n}, a, w))
			bufs := uploadArgs(t, be, b.args)
			offs := []bool{true} // f32 operands: f32 tiles
			if round {
				offs = []bool{true, false}
			}
			for _, off := range offs {
				be.noF16 = off
				p, err := be.Compile(&b.g)
				if err != nil {
					t.Fatal(err)
				}
				one := make([]float32, 1)
				run := func(reps int) time.Duration {
					t0 := time.Now()
					for range reps {
						if _, err := p.Run(bufs); err != nil {
							t.Fatal(err)
						}
					}
					if err := be.Read(bufs[len(bufs)-1], 0, one); err != nil {
						t.Fatal(err)
					}
					return time.Since(t0)
				}
				run(2)
				reps := max(3, int(2e12/flops))
				host := run(reps)
				nt := backend.NewNodeTimes(len(b.g.Nodes))
				var dev time.Duration
				for range 3 {
					info, err := p.(backend.NodeTimer).RunTimed(bufs, nt)
					if err != nil {
						t.Fatal(err)
					}
					dev = info.DeviceTime
				}
				p.Release()
				what := "f32"
				if round {
					what = map[bool]string{true: "f16 operands, f32 tiles", false: "f16 operands, f16 tiles"}[off]
				}
				line += fmt.Sprintf(" %s: host %.1f, device %.1f (%v);", what, flops*float64(reps)/host.Seconds()/1e12, flops/dev.Seconds()/1e12, dev)
			}
			be.noF16 = false
		}
		t.Log(line)
	}
}

// f16Data returns n random values in [-2, 2) with a few specials among them
// (they are rounded to f16 by the graph).
func f16Data(b *gb, n int) []float32 {
	specials := []float32{0x1p-20, -0x1p-24, 65504, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN())}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(4*b.rng.Float64() - 2)
		if b.rng.IntN(97) == 0 {
			d[i] = specials[b.rng.IntN(len(specials))]
		}
	}
	return d
}

// f16Kernels compiles g and counts its dispatches whose kernel stages f16
// tiles.
func f16Kernels(t *testing.T, be *Backend, g *backend.Graph) int {
	t.Helper()
	n := 0
	for _, k := range compiledKernels(t, be, g) {
		if strings.HasPrefix(k.src, "enable f16;") {
			n++
		}
	}
	return n
}

// TestCheckF16Tiles runs Open's check of f16 tiles here: it must pass (on a
// device without f16 tiles both runs use f32 tiles), and its products must
// run the tiled kernel - f16 tiles where the device has them - not the dot
// product kernel that small products otherwise take.
func TestCheckF16Tiles(t *testing.T) {
	be := openTest(t)
	if err := be.checkF16Tiles(); err != nil {
		t.Fatal(err)
	}
	g, _ := f16CheckGraph()
	be.matmulForce = &mmPlan{cfg: mmTiny, split: 1}
	defer func() { be.matmulForce = nil }()
	var names []string
	for _, k := range compiledKernels(t, be, g) {
		names = append(names, k.name)
	}
	want := 0
	for _, n := range names {
		if strings.HasPrefix(n, "matmul_"+mmTiny.String()) && strings.HasSuffix(n, "_f16") == be.info.F16 {
			want++
		}
	}
	if want != len(f16Shapes) {
		t.Errorf("the check's kernels are %v: want %d tiled matmuls (f16 tiles %t)", names, len(f16Shapes), be.info.F16)
	}
}
