//go:build js && wasm

package cpu

// The SIMD block kernel, generated as wasm: every mr x nr tile of a rows x
// cols block of C in one call, so that the cost of a call from Go into the
// module (about a microsecond through syscall/js) is paid per block, not
// per tile. Addresses and strides are bytes of the Go instance's memory,
// which the module imports.
//
//	C(i, j) at c + i*crs + j*ccs  = (accum ? C : 0) + sum over p < kc of
//	A(i, p) at a + (i/mr)*aps + (i%mr)*ars + p*aks  *
//	B(p, j) at b + (j/nr)*bps + p*ldb + (j%nr)*4
//
// A packed by packA (ars 4, aks 4*mr) is read at constant offsets; the
// in-place variant (rows of A anywhere, ars arbitrary) adds a row offset per
// load. B rows must hold nr readable floats per tile (packed panels are
// zero-padded; in-place B is passed as full panels only), and packed A
// mr readable rows; in-place A rows past the block are not read (they
// repeat row 0). A tile that is ragged, or whose columns are not contiguous
// (ccs != 4: the swapped product stores C transposed), is computed into
// tile (mr*nr floats) and copied element by element.

// Words of the parameter block the kernel reads (int32 each): passing them
// in memory instead of as call arguments keeps a call allocation-free (a
// syscall/js argument boxes every integer over 255).
const (
	pKC = iota
	pA
	pARS
	pAKS
	pAPS
	pRows
	pB
	pLDB
	pBPS
	pCols
	pC
	pCRS
	pCCS
	pAccum
	pTile
	nParams
)

// genBlockKernel returns the block kernel for mr x nr tiles (nr a multiple
// of 4) reading its parameters at address params; inPlaceA selects A read
// through row offsets instead of packed.
func genBlockKernel(mr, nr int, inPlaceA bool, params uint32) *wasmFunc {
	f := &wasmFunc{}
	var prm [nParams]uint32
	for i := range prm {
		prm[i] = f.local(wI32)
		f.i32(int32(params))
		f.mem(opI32Load, 2, uint32(4*i))
		f.set(prm[i])
	}
	kc, a, ars, aks, aps, rows := prm[pKC], prm[pA], prm[pARS], prm[pAKS], prm[pAPS], prm[pRows]
	b, ldb, bps, cols := prm[pB], prm[pLDB], prm[pBPS], prm[pCols]
	c, crs, ccs, accum, tile := prm[pC], prm[pCRS], prm[pCCS], prm[pAccum], prm[pTile]
	l := func() uint32 { return f.local(wI32) }
	j, i, cp, ct, ap, pbp, pa, pb, k, cj, rr, t := l(), l(), l(), l(), l(), l(), l(), l(), l(), l(), l(), l()
	dir, dst, drs, dacc, d, ii, jj, sp, srow, drow, stepI, stepJ := l(), l(), l(), l(), l(), l(), l(), l(), l(), l(), l(), l()
	off := make([]uint32, mr) // in-place A: byte offset of row r (0 past the block)
	if inPlaceA {
		for r := 1; r < mr; r++ {
			off[r] = l()
		}
	}
	nv := nr / 4
	acc := make([][]uint32, mr)
	for r := range acc {
		acc[r] = make([]uint32, nv)
		for v := range acc[r] {
			acc[r][v] = f.local(wV128)
		}
	}
	bv := make([]uint32, nv)
	for v := range bv {
		bv[v] = f.local(wV128)
	}
	av := f.local(wV128)

	// minTo emits dst = min(lim, n - x).
	minTo := func(dst uint32, lim int32, n, x uint32) {
		f.i32(lim)
		f.get(n)
		f.get(x)
		f.op(opI32Sub)
		f.tee(t)
		f.get(t)
		f.i32(lim)
		f.op(opI32GtS)
		f.op(opSelect)
		f.set(dst)
	}
	// loopWhile closes a do-while loop: x += step; continue while x < n.
	loopWhile := func(x uint32, step int32, n uint32) {
		f.addConst(x, step)
		f.get(x)
		f.get(n)
		f.op(opI32LtS)
		f.brIf(0)
		f.op(opEnd)
	}

	f.get(crs)
	f.i32(int32(mr))
	f.op(opI32Mul)
	f.set(stepI)
	f.get(ccs)
	f.i32(int32(nr))
	f.op(opI32Mul)
	f.set(stepJ)
	f.i32(0)
	f.set(j)
	f.get(c)
	f.set(cp)
	f.get(b)
	f.set(pbp)
	f.op(opLoop, blockVoid) // column panels
	minTo(cj, int32(nr), cols, j)
	f.i32(0)
	f.set(i)
	f.get(a)
	f.set(ap)
	f.get(cp)
	f.set(ct)
	f.op(opLoop, blockVoid) // row tiles
	minTo(rr, int32(mr), rows, i)
	for r := 1; inPlaceA && r < mr; r++ {
		f.get(ars)
		f.i32(int32(r))
		f.op(opI32Mul)
		f.i32(0)
		f.i32(int32(r))
		f.get(rr)
		f.op(opI32LtS)
		f.op(opSelect)
		f.set(off[r])
	}
	for r := range acc {
		for _, x := range acc[r] {
			f.zero128()
			f.set(x)
		}
	}
	f.get(ap)
	f.set(pa)
	f.get(pbp)
	f.set(pb)
	f.get(kc)
	f.set(k)
	f.op(opLoop, blockVoid) // depth
	for v, x := range bv {
		f.get(pb)
		f.simdMem(simdV128Load, uint32(16*v))
		f.set(x)
	}
	for r := range acc {
		// One broadcast A value live at a time: mr*nv accumulators, nv B
		// vectors, it and a product must fit V8's 16 xmm registers.
		f.get(pa)
		if inPlaceA {
			if r > 0 {
				f.get(off[r])
				f.op(opI32Add)
			}
			f.simdMem(simdLoad32Splat, 0)
		} else {
			f.simdMem(simdLoad32Splat, uint32(4*r))
		}
		f.set(av)
		for v, x := range acc[r] {
			f.get(x)
			f.get(av)
			f.get(bv[v])
			f.simd(simdF32x4Mul)
			f.simd(simdF32x4Add)
			f.set(x)
		}
	}
	f.addLocal(pa, aks)
	f.addLocal(pb, ldb)
	f.get(k)
	f.i32(1)
	f.op(opI32Sub)
	f.tee(k)
	f.brIf(0)
	f.op(opEnd)

	// A full tile with contiguous columns is stored in place, any other
	// into tile and copied below.
	f.get(rr)
	f.i32(int32(mr))
	f.op(opI32Eq)
	f.get(cj)
	f.i32(int32(nr))
	f.op(opI32Eq)
	f.op(opI32And)
	f.get(ccs)
	f.i32(4)
	f.op(opI32Eq)
	f.op(opI32And)
	f.tee(dir)
	f.op(opIf, blockVoid)
	f.get(ct)
	f.set(dst)
	f.get(crs)
	f.set(drs)
	f.get(accum)
	f.set(dacc)
	f.op(opElse)
	f.get(tile)
	f.set(dst)
	f.i32(int32(4 * nr))
	f.set(drs)
	f.i32(0)
	f.set(dacc)
	f.op(opEnd)
	store := func(add bool) {
		f.get(dst)
		f.set(d)
		for r := range acc {
			for v, x := range acc[r] {
				f.get(d)
				f.get(x)
				if add {
					f.get(d)
					f.simdMem(simdV128Load, uint32(16*v))
					f.simd(simdF32x4Add)
				}
				f.simdMem(simdV128Store, uint32(16*v))
			}
			f.addLocal(d, drs)
		}
	}
	f.get(dacc)
	f.op(opIf, blockVoid)
	store(true)
	f.op(opElse)
	store(false)
	f.op(opEnd)

	// Copy the valid rr x cj part of tile to C: C = tile (+ C if accum).
	f.get(dir)
	f.op(opI32Eqz)
	f.op(opIf, blockVoid)
	f.i32(0)
	f.set(ii)
	f.get(tile)
	f.set(srow)
	f.get(ct)
	f.set(drow)
	f.op(opLoop, blockVoid)
	f.i32(0)
	f.set(jj)
	f.get(srow)
	f.set(sp)
	f.get(drow)
	f.set(d)
	f.op(opLoop, blockVoid)
	f.get(d)
	f.get(sp)
	f.mem(opF32Load, 2, 0)
	f.get(d)
	f.mem(opF32Load, 2, 0)
	f.op(opF32Add)
	f.get(sp)
	f.mem(opF32Load, 2, 0)
	f.get(accum)
	f.op(opSelect)
	f.mem(opF32Store, 2, 0)
	f.addConst(sp, 4)
	f.addLocal(d, ccs)
	loopWhile(jj, 1, cj)
	f.addConst(srow, int32(4*nr))
	f.addLocal(drow, crs)
	loopWhile(ii, 1, rr)
	f.op(opEnd)

	f.addLocal(ap, aps)
	f.addLocal(ct, stepI)
	loopWhile(i, int32(mr), rows)
	f.addLocal(pbp, bps)
	f.addLocal(cp, stepJ)
	loopWhile(j, int32(nr), cols)
	return f
}

// simdModuleBytes is the module exporting the block kernel for mr x nr
// tiles as "gemm" (A packed) and "gemmRA" (A rows in place).
func simdModuleBytes(mr, nr int, params uint32) []byte {
	return wasmModule([]string{"gemm", "gemmRA"},
		[]*wasmFunc{genBlockKernel(mr, nr, false, params), genBlockKernel(mr, nr, true, params)})
}
