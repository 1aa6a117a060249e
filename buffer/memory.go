package buffer

import (
	"math"

	"github.com/ag-go/ag/core"
)

// memShare is the share of the free device memory a buffer may take: some
// drivers report free memory only approximately, so a margin is kept.
const memShare = 0.85

func bytesOf(width, capacity int) float64 { return 4 * float64(width) * float64(capacity) }

func mb(bytes float64) float64 { return bytes / (1 << 20) }

// checkFits refuses a buffer the device cannot hold, before allocating it:
// an allocation that almost fills a GPU makes the next graph fail far from
// the cause, so the refusal names the numbers here instead.
func checkFits(dev *core.Device, width, capacity int) error {
	bytes := bytesOf(width, capacity)
	if capacity > math.MaxInt/width {
		return errorf(ErrTooLarge, "buffer.New: %d x %d records do not fit in an int", capacity, width)
	}
	free, total, err := dev.Memory()
	// Without an estimate (an error, or nothing reported) the allocation
	// itself will tell.
	if usable := memShare * float64(free); err == nil && total > 0 && bytes > usable {
		return errorf(ErrTooLarge, "buffer.New: %.1f MB requested, the device reports %.1f MB free, of which %.1f MB (%.0f%%) may be used. Reduce the capacity.",
			mb(bytes), mb(float64(free)), mb(usable), 100*memShare)
	}
	if maxElems := dev.Info().MaxBufferElems; maxElems > 0 && width*capacity > maxElems {
		return errorf(ErrTooLarge, "buffer.New: %.1f MB requested, the device's largest buffer holds %.1f MB. Reduce the capacity.",
			mb(bytes), mb(4*float64(maxElems)))
	}
	return nil
}
