package nn

import (
	"fmt"
	"math"
	"sync"

	"github.com/ag-go/ag/core"
)

// UpsampleMode is how Upsample interpolates.
type UpsampleMode int

const (
	// UpsampleNearest copies the nearest input pixel: the one at
	// floor(dst*in/out) (floor(dst/scale) for a scale factor), PyTorch's
	// mode 'nearest'.
	UpsampleNearest UpsampleMode = iota
	// UpsampleBilinear interpolates linearly along each spatial axis
	// between the two nearest input pixels, PyTorch's mode 'bilinear'.
	UpsampleBilinear
)

// String returns PyTorch's name of the mode.
func (m UpsampleMode) String() string {
	switch m {
	case UpsampleNearest:
		return "nearest"
	case UpsampleBilinear:
		return "bilinear"
	}
	return fmt.Sprintf("UpsampleMode(%d)", int(m))
}

// Upsample resizes the spatial axes of an input [N, C, H, W] to Size, or
// by Scale (then OH = floor(H*Scale[0]), OW likewise), as PyTorch's
// nn.Upsample and F.interpolate for modes nearest and bilinear. With a
// scale factor the source coordinates are computed from it (PyTorch's
// default recompute_scale_factor=None), with a size from in/out. Bilinear
// with AlignCorners maps the corner pixels' centres onto each other
// (src = dst*(in-1)/(out-1)); without, the pixels' areas (src =
// (dst+0.5)*in/out - 0.5, clamped at 0), PyTorch's align_corners=False.
//
// Each axis is one or two core.Gathers of rows by host-made Constant
// index tables, and for bilinear a weighted sum of the two (w0*x[i0] +
// w1*x[i1], as PyTorch computes it, so a NaN or an Inf reaches only the
// outputs that read it); the gathers' gradients are core's inverse
// tables, so the backward is linear in the input's size. No parameters.
type Upsample struct {
	Size         [2]int     // the output's [OH, OW]; zero: from Scale
	Scale        [2]float64 // scale factors of H and W, used when Size is zero
	Mode         UpsampleMode
	AlignCorners bool // bilinear only
	cache        upsampleCache
}

// NewUpsample makes an Upsample by the scale factor scale on both axes.
func NewUpsample(scale float64, mode UpsampleMode, alignCorners bool) *Upsample {
	u := &Upsample{Scale: [2]float64{scale, scale}, Mode: mode, AlignCorners: alignCorners}
	u.check("NewUpsample")
	return u
}

// NewUpsampleSize makes an Upsample to the output size [OH, OW].
func NewUpsampleSize(size [2]int, mode UpsampleMode, alignCorners bool) *Upsample {
	u := &Upsample{Size: size, Mode: mode, AlignCorners: alignCorners}
	u.check("NewUpsampleSize")
	return u
}

func (u *Upsample) check(fn string) {
	if u.Mode != UpsampleNearest && u.Mode != UpsampleBilinear {
		panic(fmt.Sprintf("nn.%s: mode %v, want UpsampleNearest or UpsampleBilinear", fn, u.Mode))
	}
	if u.AlignCorners && u.Mode == UpsampleNearest {
		panic(fmt.Sprintf("nn.%s: align corners with mode nearest: PyTorch refuses it (bilinear only)", fn))
	}
	if u.Size != [2]int{} {
		if u.Size[0] < 1 || u.Size[1] < 1 {
			panic(fmt.Sprintf("nn.%s: size %v, want both >= 1", fn, u.Size))
		}
		return
	}
	for _, s := range u.Scale {
		if !(s > 0) || math.IsInf(s, 0) {
			panic(fmt.Sprintf("nn.%s: scale %v and no size: want finite scales > 0 (or a size)", fn, u.Scale))
		}
	}
}

// Forward resizes x of shape [N, C, H, W].
func (u *Upsample) Forward(x *core.Tensor) *core.Tensor {
	const fn = "Upsample.Forward"
	if x == nil {
		panic("nn." + fn + ": nil input")
	}
	if x.Rank() != 4 {
		panic(fmt.Sprintf("nn.%s: input of shape %v, want [N, C, H, W]", fn, x.Shape()))
	}
	u.check(fn)
	var axes [2]upsampleAxis
	for i := range axes {
		a := upsampleAxis{dev: x.Device(), in: x.Dim(2 + i), mode: u.Mode, align: u.AlignCorners, size: u.Size[i] != 0}
		if a.size {
			a.out = u.Size[i]
		} else {
			a.scale = u.Scale[i]
			a.out = int(math.Floor(float64(a.in) * a.scale))
		}
		if a.out < 1 {
			panic(fmt.Sprintf("nn.%s: input of shape %v by scale %v gives an empty output", fn, x.Shape(), u.Scale))
		}
		axes[i] = a
	}
	dev := x.Device()
	var y *core.Tensor
	dev.Scope("Upsample", func() {
		dev.Composite("Upsample", func() {
			// [N, C, H, W] -> [W, N, C, H] -> [OW, N, C, H] -> [H, N, C, OW]
			// -> [OH, N, C, OW] -> [N, C, OH, OW]
			t := u.cache.get(axes[1]).apply(core.Permute(x, 3, 0, 1, 2))
			t = u.cache.get(axes[0]).apply(core.Permute(t, 3, 1, 2, 0))
			y = core.Permute(t, 1, 2, 0, 3)
		})
	})
	return y
}

// Params returns nil: Upsample has no parameters.
func (u *Upsample) Params() []*core.Tensor { return nil }

// upsampleAxis is the resize of one axis; it keys the cache of tables.
type upsampleAxis struct {
	dev     *core.Device
	in, out int
	mode    UpsampleMode
	align   bool
	size    bool    // the output size was given: coordinates by in/out
	scale   float64 // else the scale factor
}

// upsampleTables are an axis's gather tables ([out]) and, for bilinear,
// the weights of the two rows ([out, 1, 1, 1]).
type upsampleTables struct {
	i0, i1, w0, w1 *core.Tensor
}

// tables computes the source indices and weights in float32, as PyTorch's
// CPU kernels (UpSample.h: nearest_idx, area_pixel_compute_source_index).
func (a upsampleAxis) tables() (i0, i1 []float32, w0, w1 []float32) {
	// PyTorch's compute_scales_value: 1/scale where a scale factor is
	// given, else in/out
	scale := float32(a.in) / float32(a.out)
	if !a.size {
		scale = float32(1 / a.scale)
	}
	i0 = make([]float32, a.out)
	if a.mode == UpsampleNearest {
		for d := range a.out {
			switch {
			case a.out == a.in:
				i0[d] = float32(d)
			case a.out == 2*a.in:
				i0[d] = float32(d >> 1)
			default:
				i0[d] = float32(min(int(float32(math.Floor(float64(float32(d)*scale)))), a.in-1))
			}
		}
		return i0, nil, nil, nil
	}
	if a.align {
		scale = 0
		if a.out > 1 {
			scale = float32(a.in-1) / float32(a.out-1)
		}
	}
	i1, w0, w1 = make([]float32, a.out), make([]float32, a.out), make([]float32, a.out)
	for d := range a.out {
		var src float32
		if a.align {
			src = scale * float32(d)
		} else {
			src = max(scale*(float32(d)+0.5)-0.5, 0)
		}
		k := min(int(math.Floor(float64(src))), a.in-1)
		lambda := min(max(src-float32(k), 0), 1)
		i0[d] = float32(k)
		i1[d] = float32(k)
		if k < a.in-1 {
			i1[d] = float32(k + 1)
		}
		w0[d], w1[d] = 1-lambda, lambda
	}
	return i0, i1, w0, w1
}

// apply resizes the first axis of t (rank 4).
func (tb *upsampleTables) apply(t *core.Tensor) *core.Tensor {
	y := core.Gather(t, tb.i0)
	if tb.i1 != nil {
		y = core.Add(core.Mul(y, tb.w0), core.Mul(core.Gather(t, tb.i1), tb.w1))
	}
	return y
}

// upsampleCache holds an Upsample's tables, per axis geometry; it is
// safe for concurrent use.
type upsampleCache struct {
	mu sync.Mutex
	m  map[upsampleAxis]*upsampleTables
}

func (c *upsampleCache) get(a upsampleAxis) *upsampleTables {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[a]; ok {
		return t
	}
	i0, i1, w0, w1 := a.tables()
	t := &upsampleTables{i0: a.dev.Constant(i0, a.out)}
	if i1 != nil {
		t.i1 = a.dev.Constant(i1, a.out)
		t.w0 = a.dev.Constant(w0, a.out, 1, 1, 1)
		t.w1 = a.dev.Constant(w1, a.out, 1, 1, 1)
	}
	if c.m == nil || len(c.m) >= 2*maxCached {
		c.m = map[upsampleAxis]*upsampleTables{}
	}
	c.m[a] = t
	return t
}
