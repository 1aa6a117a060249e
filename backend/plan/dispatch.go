package plan

// Dispatch arithmetic: how a GPU backend covers a node's elements with
// workgroups and, where a value is larger than one storage binding, splits
// the node over bound ranges of its buffers. It is pure arithmetic over the
// limits every compute API states (WebGPU's maxComputeWorkgroupsPerDimension,
// maxStorageBufferBindingSize and minStorageBufferOffsetAlignment; Vulkan's
// maxComputeWorkGroupCount, maxStorageBufferRange and
// minStorageBufferOffsetAlignment), so a second GPU backend reuses it and
// only its kernels differ. Elements are 4 bytes (f32 values, u32 words).

// DispatchLimits are the device limits that bound one dispatch.
type DispatchLimits struct {
	// MaxGroupsPerDim bounds the workgroups along one grid dimension.
	MaxGroupsPerDim int
	// MaxBindingBytes bounds one storage binding, in bytes.
	MaxBindingBytes uint64
	// OffsetAlign is the alignment of a binding's offset, in bytes.
	OffsetAlign int
}

// Grid covers n items with workgroups of per items each, folding the
// workgroups into a second dimension beyond MaxGroupsPerDim (a grid is at
// least 1x1: a dispatch of no items still runs its bounds check).
func (l DispatchLimits) Grid(n, per int) (x, y uint32) {
	groups := max((n+per-1)/per, 1)
	gx := min(groups, max(l.MaxGroupsPerDim, 1))
	return uint32(gx), uint32((groups + gx - 1) / gx)
}

// Fits reports whether n elements fit one binding.
func (l DispatchLimits) Fits(n int) bool { return uint64(n)*4 <= l.MaxBindingBytes }

// RangeRecords is how many records one bound range holds when a node is
// split over ranges of records: a record is widths[k] consecutive elements
// of the k-th buffer bound (a table row and its output row, a packed
// record's words and its values), every range of every buffer starts at an
// aligned offset, and the widest fits one binding. 0: one record does not
// fit. Elementwise ops are records of width 1.
func (l DispatchLimits) RangeRecords(widths ...int) int {
	al := max(l.OffsetAlign/4, 1)
	step, widest := 1, 1
	for _, w := range widths {
		s := al / gcd(w, al) // records between aligned starts in this buffer
		step = step / gcd(step, s) * s
		widest = max(widest, w)
	}
	return int(l.MaxBindingBytes/4) / widest / step * step
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// PackParams lays the parameters of every dispatch (sizes and scalars,
// params[k] the k-th dispatch's) out in one buffer written once, so that a
// run binds ranges of it rather than writing parameters: each dispatch's
// at a byte offset (offs[k]) aligned for storage bindings (align bytes, at
// least 4), and each at least one word long, since a binding cannot be
// empty.
func PackParams(params [][]uint32, align int) (words []uint32, offs []uint64) {
	al := uint64(max(align, 4))
	offs = make([]uint64, len(params))
	for k, ps := range params {
		for uint64(len(words))*4%al != 0 {
			words = append(words, 0)
		}
		offs[k] = uint64(len(words)) * 4
		words = append(words, ps...)
		if len(ps) == 0 {
			words = append(words, 0)
		}
	}
	if len(words) == 0 {
		words = []uint32{0}
	}
	return words, offs
}
