//go:build amd64 && !purego

package cpu

//go:noescape
func packT12x16(n int, src *float32, rs int, dst *float32)

//go:noescape
func packCopy(n int, src *float32, ss int, dst *float32, ds int, masks uint64)

// packVec packs what it can of one mr-row panel with AVX-512 (see packA)
// and returns how many depth steps it did: all of them when the rows are
// contiguous per step (rsA == 1: masked copies, zero-padded), else for
// full 12-row panels the largest multiple of 16 (register transposes).
func packVec(mr int, d, a []float32, rsA, csA, i0, rows, p0, kc int) int {
	if !hasAVX512 || kc == 0 {
		return 0
	}
	if rsA == 1 {
		if mr > 32 {
			return 0
		}
		base := p0*csA + i0
		_ = a[base+(kc-1)*csA+rows-1]
		_ = d[kc*mr-1]
		packCopy(kc, &a[base], csA, &d[0], mr, uint64(1<<rows-1)|uint64(1<<mr-1)<<32)
		return kc
	}
	n := kc &^ 15
	if mr != 12 || rows != 12 || csA != 1 || n == 0 {
		return 0
	}
	base := i0*rsA + p0
	_ = a[base+11*rsA+n-1]
	_ = d[n*12-1]
	packT12x16(n, &a[base], rsA, &d[0])
	return n
}
