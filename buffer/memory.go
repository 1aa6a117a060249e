package buffer

import (
	"math"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
)

// memShare is the share of the free device memory a buffer may take: some
// drivers report free memory only approximately, so a margin is kept.
const memShare = 0.85

// wordsOf is the 32-bit words a record takes on the device: width f32
// values, or width 16-bit values two to a word.
func wordsOf(width int, storage core.Precision) int {
	if storage == core.PrecisionF32 {
		return width
	}
	return backend.PackedLen(width)
}

func bytesOf(width, capacity int, storage core.Precision) float64 {
	return 4 * float64(wordsOf(width, storage)) * float64(capacity)
}

func mb(bytes float64) float64 { return bytes / (1 << 20) }

// checkFits refuses a buffer the device cannot hold, before allocating it:
// an allocation that almost fills a GPU makes the next graph fail far from
// the cause, so the refusal names the numbers here instead. It counts the
// bytes the storage takes (16-bit records half of f32's).
func checkFits(fn string, dev *core.Device, width, capacity int, storage core.Precision) error {
	words := wordsOf(width, storage)
	bytes := bytesOf(width, capacity, storage)
	if capacity > math.MaxInt/words {
		return errorf(ErrTooLarge, "buffer.%s: %d x %d records do not fit in an int", fn, capacity, width)
	}
	free, total, err := dev.Memory()
	// Without an estimate (an error, or nothing reported) the allocation
	// itself will tell.
	if usable := memShare * float64(free); err == nil && total > 0 && bytes > usable {
		return errorf(ErrTooLarge, "buffer.%s: %.1f MB requested, the device reports %.1f MB free, of which %.1f MB (%.0f%%) may be used. Reduce the capacity.",
			fn, mb(bytes), mb(float64(free)), mb(usable), 100*memShare)
	}
	if maxElems := dev.Info().MaxBufferElems; maxElems > 0 && words*capacity > maxElems {
		return errorf(ErrTooLarge, "buffer.%s: %.1f MB requested, the device's largest buffer holds %.1f MB. Reduce the capacity.",
			fn, mb(bytes), mb(4*float64(maxElems)))
	}
	return nil
}
