//go:build ggml

// C helpers for package native: the few things that are awkward or unsafe to
// do from Go through cgo (Vulkan device enumeration, re-pointing tensors at
// bound buffers without handing device addresses to the Go runtime).
#ifndef AG_GGML_H
#define AG_GGML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"

#define AG_VK_MAX_DEVICES 16

// ag_vk_device is one Vulkan physical device as the loader reports it.
typedef struct {
	char name[256];
	int type; // VkPhysicalDeviceType: 1 integrated, 2 discrete, 3 virtual, 4 CPU
} ag_vk_device;

// ag_vk_probe enumerates Vulkan physical devices with a throw-away instance
// (nothing lasts). It returns the number of devices written to out, or a
// negative VkResult when no instance could be created (no loader or driver).
int ag_vk_probe(ag_vk_device *out, int max);

// The ggml-vulkan entry points that throw C++ exceptions (no driver, a bad
// GGML_VK_VISIBLE_DEVICES, a failed device creation or memory query), called
// inside try/catch (ag_vk_guard.cpp): each returns 0, or -1 with the
// exception's type and message in err, where uncaught it would abort the
// process.
int ag_vk_device_count(int *count, char *err, size_t errlen);
int ag_vk_init(size_t dev, ggml_backend_t *out, char *err, size_t errlen);
int ag_vk_description(int dev, char *desc, size_t desclen, char *err, size_t errlen);
int ag_dev_memory(ggml_backend_dev_t dev, size_t *free, size_t *total, char *err, size_t errlen);

// ag_bind points each leaves[i] at the memory of srcs[i] (a buffer's tensor),
// then re-derives the address of every view in views from its view_src.
// Program.Run calls it once per run: the graph itself is never re-planned.
void ag_bind(struct ggml_tensor **leaves, struct ggml_tensor **srcs, int n,
             struct ggml_tensor **views, int nviews);

// ag_mark_bound gives each leaf a placeholder address inside buf so that the
// graph allocator treats the leaves as externally allocated (it must not plan
// memory for args; ag_bind sets the real addresses at run time).
void ag_mark_bound(struct ggml_tensor **leaves, int n, ggml_backend_buffer_t buf);

// ag_tensor_alloc_at places t at byte offset off of buf (a slab chunk).
enum ggml_status ag_tensor_alloc_at(ggml_backend_buffer_t buf, struct ggml_tensor *t, size_t off);

// ag_transpose is a ggml custom op (ggml_custom_4d, ggml-cpu only): dst is
// a contiguous copy of dst->src[0] (f32, any strides) with ne0 and ne1
// swapped, copied in 8x8 tiles: a 1024x1024 transpose touches 8 cache
// lines at a 4 KiB stride on each side, which an 8-way L1 holds (32x32
// tiles take 2x longer, ggml's element-wise CONT 4x). Threads split dst's
// rows.
void ag_transpose(struct ggml_tensor *dst, int ith, int nth, void *userdata);

// ag_log_init routes ggml's log through ag's filter: lines below min_level
// (a ggml_log_level) are dropped.
void ag_log_init(int min_level);

// ag_vk_matrix_cores returns what ggml-vulkan logged of device dev's matrix
// cores: "none", "KHR_coopmat" or "NV_coopmat2" (its cooperative-matrix
// shaders are built and the device has them), or "" before ggml-vulkan has
// listed its devices.
const char *ag_vk_matrix_cores(int dev);

// ag_matmul_tn is a ggml custom op (ggml-cpu only): dst[M,N] = A^T B for
// A = dst->src[0] stored [K,M] and B = dst->src[1] stored [K,N] (row-major,
// rows contiguous; K may span ne1..ne3 where the rows are evenly strided
// across them: a batch's rows), the weight gradient of a dense layer.
// ggml's sgemm reduces each output with a horizontal sum over K, which
// dominates at a small K (a batch of 64: 27 GFLOP/s); this kernel
// accumulates along N with 6x16 register tiles instead. Threads split dst's rows.
void ag_matmul_tn(struct ggml_tensor *dst, int ith, int nth, void *userdata);

// ag_clamp_to is ggml_clamp into a tensor of its own. ggml_clamp works in
// place (its result is a view of a), so a graph that reads a after the clamp
// (ggml-vulkan may reorder nodes) would see it clamped.
struct ggml_tensor *ag_clamp_to(struct ggml_context *ctx, struct ggml_tensor *a, float lo, float hi);

// ag_gelu_back_vk is GELU's gradient dy*gelu'(x) (tanh approximation) as
// one ggml-vulkan node: a SILU_BACK whose op_params[0] = 1 selects the
// GELU mode build.sh's patch 0012 gives its shader (ggml-cpu would compute
// SiLU's: ag lowers it there only where probeGeluBack saw the mode).
struct ggml_tensor *ag_gelu_back_vk(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy);

// ag_layer_norm_back_vk is layer norm's input gradient as one ggml-vulkan
// node: a RMS_NORM_BACK whose op_params[1] = 1 selects the layer-norm mode
// build.sh's patch 0013 gives its shader (ggml-cpu would compute RMS norm's:
// ag lowers it there only where probeLayerNormBack saw the mode).
struct ggml_tensor *ag_layer_norm_back_vk(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps);

// ag_relu, ag_clamp and ag_row_max are ggml custom ops (ggml-cpu only) with
// the NaN semantics of backend/ir.go, which ggml-cpu's own relu, clamp and
// max pool lack (they turn NaN into 0, hi and the row's other maximum):
//   ag_relu:    dst = src[0] > 0 or NaN ? src[0] : 0
//   ag_clamp:   dst = min(max(src[0], lo), hi), NaN stays NaN; lo and hi are
//               the one-element tensors src[1] and src[2]
//   ag_row_max: dst (ne0 = 1) = the maximum of each row of src[0], NaN if
//               the row holds one, -Inf for a row of -Inf
void ag_relu(struct ggml_tensor *dst, int ith, int nth, void *userdata);
void ag_clamp(struct ggml_tensor *dst, int ith, int nth, void *userdata);
void ag_row_max(struct ggml_tensor *dst, int ith, int nth, void *userdata);

// ag_sign_step (ggml-cpu only) is ReLU's gradient mask as backend's
// relu_mask defines it: 1 where src[0] > 0, +0 where it is <= 0, NaN at NaN.
void ag_sign_step(struct ggml_tensor *dst, int ith, int nth, void *userdata);

// ag_sum_squares (ggml-cpu only) is backend's sum_squares over up to
// GGML_MAX_SRC - 1 sources (ggml_custom_4d's bound): dst (one element) = the sum of the f32 squares of
// every element of src[0..], accumulated in double (one task).
void ag_sum_squares(struct ggml_tensor *dst, int ith, int nth, void *userdata);

// ag_gelu and ag_gelu_back are backend.OpGELU and OpGELUBack as ggml
// custom ops (ggml-cpu only), in f32 (ggml-cpu's gelu reads an f16 table):
//   ag_gelu:      dst = gelu(src[0])
//   ag_gelu_back: dst = src[1] * gelu'(src[0])
// Sources contiguous, of dst's shape. ag_gelu_op records ag_gelu over x
// (dy NULL) or ag_gelu_back over x and dy, named for profiles.
void ag_gelu(struct ggml_tensor *dst, int ith, int nth, void *userdata);
void ag_gelu_back(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_gelu_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy);

// ag_index (ggml-cpu only) turns the f32 indices of src[0] (contiguous)
// into i32 row numbers 0..rows-1 as backend.ClampIndex does (NaN and
// negatives 0, past the end rows-1, else rounded halves away from zero);
// ag_index_op records it (rows < 2^31, in userdata).
void ag_index(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_index_op(struct ggml_context *ctx, struct ggml_tensor *idx, int64_t rows);

// ag_layer_norm_back is backend.OpLayerNormBack as a ggml custom op
// (ggml-cpu only): dst = the input gradient of layer norm (eps in
// userdata's low 32 bits) at x = src[0] for the output's gradient dy =
// src[1], per row, in double as the float64 definition. Sources
// contiguous, of dst's shape; ag_layer_norm_back_op records it.
void ag_layer_norm_back(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_layer_norm_back_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps);

// ag_max_pool_back is backend.OpMaxPool2dBack as a ggml custom op
// (ggml-cpu only): dst (x's shape, ne [W, H, C, N]) = each window's
// gradient (src[1], ne [OW, OH, C, N]) added to the window's first maximal
// element of x (src[0]) as the float64 definition picks it. The window
// (kh, kw, sh, sw, ph, pw) is kept in dst's op_params past ggml's custom-op
// parameters (ag_max_pool_back_op records it). Sources contiguous.
void ag_max_pool_back(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_max_pool_back_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *g, int kh, int kw, int sh,
                                        int sw, int ph, int pw);

// ag_rms_norm_back is backend.OpRMSNormBack as ag_layer_norm_back is
// OpLayerNormBack (ggml-cpu only; ag_rms_norm_back_op records it).
void ag_rms_norm_back(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_rms_norm_back_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps);

// ag_batch_norm and ag_batch_norm_back are backend.OpBatchNorm and
// OpBatchNormBack as ggml custom ops (ggml-cpu only), per channel in
// double as the float64 definition: x = src[0], dy = src[1] (the
// gradient's). Sources contiguous, of dst's shape, whose axis cd (ggml's
// order) holds the channels. ag_batch_norm_op records the forward (dy
// NULL) or the gradient.
void ag_batch_norm(struct ggml_tensor *dst, int ith, int nth, void *userdata);
void ag_batch_norm_back(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_batch_norm_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps, int cd);

// ag_batch_norm_stats is backend.OpBatchNormStats as a ggml custom op
// (ggml-cpu only): dst [C, 2], each channel's mean and biased variance in
// double; ag_batch_norm_stats_op records it over channel axis cd.
void ag_batch_norm_stats(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_batch_norm_stats_op(struct ggml_context *ctx, struct ggml_tensor *x, int cd);

// ggml-vulkan's batch norm (build.sh's patch 0015), custom nodes its shader
// runs: ag_vk_batch_norm_sums the partial sums over splits chunks of each
// channel of x (with dy, the gradient's), ag_vk_batch_norm from them the
// channels' statistics and the elementwise pass of backend.OpBatchNorm
// (dy NULL) or OpBatchNormBack, ag_vk_batch_norm_stats from the forward's
// sums OpBatchNormStats. x and dy contiguous, channel axis cd (ggml's
// order). ag_vk_kernel is their CPU function, which aborts.
void ag_vk_kernel(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_vk_batch_norm_sums(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, int cd, int splits);
struct ggml_tensor *ag_vk_batch_norm(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, struct ggml_tensor *sums,
                                     float eps, int cd, int splits);
struct ggml_tensor *ag_vk_batch_norm_stats(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *sums, int cd, int splits);

// ggml-vulkan's cross-entropy (build.sh's patch 0016), a custom node its
// shader runs: with g NULL each row's loss [B] of backend.OpCrossEntropy's
// (the caller sums and scales them), else OpCrossEntropyBack's gradient
// [B, C] for the loss's gradient g [1]. x [B, C] and labels [B]
// contiguous f32.
struct ggml_tensor *ag_vk_cross_entropy(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *labels, struct ggml_tensor *g);

// ggml-vulkan's column sums (build.sh's patch 0017), two custom nodes its
// shader runs: the sums of the contiguous x's rows rows of cols values
// over splits chunks of rows, then the chunks' sums per column, ne [cols].
struct ggml_tensor *ag_vk_col_sums(struct ggml_context *ctx, struct ggml_tensor *x, int64_t rows, int64_t cols, int splits);

// ggml-vulkan's sums of squares (build.sh's patch 0018), custom nodes its
// shader runs: ag_vk_sum_squares_parts the sums of squares of splits
// chunks of each of the n (1 to 3) contiguous f32 src, ne [splits, 3];
// ag_vk_sum_squares_add those added to total (NULL: to 0), ne [1].
struct ggml_tensor *ag_vk_sum_squares_parts(struct ggml_context *ctx, struct ggml_tensor **src, int n, int splits);
struct ggml_tensor *ag_vk_sum_squares_add(struct ggml_context *ctx, struct ggml_tensor *parts, struct ggml_tensor *total);

// ag_vk_matmul is patch 0019's f32 matmul: for each batch (ne2) of the
// contiguous b [K][N] (ne0 = N) and a [K][M] (ne0 = M), or a [M][K]
// (ne0 = K) if a_rows, the product op(a) b, ne [N, M, batches]; splits > 1
// splits K into that many parts (one node writing their partial products,
// one summing them). M and N must be multiples of 4, K too if a_rows.
struct ggml_tensor *ag_vk_matmul(struct ggml_context *ctx, struct ggml_tensor *a, struct ggml_tensor *b, int a_rows, int splits);

// ag_dropout is backend.OpDropout as a ggml custom op (ggml-cpu only): dst
// = src[0] * (p <= src[1] < 2 ? scale : 0), sources contiguous, of dst's
// shape; ag_dropout_op records it (p and scale travel in userdata).
void ag_dropout(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_dropout_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *u, float p, float scale);

// ag_attention is OpAttention of backend/ir.go as a ggml custom op
// (ggml-cpu only): dst [Dv, Tq, A2, A3] (contiguous) from q = src[0]
// [D, Tq, A2, A3], k = src[1] [D, Tk, A2, A3], v = src[2] [Dv, Tk, A2, A3]
// (rows contiguous, any row strides) and keep = src[3], each dim 1
// (broadcast) or the scores' [Tk, Tq, A2, A3]. Queries go in blocks of 4,
// which share each k and v row read; a key a query masks never reaches
// its result, and one no query of the block attends is not read. The
// scale is in userdata (ag_attention_op). ggml's own flash attention
// differs from ir.go at special values: one +Inf score gives that key's v
// (not NaN), a first attended score of -Inf gives NaN.
void ag_attention(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_attention_op(struct ggml_context *ctx, struct ggml_tensor *q, struct ggml_tensor *k, struct ggml_tensor *v, struct ggml_tensor *keep, float scale);

// ag_rand_uniform is rand_uniform of backend/ir.go as a ggml custom op
// (ggml-cpu only): dst (contiguous) gets Philox4x32-10 uniforms for the
// state src[0] (8 f32 16-bit pieces) and the counter offset in userdata.
// ag_rand_uniform_op records it; ag_rand_uniform_fill computes elements
// e0..e1-1 into dst[0..e1-e0) (ggml-vulkan fills on the host with it).
_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "the counter offset travels in a pointer");
// ag_node_clock holds the monotonic time (ns) at the start of a ggml-cpu
// graph compute (ts[0]) and at the end of each non-empty node after it, as
// thread 0 finishes its part: ag_node_clock_cb is the CPU backend's abort
// callback, which ggml-cpu calls once per non-empty node, and never aborts.
typedef struct {
	int64_t *ts;
	int n, cap;
} ag_node_clock;
void ag_node_clock_start(ag_node_clock *c);
bool ag_node_clock_cb(void *data);

void ag_rand_uniform(struct ggml_tensor *dst, int ith, int nth, void *userdata);
struct ggml_tensor *ag_rand_uniform_op(struct ggml_context *ctx, struct ggml_tensor *state, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint64_t start);
// ag_philox_op is rand_uniform on ggml-vulkan: an arange node with the
// state as its source, which ggml-vulkan with patch 0010 computes as
// ag_rand_uniform does (ggml-cpu would compute an arange: use
// ag_rand_uniform_op there). probeDraw checks it when a device opens.
struct ggml_tensor *ag_philox_op(struct ggml_context *ctx, struct ggml_tensor *state, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint64_t start);
void ag_rand_uniform_fill(float *dst, int64_t e0, int64_t e1, const float *state, uint64_t start);

// ag_custom_name names the ag kernel of a GGML_OP_CUSTOM node for dumps
// ("transpose", ..., "other" for one it does not know), NULL for other ops.
const char *ag_custom_name(const struct ggml_tensor *t);

// ag_check_extents finds a tensor of gf (a node or one of its sources) whose
// view reaches past the memory it views, or an acc or set that writes past
// its destination: 0, or -1 with it described in err. ggml checks a view
// against its source as if it were contiguous, not through its strides, and
// ggml-vulkan's kernels without robustness (im2col, set_rows, ...) and
// lavapipe's copies then read or write outside the buffer: a crash on a
// driver thread, with no Go trace.
int ag_check_extents(struct ggml_cgraph *gf, char *err, size_t errlen);

#endif
