//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import "github.com/ag-go/ag/backend"

// im2col is ggml_im2col with an f32 result: [IC*KH*KW, OW, OH, N] in ggml's
// order is im2col's [N*OH*OW, C*KH*KW]. ggml reads the kernel tensor's
// shape only ([KW, KH, C]); a small constant stands for it. The index
// table (In[1]) is not read.
var _ = lowerComposite(backend.OpIm2Col, 8, func(l *lowering, n *backend.Node) tensor {
	w := backend.WindowOf(n)
	x := l.inShape(n, 0)
	kern := l.constant([]int{x[1], w.KH, w.KW}, 0)
	t := C.ggml_im2col(l.ctx, kern, l.contiguous(l.in(n, 0)), C.int(w.SW), C.int(w.SH), C.int(w.PW), C.int(w.PH),
		C.int(w.DW), C.int(w.DH), true, C.GGML_TYPE_F32)
	return l.reshape(t, n.Shape)
})

// col2im is ggml_im2col_back on ggml-cpu. ggml.c builds it with the
// gradient as src[0] and the kernel as src[1] (ggml's own backward passes
// them so, and ggml-cpu's kernel reads them so), whatever the header's
// argument names say. ggml-vulkan has no im2col_back: there it is
// col2imAcc.
var _ = lowerSized(backend.OpCol2Im, func(n *backend.Node) int {
	w := backend.WindowOf(n)
	return 16 + 2*w.KH*w.KW // a view and an acc per kernel offset
}, func(l *lowering, n *backend.Node) tensor {
	if !l.d.isCPU {
		return l.col2imAcc(n)
	}
	w := backend.WindowOf(n)
	x := n.Shape
	oh, ow := w.Out(x[2], x[3])
	kern := l.constant([]int{x[1], w.KH, w.KW}, 0)
	g := l.reshape(l.contiguous(l.in(n, 0)), []int{x[0], oh, ow, x[1] * w.KH * w.KW})
	shape := ne(x)
	return C.ggml_im2col_back(l.ctx, g, kern, &shape[0], C.int(w.SW), C.int(w.SH), C.int(w.PW), C.int(w.PH),
		C.int(w.DW), C.int(w.DH), true)
})

// col2imAcc is col2im as one ggml_acc per kernel offset (i, j), the way the
// columns are added back: the slab of every window's (i, j) element, [C*N,
// OW, OH], lands on a block of the padded image, which ggml-vulkan's acc
// adds in one dispatch. Its acc reads the block with the image's own row
// pitches, so a stride s is taken apart into s phases per axis: the image
// is held as [C*N, (wq, rw), (hq, rh)] with w = wq*SW + rw (one block per
// phase), and two transposed copies put w and h back together (none at
// stride 1). On an H100 the convnet's first input gradient took 9 gathers
// of 93 us (narrow rows of 32 values, each in a workgroup of 512 lanes:
// GGML_VK_PERF_LOGGER); these are a few microseconds each. The columns
// reach each image element in kernel-offset order.
func (l *lowering) col2imAcc(n *backend.Node) tensor {
	ctx := l.ctx
	w := backend.WindowOf(n)
	nb, c, h, wd := n.Shape[0], n.Shape[1], n.Shape[2], n.Shape[3]
	oh, ow := w.Out(h, wd)
	hp, wp := h+2*w.PH, wd+2*w.PW
	kk, cn := w.KH*w.KW, c*nb
	// phase planes large enough for every offset's block and the whole
	// padded image (rows no window reaches stay 0)
	hq := max(ceilDiv(hp, w.SH), w.DH*(w.KH-1)/w.SH+oh)
	wq := max(ceilDiv(wp, w.SW), w.DW*(w.KW-1)/w.SW+ow)
	// columns [N*OH*OW, C*KH*KW] (ggml [KK*C, OW*OH*N]) to slabs [C, N,
	// OW*OH, KK]: slab p is contiguous [C*N, OW, OH]
	cols := C.ggml_reshape_4d(ctx, l.contiguous(l.in(n, 0)), C.int64_t(kk), C.int64_t(c), C.int64_t(ow*oh), C.int64_t(nb))
	slabs := C.ggml_cont(ctx, C.ggml_permute(ctx, cols, 3, 0, 2, 1))
	img := l.constant([]int{hq * w.SH, wq * w.SW, cn}, 0) // ggml [CN, WQ*SW, HQ*SH]
	nb1, nb2 := img.nb[1], img.nb[2]
	slabBytes := C.size_t(cn*ow*oh) * 4
	for i := range w.KH {
		for j := range w.KW {
			a, b := i*w.DH, j*w.DW
			slab := C.ggml_view_3d(ctx, slabs, C.int64_t(cn), C.int64_t(ow), C.int64_t(oh), C.size_t(cn)*4, C.size_t(cn*ow)*4, C.size_t(i*w.KW+j)*slabBytes)
			off := C.size_t(b/w.SW+wq*(b%w.SW))*nb1 + C.size_t(a/w.SH+hq*(a%w.SH))*nb2
			img = C.ggml_acc(ctx, img, slab, nb1, nb2, img.nb[3], off)
		}
	}
	if w.SW > 1 { // [CN, WQ, SW, HQ*SH] -> [CN, SW, WQ, ...]: w = wq*SW + rw
		v := C.ggml_reshape_4d(ctx, img, C.int64_t(cn), C.int64_t(wq), C.int64_t(w.SW), C.int64_t(hq*w.SH))
		img = C.ggml_cont(ctx, C.ggml_permute(ctx, v, 0, 2, 1, 3))
	}
	if w.SH > 1 { // [CN*W', HQ, SH] -> [CN*W', SH, HQ]: h = hq*SH + rh
		v := C.ggml_reshape_3d(ctx, img, C.int64_t(cn*wq*w.SW), C.int64_t(hq), C.int64_t(w.SH))
		img = C.ggml_cont(ctx, C.ggml_permute(ctx, v, 0, 2, 1, 3))
	}
	// [C, N, W', H'] cropped to the image and ordered [W, H, C, N]
	v := C.ggml_reshape_4d(ctx, img, C.int64_t(c), C.int64_t(nb), C.int64_t(wq*w.SW), C.int64_t(hq*w.SH))
	v = C.ggml_view_4d(ctx, v, C.int64_t(c), C.int64_t(nb), C.int64_t(wd), C.int64_t(h), v.nb[1], v.nb[2], v.nb[3], C.size_t(w.PW)*v.nb[2]+C.size_t(w.PH)*v.nb[3])
	return C.ggml_cont(ctx, C.ggml_permute(ctx, v, 2, 3, 0, 1))
}
