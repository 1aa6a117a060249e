package main

import "fmt"

// memoryBudget bounds what one MLP of the page's ag.build may need, in bytes. The page's
// Go runs in wasm32, whose linear memory ends at 4 GiB, and Go's collector
// lets the heap grow to about twice the live data before it collects: a
// model past half of it killed the runtime ("out of memory") during
// ag.build, and every later call failed. On webgpu the values live on the
// GPU, but closing the device (a switch back to cpu) rescues them all into
// the same heap, so the bound is the same.
const memoryBudget = 2 << 30

// mlpBytes estimates the memory the page's MLP (workload.New) holds once
// built and stepping: parameters with their gradients and Adam's two
// moments (4 floats a parameter), the teacher matrix made while building,
// the data set (4 batches of inputs and targets), and each layer's
// activations saved for the backward with their gradients.
func mlpBytes(width, depth, batch int) int64 {
	w, d, b := int64(width), int64(depth), int64(batch)
	params := d * (w*w + w)
	floats := 4*params + w*w + 2*4*b*w + 4*d*b*w
	return 4 * floats
}

// checkFits refuses an MLP that does not fit before anything is built:
// its estimate (mlpBytes) over memoryBudget, or on a device with a buffer
// limit (a WebGPU adapter's maxBufferSize and maxStorageBufferBindingSize)
// a weight matrix or the data set over that limit. The error names the
// size asked for and the largest width at its depth, and depth at its
// width, that fit. The bound holds natively too: the model is the page's.
// maxElems is the device's buffer limit in floats (0: none).
func checkFits(width, depth, batch int, maxElems int64) error {
	fits := func(w, d int) bool {
		if mlpBytes(w, d, batch) > memoryBudget {
			return false
		}
		// The largest buffers: one weight matrix, the inputs and targets
		// of the 4 batches.
		return maxElems == 0 || int64(w)*int64(w) <= maxElems && 4*int64(batch)*int64(w) <= maxElems
	}
	if fits(width, depth) {
		return nil
	}
	why := fmt.Sprintf("needs about %s, over the %s this page's wasm memory allows (wasm32's 4 GiB, half of it for Go's collector)",
		gib(mlpBytes(width, depth, batch)), gib(memoryBudget))
	if mlpBytes(width, depth, batch) <= memoryBudget {
		why = fmt.Sprintf("has a buffer of %d floats, over the %d the device's buffers may hold", max(int64(width)*int64(width), 4*int64(batch)*int64(width)), maxElems)
	}
	largest := func(hi int, ok func(int) bool) int { // the largest n in 1..hi with ok(n), 0 if none
		lo := 0
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if ok(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	w := largest(maxWidth, func(w int) bool { return fits(w, depth) })
	d := largest(maxDepth, func(d int) bool { return fits(width, d) })
	fit := fmt.Sprintf("the largest that fits: width %d at depth %d", w, depth)
	if w == 0 {
		fit = fmt.Sprintf("no width fits at depth %d", depth)
	}
	if d > 0 {
		fit += fmt.Sprintf(", or depth %d at width %d", d, width)
	}
	return fmt.Errorf("an MLP of width %d, depth %d, batch %d %s: %s (batch %d)", width, depth, batch, why, fit, batch)
}

// gib writes n bytes in GiB, or MiB below one GiB.
func gib(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
