package cpu

// A cache-blocked GEMM in the BLIS style: C = op(A) * op(B) is cut into
// kc-deep slices of K; for each, B is packed into nr-wide column panels and
// A, per block of mc rows, into mr-tall row panels, both padded with zeros,
// so the micro-kernel only ever sees full tiles of contiguous memory. The
// three transposed variants differ only in how the packing reads its source.
// Packing goes to scratch owned by the backend, sized at compile time.

// gemmScratch is the packing memory of a backend.
type gemmScratch struct {
	bShared []float32   // kc x nc packed B block, shared by the workers
	aAll    []float32   // all of op(A) packed, depth block after block (directB)
	worker  []gemmLocal // per worker
}

type gemmLocal struct {
	a    []float32 // mc x kc packed A block
	b    []float32 // packed B block for batch-parallel products
	tile []float32 // mr x nr tile for ragged edges
	blk  blockCall // a block kernel's call (kept off the stack: it escapes)
}

func grow(s []float32, n int) []float32 {
	if len(s) >= n {
		return s
	}
	return make([]float32, n)
}

// gemm is one matmul node's plan: shapes and blocking fixed at compile time,
// operand slices bound per run.
type gemm struct {
	k          microKernel
	m, n, kk   int
	batch      int
	rsA, csA   int // A(i, p) = a[i*rsA + p*csA]
	rsB, csB   int // B(p, j) = b[p*rsB + j*csB]
	sa, sb, sc int // batch strides
	mc         int // rows per A block (a multiple of mr)
	nIC        int // A blocks
	nJ         int // column chunks per block (>1 only when rows are few)
	perBatch   bool
	directB    bool // read full B panels in place (row-major B, few rows of A)
	aPanels    int  // directB: the panels of op(A), every depth block (packAll)
	aTasks     int  // directB: packAll's tasks
	swap       bool // compute C^T = op(B)^T op(A)^T (transposed B, few rows of A)

	s *gemmScratch
	p *parallel

	// bound per run / per block
	a, b, c        []float32
	p0, kc, j0, nc int
	accum          bool

	packTask, compTask, batchTask, swapTask, directTask, packAllTask func(w, t int)
}

// Work below this many multiply-adds runs on one goroutine: a million
// take ~5 us on one core, about what waking a pool worker costs.
const gemmParallelMin = 1 << 20

// directBMaxRows is the most rows of A for which B is not packed.
const directBMaxRows = 256

func newGemm(cpu *CPU, k microKernel, batch, m, n, kk int, transA, transB bool) *gemm {
	g := &gemm{k: k, m: m, n: n, kk: kk, batch: batch, s: &cpu.scratch, p: &cpu.par}
	if transA { // stored [K, M]
		g.rsA, g.csA = 1, m
	} else { // stored [M, K]
		g.rsA, g.csA = kk, 1
	}
	if transB { // stored [N, K]
		g.rsB, g.csB = 1, kk
	} else { // stored [K, N]
		g.rsB, g.csB = n, 1
	}
	g.sa, g.sb, g.sc = m*kk, kk*n, m*n
	t := threads()
	work := m * n * kk
	g.perBatch = batch >= t && work < 1<<21 || work < gemmParallelMin
	if g.perBatch {
		g.mc = min(roundUp(m, k.mr), k.mc)
		g.nIC, g.nJ = 1, 1
	} else {
		// Enough row blocks for every thread, in a multiple of the thread
		// count so that the last round does not leave threads idle.
		rounds := ceilDiv(m, k.mc*t)
		g.nIC = t * rounds
		g.mc = roundUp(ceilDiv(m, g.nIC), k.mr)
		g.nIC = ceilDiv(m, g.mc)
		if g.nIC < t {
			g.nJ = t
		} else {
			g.nJ = 1
		}
	}
	// With few rows, each B element is used only m times: packing it would
	// cost as much as the arithmetic. Row-major B panels are read in place
	// (nr contiguous floats per row); only the ragged last panel is packed.
	// Such a product takes a few hundred microseconds, and a parallel call
	// per depth block, each first waiting on one thread packing A, left the
	// second core idle a third of the time: A (small) is packed whole up
	// front instead, and one parallel call runs every depth block.
	g.directB = !transB && m <= directBMaxRows && !g.perBatch
	// Transposed B with few rows of A: packing B would transpose the big
	// matrix. Instead compute C^T = B_stored * op(A)^T: the kernel reads the
	// stored rows of B in place as its A operand, only op(A) is packed, and
	// tiles are stored transposed.
	g.swap = transB && m <= directBMaxRows && k.fnRA != nil && !g.perBatch
	if g.swap {
		g.directB = false
	}
	g.packTask = g.packB
	g.swapTask = g.swapCompute
	g.directTask = g.directCompute
	g.packAllTask = g.packAll
	if g.directB {
		g.aPanels = ceilDiv(m, k.mr) * ceilDiv(kk, k.kc)
		g.aTasks = min(g.aPanels, 2*t)
	}
	g.compTask = g.compute
	g.batchTask = g.serialBatch
	// Scratch for the largest blocks this product uses.
	kc := min(kk, k.kc)
	nc := min(roundUp(n, k.nr), k.nc)
	if !g.perBatch {
		g.s.bShared = grow(g.s.bShared, kc*nc)
	}
	if g.swap {
		g.s.bShared = grow(g.s.bShared, kk*roundUp(m, k.nr))
	}
	if g.directB {
		g.s.aAll = grow(g.s.aAll, kk*roundUp(m, k.mr))
		g.s.bShared = grow(g.s.bShared, kk*k.nr) // the ragged last panel
	}
	for len(g.s.worker) < t {
		g.s.worker = append(g.s.worker, gemmLocal{})
	}
	for w := range g.s.worker[:t] {
		l := &g.s.worker[w]
		l.a = grow(l.a, g.mc*kc)
		l.tile = grow(l.tile, k.mr*k.nr)
		if g.perBatch {
			l.b = grow(l.b, kc*nc)
		}
	}
	return g
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
func roundUp(a, b int) int { return ceilDiv(a, b) * b }

// run computes c = op(a) * op(b) for every batch item.
func (g *gemm) run(a, b, c []float32) {
	if g.perBatch {
		g.a, g.b, g.c = a, b, c
		if g.batch > 1 && g.m*g.n*g.kk*g.batch >= gemmParallelMin {
			g.p.do(g.batch, g.batchTask)
		} else {
			for i := range g.batch {
				g.serialBatch(0, i)
			}
		}
		g.a, g.b, g.c = nil, nil, nil
		return
	}
	for i := range g.batch {
		g.a, g.b, g.c = a[i*g.sa:(i+1)*g.sa], b[i*g.sb:(i+1)*g.sb], c[i*g.sc:(i+1)*g.sc]
		if g.swap {
			// B' = op(A)^T: B'(p, i) = op(A)(i, p), all m columns and the
			// whole depth (panel jp at jp*kk*nr, depth p at p*nr in it).
			packB(g.k.nr, g.s.bShared, g.a, g.csA, g.rsA, 0, g.kk, 0, g.m, 0)
			g.p.do(min(ceilDiv(g.n, g.k.mr), 4*threads()), g.swapTask)
			continue
		}
		if g.directB {
			nr := g.k.nr
			last := g.n / nr * nr // first column of the ragged panel
			// Packed by both cores: A often comes from memory (a 256x256
			// one took 47 us to pack from ag bench, 7 us from cache).
			g.p.do(g.aTasks, g.packAllTask)
			if last < g.n {
				packB(nr, g.s.bShared, g.b, g.rsB, g.csB, 0, g.kk, last, g.n-last, 0)
			}
			g.p.do(min(ceilDiv(g.n, nr), 4*threads()), g.directTask)
			continue
		}
		for j0 := 0; j0 < g.n; j0 += g.k.nc {
			g.j0, g.nc = j0, min(g.k.nc, g.n-j0)
			for p0 := 0; p0 < g.kk; p0 += g.k.kc {
				g.p0, g.kc, g.accum = p0, min(g.k.kc, g.kk-p0), p0 > 0
				g.p.do(min(ceilDiv(g.nc, g.k.nr), 2*threads()), g.packTask)
				g.p.do(g.nIC*g.nJ, g.compTask)
			}
		}
	}
	g.a, g.b, g.c = nil, nil, nil
}

// swapCompute computes task t's share of the mr-row groups of C^T (groups
// of mr output columns). A tile sums its depth blocks in the tile scratch
// (the kernel adds each block's sum to it, so rounding is that of the
// blocked product) and is stored transposed once, not once per block.
func (g *gemm) swapCompute(w, t int) {
	mr, nr, kk := g.k.mr, g.k.nr, g.kk
	groups := ceilDiv(g.n, mr)
	lo, hi := span(groups, min(groups, 4*threads()), t)
	l := &g.s.worker[w]
	if g.k.block != nil {
		// All of the task's groups and panels per call, depth block by
		// depth block: C^T(i, j) = C(j, i) is stored at column stride n.
		j0 := lo * mr
		rows := min(hi*mr, g.n) - j0
		for p0 := 0; p0 < kk && rows > 0; p0 += g.k.kc {
			l.blk = blockCall{kc: min(g.k.kc, kk-p0), a: g.b[j0*g.csB+p0*g.rsB:], ars: g.csB, aks: g.rsB, aps: mr * g.csB,
				rows: rows, b: g.s.bShared[p0*nr:], ldb: nr, bps: kk * nr, cols: g.m,
				c: g.c[j0:], crs: 1, ccs: g.n, accum: p0 > 0, tile: l.tile}
			g.k.block(&l.blk)
		}
		return
	}
	panels := ceilDiv(g.m, nr)
	for gi := lo; gi < hi; gi++ {
		j0 := gi * mr
		rows := min(mr, g.n-j0)
		for jp := range panels {
			bp := g.s.bShared[jp*kk*nr : (jp+1)*kk*nr] // depth p at bp[p*nr:]
			for p0 := 0; p0 < kk; p0 += g.k.kc {
				kc := min(g.k.kc, kk-p0)
				if rows == mr { // stored rows of B, read in place
					g.k.fnRA(kc, g.b[j0*g.csB+p0:], g.csB, bp[p0*nr:], nr, l.tile, nr, p0 > 0)
				} else { // ragged last group: pack it, zero-padded
					packA(mr, l.a, g.b, g.csB, g.rsB, j0, rows, p0, kc)
					g.k.fn(kc, l.a[:mr*kc], bp[p0*nr:], nr, l.tile, nr, p0 > 0)
				}
			}
			// tile[r][c] = C(jp*nr+c, j0+r): store transposed.
			cols := min(nr, g.m-jp*nr)
			for c := range cols {
				dst := g.c[(jp*nr+c)*g.n+j0 : (jp*nr+c)*g.n+j0+rows]
				for r := range dst {
					dst[r] = l.tile[r*nr+c]
				}
			}
		}
	}
}

// packB packs task t's share of the current B block into the shared
// scratch.
func (g *gemm) packB(_, t int) {
	panels := ceilDiv(g.nc, g.k.nr)
	lo, hi := span(panels, min(panels, 2*threads()), t)
	packB(g.k.nr, g.s.bShared, g.b, g.rsB, g.csB, g.p0, g.kc, g.j0+lo*g.k.nr, min(g.nc-lo*g.k.nr, (hi-lo)*g.k.nr), lo)
}

// compute runs one (row block, column chunk) task of the current block.
func (g *gemm) compute(w, t int) {
	ib, jb := t/g.nJ, t%g.nJ
	i0 := ib * g.mc
	mc := min(g.mc, g.m-i0)
	l := &g.s.worker[w]
	packA(g.k.mr, l.a, g.a, g.rsA, g.csA, i0, mc, g.p0, g.kc)
	panels := ceilDiv(g.nc, g.k.nr)
	lo, hi := span(panels, g.nJ, jb)
	g.macroOn(l, l.a, g.s.bShared, 0, g.c, g.j0, g.nc, g.kc, g.p0, g.accum, lo, hi, i0, mc)
}

// packAll packs task t's share of the panels of op(A), every depth block
// (directB): panel ip of depth block p0 at aAll[p0*mp + ip*mr*kc:].
func (g *gemm) packAll(_, t int) {
	mr, mp := g.k.mr, roundUp(g.m, g.k.mr)
	panels := ceilDiv(g.m, mr)
	lo, hi := span(g.aPanels, g.aTasks, t)
	for i := lo; i < hi; i++ {
		p0, ip := i/panels*g.k.kc, i%panels
		kc := min(g.k.kc, g.kk-p0)
		packA(mr, g.s.aAll[p0*mp+ip*mr*kc:], g.a, g.rsA, g.csA, ip*mr, min(mr, g.m-ip*mr), p0, kc)
	}
}

// directCompute runs task t's range of column panels of a directB product
// through every depth block, from the A packed whole.
func (g *gemm) directCompute(w, t int) {
	nr, mp := g.k.nr, roundUp(g.m, g.k.mr)
	panels := ceilDiv(g.n, nr)
	lo, hi := span(panels, min(panels, 4*threads()), t)
	for p0 := 0; p0 < g.kk; p0 += g.k.kc {
		// The ragged last panel is the only packed one, all depths at
		// bShared[0:]: offset so that panel panels-1 of this block lands
		// on its depths p0 on.
		g.macroOn(&g.s.worker[w], g.s.aAll[p0*mp:], g.s.bShared[p0*nr:], g.n/nr, g.c, 0, g.n,
			min(g.k.kc, g.kk-p0), p0, p0 > 0, lo, hi, 0, g.m)
	}
}

// serialBatch computes batch item i on worker w alone, packing into the
// worker's own scratch.
func (g *gemm) serialBatch(w, i int) {
	a, b, c := g.a[i*g.sa:(i+1)*g.sa], g.b[i*g.sb:(i+1)*g.sb], g.c[i*g.sc:(i+1)*g.sc]
	l := &g.s.worker[w]
	for j0 := 0; j0 < g.n; j0 += g.k.nc {
		nc := min(g.k.nc, g.n-j0)
		for p0 := 0; p0 < g.kk; p0 += g.k.kc {
			kc := min(g.k.kc, g.kk-p0)
			packB(g.k.nr, l.b, b, g.rsB, g.csB, p0, kc, j0, nc, 0)
			for i0 := 0; i0 < g.m; i0 += g.mc {
				mc := min(g.mc, g.m-i0)
				packA(g.k.mr, l.a, a, g.rsA, g.csA, i0, mc, p0, kc)
				g.macroOn(l, l.a, l.b, 0, c, j0, nc, kc, p0, p0 > 0, 0, ceilDiv(nc, g.k.nr), i0, mc)
			}
		}
	}
}

// macroOn multiplies the packed A block ap (rows i0..i0+mc, depth p0..p0+kc)
// by packed B panels plo..phi of the block starting at column j0, into c;
// panel jp is packed at bp[(jp-bOff)*kc*nr:]. The B micro-panel of the
// outer loop stays in L1 while the A micro-panels stream from L2.
// With directB, full B panels are read in place from g.b.
func (g *gemm) macroOn(l *gemmLocal, ap, bp []float32, bOff int, c []float32, j0, nc, kc, p0 int, accum bool, plo, phi, i0, mc int) {
	mr, nr, ldc := g.k.mr, g.k.nr, g.n
	if g.k.block != nil {
		// Every tile in one call; with directB two: the full panels read
		// in place, then the ragged last one from its packing.
		l.blk = blockCall{kc: kc, a: ap, ars: 1, aks: mr, aps: mr * kc, rows: mc,
			crs: ldc, ccs: 1, accum: accum, tile: l.tile}
		if full := min(phi, nc/nr); g.directB && plo < full {
			l.blk.b, l.blk.ldb, l.blk.bps = g.b[p0*g.rsB+j0+plo*nr:], g.rsB, nr
			l.blk.cols, l.blk.c = (full-plo)*nr, c[i0*ldc+j0+plo*nr:]
			g.k.block(&l.blk)
			plo = full
		}
		if plo < phi {
			l.blk.b, l.blk.ldb, l.blk.bps = bp[(plo-bOff)*kc*nr:], nr, kc*nr
			l.blk.cols, l.blk.c = min(nc, phi*nr)-plo*nr, c[i0*ldc+j0+plo*nr:]
			g.k.block(&l.blk)
		}
		return
	}
	fn := g.k.fn
	for jp := plo; jp < phi; jp++ {
		col := j0 + jp*nr
		cols := min(nr, j0+nc-col)
		var b []float32
		ldb := nr
		if g.directB && cols == nr {
			b, ldb = g.b[p0*g.rsB+col:], g.rsB
		} else {
			b = bp[(jp-bOff)*kc*nr : (jp-bOff+1)*kc*nr]
		}
		for ir := 0; ir < mc; ir += mr {
			a := ap[ir*kc : (ir+mr)*kc]
			rows := min(mr, mc-ir)
			off := (i0+ir)*ldc + col
			if rows == mr && cols == nr {
				fn(kc, a, b, ldb, c[off:], ldc, accum)
				continue
			}
			// Ragged edge: compute the full tile aside, keep the valid part.
			fn(kc, a, b, ldb, l.tile, nr, false)
			for r := range rows {
				dst := c[off+r*ldc : off+r*ldc+cols]
				src := l.tile[r*nr : r*nr+cols]
				if accum {
					for j, v := range src {
						dst[j] += v
					}
				} else {
					copy(dst, src)
				}
			}
		}
	}
}

// packA packs rows i0..i0+mc, depth p0..p0+kc of A into mr-row panels:
// dst[panel*kc*mr + p*mr + r] = A(i0+panel*mr+r, p0+p), zero past the rows.
func packA(mr int, dst, a []float32, rsA, csA, i0, mc, p0, kc int) {
	for ir := 0; ir < mc; ir += mr {
		rows := min(mr, mc-ir)
		// At 1024, A packed by the loops below (0.32 ns a float) took 3%
		// of a product, and 12% at 256, where it precedes the parallel part.
		done := packVec(mr, dst[ir*kc:(ir+mr)*kc], a, rsA, csA, i0+ir, rows, p0, kc)
		if done < kc {
			packPanel(mr, dst[ir*kc+done*mr:(ir+mr)*kc], a, rsA, csA, i0+ir, rows, p0+done, kc-done)
		}
	}
}

// packPanel packs one panel of packA: rows i0..i0+rows (at most mr),
// depth p0..p0+kc, into d.
func packPanel(mr int, d, a []float32, rsA, csA, i0, rows, p0, kc int) {
	if rsA == 1 { // stored transposed: mr rows of one column are contiguous
		for p := range kc {
			src := a[(p0+p)*csA+i0:]
			dp := d[p*mr : p*mr+mr]
			copy(dp, src[:rows])
			clear(dp[rows:])
		}
		return
	}
	// Row-major: four source rows at once, four adjacent floats per k.
	r := 0
	for ; r+4 <= rows; r += 4 {
		base := (i0+r)*rsA + p0
		s0 := a[base : base+kc]
		s1 := a[base+rsA : base+rsA+kc]
		s2 := a[base+2*rsA : base+2*rsA+kc]
		s3 := a[base+3*rsA : base+3*rsA+kc]
		for p := range s0 {
			dp := d[p*mr+r : p*mr+r+4 : p*mr+r+4]
			dp[0], dp[1], dp[2], dp[3] = s0[p], s1[p], s2[p], s3[p]
		}
	}
	for ; r < rows; r++ {
		src := a[(i0+r)*rsA+p0 : (i0+r)*rsA+p0+kc]
		for p, v := range src {
			d[p*mr+r] = v
		}
	}
	for r := rows; r < mr; r++ {
		for p := range kc {
			d[p*mr+r] = 0
		}
	}
}

// packB packs depth p0..p0+kc, columns j0..j0+nc of B into nr-column panels, numbered from panel0 in dst:
// dst[panel*kc*nr + p*nr + c] = B(p0+p, j0+(panel-panel0)*nr+c), zero past nc.
// That is packA of B's transpose (strides swapped), so both share one loop.
func packB(nr int, dst, b []float32, rsB, csB, p0, kc, j0, nc, panel0 int) {
	packA(nr, dst[panel0*kc*nr:], b, csB, rsB, j0, nc, p0, kc)
}
