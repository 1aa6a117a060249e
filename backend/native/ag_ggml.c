//go:build ggml

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <vulkan/vulkan.h>

#include "ag_ggml.h"

// ag_vk_guard.cpp declares these ggml functions itself (it cannot see ggml's
// headers): fail the build if ggml's own declarations ever differ.
#define AG_SAME_TYPE(f, t) _Static_assert(__builtin_types_compatible_p(__typeof__(&f), t), #f " changed its signature: update ag_vk_guard.cpp")
AG_SAME_TYPE(ggml_backend_vk_get_device_count, int (*)(void));
AG_SAME_TYPE(ggml_backend_vk_init, ggml_backend_t (*)(size_t));
AG_SAME_TYPE(ggml_backend_vk_get_device_description, void (*)(int, char *, size_t));
AG_SAME_TYPE(ggml_backend_dev_memory, void (*)(ggml_backend_dev_t, size_t *, size_t *));

int ag_vk_probe(ag_vk_device *out, int max) {
	VkApplicationInfo app = {0};
	app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
	app.pApplicationName = "ag-probe";
	app.apiVersion = VK_API_VERSION_1_1;
	VkInstanceCreateInfo ci = {0};
	ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
	ci.pApplicationInfo = &app;
	VkInstance inst;
	VkResult r = vkCreateInstance(&ci, NULL, &inst);
	if (r != VK_SUCCESS) {
		return r < 0 ? (int)r : -1;
	}
	uint32_t n = 0;
	vkEnumeratePhysicalDevices(inst, &n, NULL);
	VkPhysicalDevice devs[AG_VK_MAX_DEVICES];
	if (n > AG_VK_MAX_DEVICES) {
		n = AG_VK_MAX_DEVICES;
	}
	vkEnumeratePhysicalDevices(inst, &n, devs);
	int k = 0;
	for (uint32_t i = 0; i < n && k < max; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(devs[i], &p);
		strncpy(out[k].name, p.deviceName, sizeof(out[k].name) - 1);
		out[k].name[sizeof(out[k].name) - 1] = 0;
		out[k].type = (int)p.deviceType;
		k++;
	}
	vkDestroyInstance(inst, NULL);
	return k;
}

void ag_bind(struct ggml_tensor **leaves, struct ggml_tensor **srcs, int n,
             struct ggml_tensor **views, int nviews) {
	for (int i = 0; i < n; i++) {
		leaves[i]->buffer = srcs[i]->buffer;
		leaves[i]->data = srcs[i]->data;
	}
	// views are listed in graph order, so a view of a view sees its source
	// already re-pointed.
	for (int i = 0; i < nviews; i++) {
		struct ggml_tensor *v = views[i];
		v->buffer = v->view_src->buffer;
		v->data = (char *)v->view_src->data + v->view_offs;
	}
}

void ag_mark_bound(struct ggml_tensor **leaves, int n, ggml_backend_buffer_t buf) {
	void *base = ggml_backend_buffer_get_base(buf);
	for (int i = 0; i < n; i++) {
		leaves[i]->buffer = buf;
		leaves[i]->data = base;
	}
}

enum ggml_status ag_tensor_alloc_at(ggml_backend_buffer_t buf, struct ggml_tensor *t, size_t off) {
	return ggml_backend_tensor_alloc(buf, t, (char *)ggml_backend_buffer_get_base(buf) + off);
}

void ag_transpose(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	const struct ggml_tensor *src = dst->src[0];
	enum { TILE = 8 };
	// dst row c (of R values) is src column c; R = src rows, C = src columns.
	const int64_t R = src->ne[1], C = src->ne[0];
	const int64_t planes = src->ne[2] * src->ne[3];
	const int64_t tiles = (C + TILE - 1) / TILE; // tiles of dst rows per plane
	const int64_t total = tiles * planes;
	const int64_t per = (total + nth - 1) / nth;
	const int64_t t0 = per * ith, t1 = t0 + per < total ? t0 + per : total;
	const size_t s0 = src->nb[0], s1 = src->nb[1];
	for (int64_t t = t0; t < t1; t++) {
		const int64_t p = t / tiles, c0 = (t % tiles) * TILE;
		const int64_t i2 = p % src->ne[2], i3 = p / src->ne[2];
		const char *sp = (const char *)src->data + i2 * src->nb[2] + i3 * src->nb[3];
		float *dp = (float *)((char *)dst->data + i2 * dst->nb[2] + i3 * dst->nb[3]);
		const int64_t c1 = c0 + TILE < C ? c0 + TILE : C;
		for (int64_t r0 = 0; r0 < R; r0 += TILE) {
			const int64_t r1 = r0 + TILE < R ? r0 + TILE : R;
			for (int64_t c = c0; c < c1; c++) {
				float *d = dp + c * R;
				const char *s = sp + c * s0;
				for (int64_t r = r0; r < r1; r++) {
					d[r] = *(const float *)(s + r * s1);
				}
			}
		}
	}
}

// tn_rows computes rows i0..i1 of C = A^T B one row at a time (the
// remainder rows, and the whole product where AVX2 is missing).
static void tn_rows(const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                    int64_t K, int64_t N, int64_t i0, int64_t i1, int64_t j0) {
	for (int64_t i = i0; i < i1; i++) {
		float *c = C + i * ldc;
		for (int64_t j = j0; j < N; j++) {
			c[j] = 0;
		}
		for (int64_t k = 0; k < K; k++) {
			const float a = A[k * lda + i];
			const float *b = B + k * ldb;
			for (int64_t j = j0; j < N; j++) {
				c[j] += a * b[j];
			}
		}
	}
}

#if defined(__x86_64__)
// tn_avx2 computes rows i0..i1 (a multiple of 6 rows) of C = A^T B for
// columns 0..N rounded down to 16: 12 accumulators, 2 loads of B and 6
// broadcasts of A per 12 FMAs.
__attribute__((target("avx2,fma"))) static void tn_avx2(const float *A, int64_t lda, const float *B, int64_t ldb,
                                                        float *C, int64_t ldc, int64_t K, int64_t N, int64_t i0, int64_t i1) {
	for (int64_t i = i0; i + 6 <= i1; i += 6) {
		for (int64_t j = 0; j + 16 <= N; j += 16) {
			__m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
			__m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
			__m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
			__m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
			__m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
			__m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
			for (int64_t k = 0; k < K; k++) {
				const float *b = B + k * ldb + j;
				const float *a = A + k * lda + i;
				const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
				__m256 av = _mm256_broadcast_ss(a);
				c00 = _mm256_fmadd_ps(av, b0, c00), c01 = _mm256_fmadd_ps(av, b1, c01);
				av = _mm256_broadcast_ss(a + 1);
				c10 = _mm256_fmadd_ps(av, b0, c10), c11 = _mm256_fmadd_ps(av, b1, c11);
				av = _mm256_broadcast_ss(a + 2);
				c20 = _mm256_fmadd_ps(av, b0, c20), c21 = _mm256_fmadd_ps(av, b1, c21);
				av = _mm256_broadcast_ss(a + 3);
				c30 = _mm256_fmadd_ps(av, b0, c30), c31 = _mm256_fmadd_ps(av, b1, c31);
				av = _mm256_broadcast_ss(a + 4);
				c40 = _mm256_fmadd_ps(av, b0, c40), c41 = _mm256_fmadd_ps(av, b1, c41);
				av = _mm256_broadcast_ss(a + 5);
				c50 = _mm256_fmadd_ps(av, b0, c50), c51 = _mm256_fmadd_ps(av, b1, c51);
			}
			float *c = C + i * ldc + j;
			_mm256_storeu_ps(c, c00), _mm256_storeu_ps(c + 8, c01), c += ldc;
			_mm256_storeu_ps(c, c10), _mm256_storeu_ps(c + 8, c11), c += ldc;
			_mm256_storeu_ps(c, c20), _mm256_storeu_ps(c + 8, c21), c += ldc;
			_mm256_storeu_ps(c, c30), _mm256_storeu_ps(c + 8, c31), c += ldc;
			_mm256_storeu_ps(c, c40), _mm256_storeu_ps(c + 8, c41), c += ldc;
			_mm256_storeu_ps(c, c50), _mm256_storeu_ps(c + 8, c51);
		}
	}
}
#endif

void ag_matmul_tn(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	const struct ggml_tensor *a = dst->src[0], *b = dst->src[1];
	// K counts the rows of every batch: they are evenly strided (evenRows).
	const int64_t M = a->ne[0], K = a->ne[1] * a->ne[2] * a->ne[3], N = b->ne[0];
	const int64_t lda = a->nb[1] / 4, ldb = b->nb[1] / 4, ldc = dst->nb[1] / 4;
	const float *A = (const float *)a->data, *B = (const float *)b->data;
	float *C = (float *)dst->data;
	// Blocks of 6 rows, split evenly; the last thread also takes the rest.
	const int64_t blocks = M / 6, per = (blocks + nth - 1) / nth;
	int64_t i0 = per * ith * 6, i1 = (per * (ith + 1)) * 6;
	if (i1 > blocks * 6) {
		i1 = blocks * 6;
	}
	if (i0 > i1) {
		i0 = i1;
	}
	if (ith == nth - 1) {
		i1 = M;
	}
#if defined(__x86_64__)
	// libgcc's constructor that fills the CPU model may not have run in a
	// cgo binary; without this call every check says no.
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		const int64_t full = i0 + (i1 - i0) / 6 * 6, n16 = N / 16 * 16;
		tn_avx2(A, lda, B, ldb, C, ldc, K, N, i0, full);
		tn_rows(A, lda, B, ldb, C, ldc, K, N, i0, full, n16); // columns past n16
		tn_rows(A, lda, B, ldb, C, ldc, K, N, full, i1, 0);   // rows past the 6-row blocks
		return;
	}
#endif
	tn_rows(A, lda, B, ldb, C, ldc, K, N, i0, i1, 0);
}

// The special values of backend/ir.go on ggml-cpu, whose relu ((x > 0) ? x :
// 0), clamp (MAX(MIN(x, hi), lo)) and max pool (MAX(res, x)) turn a NaN
// into a number. The comparisons below are written so that NaN, for which
// every comparison is false, falls through to x; this file is not built with
// -ffast-math, so the compiler keeps them. A contiguous source (the usual
// case) is one flat range split among the threads, in loops GCC vectorizes
// at O3 (at -O2 it leaves them scalar, 20% of a small MLP step on ggml-cpu);
// a strided view is walked row by row.

// range_of splits n elements among nth threads in multiples of 16.
static void range_of(int64_t n, int ith, int nth, int64_t *i0, int64_t *i1) {
	const int64_t per = ((n + nth - 1) / nth + 15) / 16 * 16;
	*i0 = per * ith < n ? per * ith : n;
	*i1 = *i0 + per < n ? *i0 + per : n;
}

// row_ptr is the address of row r (over ne1..ne3) of t.
static const char *row_ptr(const struct ggml_tensor *t, int64_t r) {
	const int64_t i1 = r % t->ne[1], i2 = (r / t->ne[1]) % t->ne[2], i3 = r / (t->ne[1] * t->ne[2]);
	return (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

__attribute__((optimize("O3"))) static void clamp_span(float *restrict d, const float *restrict s, int64_t n, float lo, float hi) {
	for (int64_t i = 0; i < n; i++) {
		const float x = s[i];
		d[i] = x < lo ? lo : (x > hi ? hi : x);
	}
}

// clamp_op clamps dst->src[0] into dst; ReLU is the clamp to [0, +Inf].
static void clamp_op(struct ggml_tensor *dst, int ith, int nth, float lo, float hi) {
	const struct ggml_tensor *src = dst->src[0];
	if (ggml_is_contiguous(src)) {
		int64_t i0, i1;
		range_of(ggml_nelements(dst), ith, nth, &i0, &i1);
		clamp_span((float *)dst->data + i0, (const float *)src->data + i0, i1 - i0, lo, hi);
		return;
	}
	int64_t r0, r1;
	range_of(dst->ne[1] * dst->ne[2] * dst->ne[3], ith, nth, &r0, &r1);
	for (int64_t r = r0; r < r1; r++) {
		const char *s = row_ptr(src, r);
		float *d = (float *)row_ptr(dst, r);
		for (int64_t i = 0; i < dst->ne[0]; i++) {
			const float x = *(const float *)(s + i * src->nb[0]);
			d[i] = x < lo ? lo : (x > hi ? hi : x);
		}
	}
}

struct ggml_tensor *ag_clamp_to(struct ggml_context *ctx, struct ggml_tensor *a, float lo, float hi) {
	struct ggml_tensor *r = ggml_dup_tensor(ctx, a);
	const float params[2] = {lo, hi};
	memcpy(r->op_params, params, sizeof(params)); // as ggml_clamp sets them
	r->op = GGML_OP_CLAMP;
	r->src[0] = a;
	return r;
}

struct ggml_tensor *ag_gelu_back_vk(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy) {
	struct ggml_tensor *r = ggml_silu_back(ctx, dy, x); // src0 the gradient, src1 x
	const int32_t mode = 1;
	memcpy(r->op_params, &mode, sizeof(mode));
	return r;
}

struct ggml_tensor *ag_layer_norm_back_vk(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps) {
	struct ggml_tensor *r = ggml_rms_norm_back(ctx, dy, x, eps); // src0 the gradient, src1 x
	const int32_t mode = 1;
	memcpy((char *)r->op_params + sizeof(float), &mode, sizeof(mode)); // op_params[0] is eps
	return r;
}

void ag_relu(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	clamp_op(dst, ith, nth, 0.0f, INFINITY);
}

void ag_sign_step(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	const struct ggml_tensor *src = dst->src[0];
	int64_t r0, r1;
	range_of(dst->ne[1] * dst->ne[2] * dst->ne[3], ith, nth, &r0, &r1);
	for (int64_t r = r0; r < r1; r++) {
		const char *s = row_ptr(src, r);
		float *d = (float *)row_ptr(dst, r);
		for (int64_t i = 0; i < dst->ne[0]; i++) {
			const float x = *(const float *)(s + i * src->nb[0]);
			d[i] = x > 0 ? 1.0f : (x <= 0 ? 0.0f : x); /* NaN stays */
		}
	}
}

void ag_sum_squares(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	(void)nth;
	if (ith != 0) {
		return; /* one task: the sum is one value */
	}
	double sum = 0;
	for (int k = 0; k < GGML_MAX_SRC && dst->src[k] != NULL; k++) {
		const struct ggml_tensor *src = dst->src[k];
		const int64_t rows = src->ne[1] * src->ne[2] * src->ne[3];
		for (int64_t r = 0; r < rows; r++) {
			const char *s = row_ptr(src, r);
			for (int64_t i = 0; i < src->ne[0]; i++) {
				const float x = *(const float *)(s + i * src->nb[0]);
				sum += (double)(x * x); /* the square in f32: +Inf past its range */
			}
		}
	}
	*(float *)dst->data = (float)sum;
}

void ag_clamp(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	clamp_op(dst, ith, nth, *(const float *)dst->src[1]->data, *(const float *)dst->src[2]->data);
}

void ag_row_max(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	const struct ggml_tensor *src = dst->src[0];
	int64_t r0, r1;
	range_of(dst->ne[1] * dst->ne[2] * dst->ne[3], ith, nth, &r0, &r1);
	for (int64_t r = r0; r < r1; r++) {
		const char *s = row_ptr(src, r);
		float m = -INFINITY;
		for (int64_t i = 0; i < src->ne[0]; i++) {
			const float x = *(const float *)(s + i * src->nb[0]);
			if (x != x) {
				m = x;
				break;
			}
			m = x > m ? x : m;
		}
		*(float *)row_ptr(dst, r) = m;
	}
}

// GELU (backend.OpGELU, OpGELUBack) as x*sigmoid(z), z = 2*sqrt(2/pi)*x*(1
// + 0.044715*x^2), in f32 with expf: ggml-cpu's own gelu reads an f16
// table (errors of 1e-3). One exp serves both sigmoids: e = exp(-|z|),
// sigmoid(|z|) = 1/(1+e), sigmoid(-|z|) = e/(1+e), neither cancelling. z is
// ±Inf where x*x overflows, making the gate 0 or 1 exactly; NaN stays NaN.
// Sources are contiguous (the lowering copies views).
#define AG_GELU_C 0.7978845608028654f
#define AG_GELU_A 0.044715f

static inline float gelu_z(float x) {
	return x * (2 * AG_GELU_C + 2 * AG_GELU_C * AG_GELU_A * (x * x));
}

void ag_gelu(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	int64_t i0, i1;
	range_of(ggml_nelements(dst), ith, nth, &i0, &i1);
	const float *x = (const float *)dst->src[0]->data;
	float *d = (float *)dst->data;
	for (int64_t i = i0; i < i1; i++) {
		// x/(1 + exp(-z)): at z = -Inf, x/Inf (-0, or NaN for x = -Inf)
		d[i] = x[i] / (1 + expf(-gelu_z(x[i])));
	}
}

void ag_gelu_back(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	int64_t i0, i1;
	range_of(ggml_nelements(dst), ith, nth, &i0, &i1);
	const float *x = (const float *)dst->src[0]->data, *dy = (const float *)dst->src[1]->data;
	float *d = (float *)dst->data;
	for (int64_t i = i0; i < i1; i++) {
		const float v = x[i], z = gelu_z(v);
		const float e = expf(-fabsf(z)), p = 1 / (1 + e), m = e * p;
		const float s = z >= 0 ? p : m, s1 = z >= 0 ? m : p;
		// x*s*s1 is 0 wherever the gate saturates (NaN at ±Inf), so x^2
		// in dz/dx is clamped below overflow, as the decomposition's
		const float x2 = v * v < 1e8f ? v * v : 1e8f;
		const float k = 2 * AG_GELU_C + 6 * AG_GELU_C * AG_GELU_A * x2;
		d[i] = (s + v * s * s1 * k) * dy[i];
	}
}

struct ggml_tensor *ag_gelu_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy) {
	struct ggml_tensor *src[2] = {x, dy};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], src, dy ? 2 : 1,
	                                       dy ? ag_gelu_back : ag_gelu, GGML_N_TASKS_MAX, NULL);
	ggml_set_name(t, dy ? "GELU_BACK(custom)" : "GELU(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

// ag_dropout's p and scale travel in userdata's two halves.
void ag_dropout(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	const uint64_t bits = (uint64_t)(uintptr_t)userdata;
	float p, s;
	const uint32_t pb = (uint32_t)bits, sb = (uint32_t)(bits >> 32);
	memcpy(&p, &pb, 4);
	memcpy(&s, &sb, 4);
	int64_t i0, i1;
	range_of(ggml_nelements(dst), ith, nth, &i0, &i1);
	const float *x = (const float *)dst->src[0]->data, *u = (const float *)dst->src[1]->data;
	float *d = (float *)dst->data;
	for (int64_t i = i0; i < i1; i++) {
		// x times the scaled mask, as the decomposition's product: a
		// dropped NaN or infinity is NaN
		d[i] = x[i] * (u[i] >= p && u[i] < 2 ? s : 0.0f);
	}
}

struct ggml_tensor *ag_dropout_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *u, float p, float scale) {
	uint32_t pb, sb;
	memcpy(&pb, &p, 4);
	memcpy(&sb, &scale, 4);
	struct ggml_tensor *src[2] = {x, u};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], src, 2, ag_dropout, GGML_N_TASKS_MAX,
	                                       (void *)(uintptr_t)((uint64_t)pb | (uint64_t)sb << 32));
	ggml_set_name(t, "DROPOUT(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

// ag_index: backend.ClampIndex of every f32 index, as i32 (rows in
// userdata). v >= 0 fails for NaN and negatives (0); the rounding, halves
// away from zero, is floor(v + 0.5) in double, exact for every f32 v >= 0.
void ag_index(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	const int64_t rows = (int64_t)(uintptr_t)userdata;
	int64_t i0, i1;
	range_of(ggml_nelements(dst), ith, nth, &i0, &i1);
	const float *x = (const float *)dst->src[0]->data;
	int32_t *d = (int32_t *)dst->data;
	for (int64_t i = i0; i < i1; i++) {
		const double v = x[i];
		d[i] = !(v >= 0) ? 0 : (v > (double)(rows - 1) ? (int32_t)(rows - 1) : (int32_t)floor(v + 0.5));
	}
}

struct ggml_tensor *ag_index_op(struct ggml_context *ctx, struct ggml_tensor *idx, int64_t rows) {
	struct ggml_tensor *src[1] = {idx};
	return ggml_custom_4d(ctx, GGML_TYPE_I32, idx->ne[0], idx->ne[1], idx->ne[2], idx->ne[3], src, 1, ag_index, GGML_N_TASKS_MAX,
	                      (void *)(uintptr_t)rows);
}

// norm_group normalizes one group of values, nb blocks of len at a stride
// (element (b, i) at b*stride + i), as backend's norm64: with dy NULL
// d = (x - mean)*r, r = 1/sqrt(mean((x - mean)^2) + eps); else the input
// gradient d = r*(c - xhat*mean(c*xhat)), xhat = (x - mean)*r, c = dy -
// mean(dy). Without centre the means of x and dy are 0 (RMS norm). The
// sums and the arithmetic are in double, as the float64 definition's: no
// f32 overflow of a variance or cancellation in the centring, and a NaN
// or infinity in x (or, centred, in dy) makes the whole group NaN through
// the means.
static void norm_group(const float *x, const float *dy, float *d, int64_t nb, int64_t len, int64_t stride, double eps,
                       int centre) {
	const double n = (double)(nb * len);
	double sx = 0, sdy = 0;
	if (centre) {
		for (int64_t b = 0; b < nb; b++) {
			for (int64_t i = 0; i < len; i++) {
				sx += x[b * stride + i];
				if (dy) {
					sdy += dy[b * stride + i];
				}
			}
		}
	}
	const double mean = sx / n, mdy = sdy / n;
	double sv = 0;
	for (int64_t b = 0; b < nb; b++) {
		for (int64_t i = 0; i < len; i++) {
			const double e = x[b * stride + i] - mean;
			sv += e * e;
		}
	}
	const double rs = 1 / sqrt(sv / n + eps);
	if (!dy) {
		for (int64_t b = 0; b < nb; b++) {
			for (int64_t i = 0; i < len; i++) {
				d[b * stride + i] = (float)((x[b * stride + i] - mean) * rs);
			}
		}
		return;
	}
	double sp = 0;
	for (int64_t b = 0; b < nb; b++) {
		for (int64_t i = 0; i < len; i++) {
			const int64_t k = b * stride + i;
			sp += (dy[k] - mdy) * ((x[k] - mean) * rs);
		}
	}
	const double mp = sp / n;
	for (int64_t b = 0; b < nb; b++) {
		for (int64_t i = 0; i < len; i++) {
			const int64_t k = b * stride + i;
			d[k] = (float)(rs * ((dy[k] - mdy) - (x[k] - mean) * rs * mp));
		}
	}
}

static float eps_of(void *userdata) {
	float eps;
	const uint32_t eb = (uint32_t)(uintptr_t)userdata;
	memcpy(&eps, &eb, 4);
	return eps;
}

// rows_back runs norm_group's gradient on each row of dst's sources: one
// pass over the rows instead of ggml's nodes (layer norm: two means, two
// centrings, rms_norm_back). Sources contiguous.
static void rows_back(struct ggml_tensor *dst, int ith, int nth, void *userdata, int centre) {
	const int64_t n = dst->ne[0];
	int64_t r0, r1;
	range_of(ggml_nrows(dst), ith, nth, &r0, &r1);
	for (int64_t r = r0; r < r1; r++) {
		norm_group((const float *)dst->src[0]->data + r * n, (const float *)dst->src[1]->data + r * n,
		           (float *)dst->data + r * n, 1, n, n, eps_of(userdata), centre);
	}
}

// Layer norm's input gradient (backend.OpLayerNormBack), per row.
void ag_layer_norm_back(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	rows_back(dst, ith, nth, userdata, 1);
}

// RMS norm's input gradient (backend.OpRMSNormBack), per row. ggml-cpu's
// rms_norm_back sums x*x in f32 before widening, and its graph may run it
// in place of x, which it reads after writing.
void ag_rms_norm_back(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	rows_back(dst, ith, nth, userdata, 0);
}

// channel_blocks: t as N blocks (*nb) of C channels (axis cd, ggml's
// order) of L contiguous values (*l).
static void channel_blocks(const struct ggml_tensor *t, int cd, int64_t *l, int64_t *nb) {
	*l = 1, *nb = 1;
	for (int i = 0; i < 4; i++) {
		if (i < cd) {
			*l *= t->ne[i];
		} else if (i > cd) {
			*nb *= t->ne[i];
		}
	}
}

// batch_groups runs norm_group on each channel of dst: channel axis cd of
// ggml's order (userdata's bits 32 and up; eps in the low 32), C = ne[cd]
// channels of N blocks of L contiguous values. Sources contiguous.
static void batch_groups(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	const int cd = (int)((uint64_t)(uintptr_t)userdata >> 32);
	const int64_t c = dst->ne[cd];
	int64_t l, nb;
	channel_blocks(dst, cd, &l, &nb);
	const float *dy = dst->src[1] ? (const float *)dst->src[1]->data : NULL;
	// channels split evenly (range_of's multiples of 16 would give one
	// thread a convnet's 8 to 16 channels)
	for (int64_t ch = ith; ch < c; ch += nth) {
		norm_group((const float *)dst->src[0]->data + ch * l, dy ? dy + ch * l : NULL, (float *)dst->data + ch * l, nb, l, c * l,
		           eps_of(userdata), 1);
	}
}

// Batch norm (backend.OpBatchNorm) and its input gradient (OpBatchNormBack).
void ag_batch_norm(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	batch_groups(dst, ith, nth, userdata);
}

void ag_batch_norm_back(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	batch_groups(dst, ith, nth, userdata);
}

struct ggml_tensor *ag_batch_norm_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps, int cd) {
	uint32_t eb;
	memcpy(&eb, &eps, 4);
	struct ggml_tensor *src[2] = {x, dy};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], src, dy ? 2 : 1,
	                                       dy ? ag_batch_norm_back : ag_batch_norm, GGML_N_TASKS_MAX,
	                                       (void *)(uintptr_t)((uint64_t)eb | (uint64_t)cd << 32));
	ggml_set_name(t, dy ? "BATCH_NORM_BACK(custom)" : "BATCH_NORM(custom)"); // their labels in profiles (nodetimer.go)
	return t;
}

// ag_batch_norm_stats: backend.OpBatchNormStats, each channel's mean and
// biased variance in double (dst [C, 2] in ggml's order), channels split
// among the threads. userdata: the channel axis cd of src[0].
void ag_batch_norm_stats(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	const struct ggml_tensor *x = dst->src[0];
	const int cd = (int)(uintptr_t)userdata;
	const int64_t c = x->ne[cd];
	int64_t l, nb;
	channel_blocks(x, cd, &l, &nb);
	const float *xs = (const float *)x->data;
	float *out = (float *)dst->data;
	for (int64_t ch = ith; ch < c; ch += nth) {
		double m = 0, v = 0;
		for (int64_t b = 0; b < nb; b++) {
			for (int64_t k = 0; k < l; k++) {
				m += xs[(b * c + ch) * l + k];
			}
		}
		m /= (double)(nb * l);
		for (int64_t b = 0; b < nb; b++) {
			for (int64_t k = 0; k < l; k++) {
				const double d = xs[(b * c + ch) * l + k] - m;
				v += d * d;
			}
		}
		out[ch] = (float)m, out[c + ch] = (float)(v / (double)(nb * l));
	}
}

struct ggml_tensor *ag_batch_norm_stats_op(struct ggml_context *ctx, struct ggml_tensor *x, int cd) {
	struct ggml_tensor *t =
	    ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[cd], 2, 1, 1, &x, 1, ag_batch_norm_stats, GGML_N_TASKS_MAX, (void *)(uintptr_t)cd);
	ggml_set_name(t, "BATCH_NORM_STATS(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

// ggml-vulkan's batch norm kernels (build.sh's patch 0015): custom nodes
// marked in op_params from AG_VK_PARAMS on, past ggml's struct
// ggml_custom_op_params, which that backend runs by its own shader. Their
// CPU function is a guard: ggml-cpu never gets them (ag_batch_norm_op).
enum { AG_VK_PARAMS = 8, AG_VK_MAGIC = 0x6167766b };

void ag_vk_kernel(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)ith, (void)nth, (void)userdata;
	GGML_ABORT("ag: %s is a ggml-vulkan kernel (patches 0015-0019), not run on this backend", dst->name);
}

static struct ggml_tensor *vk_kernel(struct ggml_context *ctx, const int64_t ne[4], struct ggml_tensor **src, int n, int mode,
                                     const int32_t lcns[4], float eps, const char *name) {
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3], src, n, ag_vk_kernel, 1, NULL);
	int32_t *p = t->op_params + AG_VK_PARAMS;
	p[0] = AG_VK_MAGIC, p[1] = mode;
	memcpy(p + 2, lcns, 4 * sizeof(int32_t));
	memcpy(p + 6, &eps, sizeof(float));
	ggml_set_name(t, name); // its label in profiles (nodetimer.go)
	return t;
}

// vk_bn_shape: L, C, N of x over channel axis cd, and the chunks.
static void vk_bn_shape(const struct ggml_tensor *x, int cd, int splits, int32_t lcns[4]) {
	int64_t l, nb;
	channel_blocks(x, cd, &l, &nb);
	lcns[0] = (int32_t)l, lcns[1] = (int32_t)x->ne[cd], lcns[2] = (int32_t)nb, lcns[3] = splits;
}

struct ggml_tensor *ag_vk_batch_norm_sums(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, int cd, int splits) {
	int32_t lcns[4];
	vk_bn_shape(x, cd, splits, lcns);
	struct ggml_tensor *src[2] = {x, dy};
	const int64_t ps[4] = {4, splits, lcns[1], 1};
	return vk_kernel(ctx, ps, src, dy ? 2 : 1, dy ? 1 : 0, lcns, 0, "BN_SUMS(custom)");
}

struct ggml_tensor *ag_vk_batch_norm(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, struct ggml_tensor *sums,
                                     float eps, int cd, int splits) {
	int32_t lcns[4];
	vk_bn_shape(x, cd, splits, lcns);
	const int back = dy != NULL;
	const int64_t ms[4] = {4, lcns[1], 1, 1};
	struct ggml_tensor *stats = vk_kernel(ctx, ms, &sums, 1, 2 + back, lcns, eps, "BN_STATS(custom)");
	struct ggml_tensor *src[3] = {x, stats, dy};
	return vk_kernel(ctx, x->ne, src, 2 + back, 4 + back, lcns, eps, back ? "BATCH_NORM_BACK(custom)" : "BATCH_NORM(custom)");
}

struct ggml_tensor *ag_vk_batch_norm_stats(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *sums, int cd, int splits) {
	int32_t lcns[4];
	vk_bn_shape(x, cd, splits, lcns);
	const int64_t ms[4] = {lcns[1], 2, 1, 1};
	return vk_kernel(ctx, ms, &sums, 1, 6, lcns, 0, "BATCH_NORM_STATS(custom)");
}

struct ggml_tensor *ag_vk_cross_entropy(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *labels, struct ggml_tensor *g) {
	// L = 1, C classes, N rows, S = 1 (patch 0015's parameters, read by patch 0016's modes)
	const int32_t lcns[4] = {1, (int32_t)x->ne[0], (int32_t)x->ne[1], 1};
	struct ggml_tensor *src[3] = {x, labels, g};
	if (g == NULL) {
		const int64_t ne[4] = {x->ne[1], 1, 1, 1};
		return vk_kernel(ctx, ne, src, 2, 7, lcns, 0, "CROSS_ENTROPY(custom)");
	}
	return vk_kernel(ctx, x->ne, src, 3, 8, lcns, 0, "CROSS_ENTROPY_BACK(custom)");
}

struct ggml_tensor *ag_vk_col_sums(struct ggml_context *ctx, struct ggml_tensor *x, int64_t rows, int64_t cols, int splits) {
	// L = 1, C columns, N rows, S chunks (patch 0015's parameters, read by patch 0017's modes)
	const int32_t lcns[4] = {1, (int32_t)cols, (int32_t)rows, splits};
	const int64_t ps[4] = {cols, splits, 1, 1};
	struct ggml_tensor *parts = vk_kernel(ctx, ps, &x, 1, 9, lcns, 0, "COL_SUMS_PARTS(custom)");
	const int64_t ne[4] = {cols, 1, 1, 1};
	return vk_kernel(ctx, ne, &parts, 1, 10, lcns, 0, "COL_SUMS(custom)");
}

struct ggml_tensor *ag_vk_sum_squares_parts(struct ggml_context *ctx, struct ggml_tensor **src, int n, int splits) {
	// L, C, N the sources' lengths (0: none), S the chunks
	int32_t lcns[4] = {0, 0, 0, splits};
	for (int i = 0; i < n; i++) {
		lcns[i] = (int32_t)ggml_nelements(src[i]);
	}
	const int64_t ne[4] = {splits, 3, 1, 1};
	return vk_kernel(ctx, ne, src, n, 11, lcns, 0, "SUM_SQUARES_PARTS(custom)");
}

struct ggml_tensor *ag_vk_sum_squares_add(struct ggml_context *ctx, struct ggml_tensor *parts, struct ggml_tensor *total) {
	// N = 1: chained to total
	const int32_t lcns[4] = {0, 0, total != NULL, (int32_t)parts->ne[0]};
	struct ggml_tensor *src[2] = {parts, total};
	const int64_t ne[4] = {1, 1, 1, 1};
	return vk_kernel(ctx, ne, src, total != NULL ? 2 : 1, 12, lcns, 0, "SUM_SQUARES(custom)");
}

struct ggml_tensor *ag_vk_matmul(struct ggml_context *ctx, struct ggml_tensor *a, struct ggml_tensor *b, int a_rows, int splits) {
	// M, N, K, S; the batches in op_params[14] (where the others' eps is), the layout in [15]
	const int64_t m = a_rows ? a->ne[1] : a->ne[0], n = b->ne[0], batches = a->ne[2];
	const int32_t lcns[4] = {(int32_t)m, (int32_t)n, (int32_t)b->ne[1], splits};
	struct ggml_tensor *src[2] = {a, b};
	const int64_t ps[4] = {n, m, batches * splits, 1};
	struct ggml_tensor *p = vk_kernel(ctx, ps, src, 2, 13, lcns, 0, splits > 1 ? "MATMUL_PARTS(custom)" : "MATMUL(custom)");
	p->op_params[AG_VK_PARAMS + 6] = (int32_t)batches, p->op_params[AG_VK_PARAMS + 7] = a_rows != 0;
	if (splits == 1) {
		return p;
	}
	const int64_t ne[4] = {n, m, batches, 1};
	struct ggml_tensor *t = vk_kernel(ctx, ne, &p, 1, 14, lcns, 0, "MATMUL_SUM(custom)");
	t->op_params[AG_VK_PARAMS + 6] = (int32_t)batches, t->op_params[AG_VK_PARAMS + 7] = 0;
	return t;
}

struct ggml_tensor *ag_rms_norm_back_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps) {
	uint32_t eb;
	memcpy(&eb, &eps, 4);
	struct ggml_tensor *src[2] = {x, dy};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], src, 2, ag_rms_norm_back,
	                                       GGML_N_TASKS_MAX, (void *)(uintptr_t)eb);
	ggml_set_name(t, "RMS_NORM_BACK(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

struct ggml_tensor *ag_layer_norm_back_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *dy, float eps) {
	uint32_t eb;
	memcpy(&eb, &eps, 4);
	struct ggml_tensor *src[2] = {x, dy};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], src, 2, ag_layer_norm_back,
	                                       GGML_N_TASKS_MAX, (void *)(uintptr_t)eb);
	ggml_set_name(t, "LAYER_NORM_BACK(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

// The window of ag_max_pool_back: int32 op_params from here on, past
// ggml's struct ggml_custom_op_params (in ggml-impl.h, not installed: a
// function, an int count and userdata, 24 bytes on 64-bit targets).
enum { POOL_PARAMS = 8 };

void ag_max_pool_back(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	(void)userdata;
	const int32_t *w = dst->op_params + POOL_PARAMS;
	const int kh = w[0], kw = w[1], sh = w[2], sw = w[3], ph = w[4], pw = w[5];
	const struct ggml_tensor *g = dst->src[1];
	const int64_t W = dst->ne[0], H = dst->ne[1], OW = g->ne[0], OH = g->ne[1];
	// whole planes per thread: each plane's sums are its own
	for (int64_t p = ith; p < dst->ne[2] * dst->ne[3]; p += nth) {
		const float *x = (const float *)dst->src[0]->data + p * H * W;
		const float *gp = (const float *)g->data + p * OH * OW;
		float *d = (float *)dst->data + p * H * W;
		memset(d, 0, sizeof(float) * H * W);
		for (int64_t oy = 0; oy < OH; oy++) {
			for (int64_t ox = 0; ox < OW; ox++) {
				int64_t by = 0, bx = 0;
				float best = 0;
				int found = 0;
				for (int i = 0; i < kh; i++) {
					for (int j = 0; j < kw; j++) {
						const int64_t y = oy * sh + i - ph, xx = ox * sw + j - pw;
						const float v = y >= 0 && y < H && xx >= 0 && xx < W ? x[y * W + xx] : -INFINITY;
						if (v != v) {
							by = y, bx = xx, found = 2;
							goto picked;
						}
						if (!found || v > best) {
							by = y, bx = xx, best = v, found = 1;
						}
					}
				}
			picked:
				if (by >= 0 && by < H && bx >= 0 && bx < W) {
					d[by * W + bx] += gp[oy * OW + ox];
				}
			}
		}
	}
}

struct ggml_tensor *ag_max_pool_back_op(struct ggml_context *ctx, struct ggml_tensor *x, struct ggml_tensor *g, int kh, int kw, int sh,
                                        int sw, int ph, int pw) {
	struct ggml_tensor *src[2] = {x, g};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], src, 2, ag_max_pool_back,
	                                       GGML_N_TASKS_MAX, NULL);
	_Static_assert((POOL_PARAMS + 6) * sizeof(int32_t) <= GGML_MAX_OP_PARAMS, "the window does not fit op_params");
	const int32_t w[6] = {kh, kw, sh, sw, ph, pw};
	memcpy(t->op_params + POOL_PARAMS, w, sizeof(w));
	ggml_set_name(t, "MAX_POOL_BACK(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

// Attention (ag_attention) takes the queries in blocks of 4 (of one batch),
// so that each k and v row read serves 4 of them: the union of the keys
// the block attends (a key no query of it attends is not read), the 4
// scores of each, per query the maximum of its attended scores (NaN if
// any is NaN), e = exp(s - max) and sum_j e_j v_j / sum_j e_j over its
// attended keys alone (a key it masks adds nothing, not 0 times v_j). A
// +Inf or NaN score, or only -Inf ones, make e NaN for the whole row, as
// ir.go's softmax rule says; ggml's flash attention, whose online maximum
// starts at -Inf, does not.

enum { ATTN_ROWS = 4 };

// dot4_plain: out[r] = q[r] . k for the 4 rows.
static void dot4_plain(const float *const q[ATTN_ROWS], const float *k, int64_t n, float out[ATTN_ROWS]) {
	for (int r = 0; r < ATTN_ROWS; r++) {
		float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		int64_t c = 0;
		for (; c + 4 <= n; c += 4) {
			s0 += q[r][c] * k[c], s1 += q[r][c + 1] * k[c + 1];
			s2 += q[r][c + 2] * k[c + 2], s3 += q[r][c + 3] * k[c + 3];
		}
		for (; c < n; c++) {
			s0 += q[r][c] * k[c];
		}
		out[r] = (s0 + s1) + (s2 + s3);
	}
}

// axpy_plain: y += a*x (the compiler vectorizes it at O3).
__attribute__((optimize("O3"))) static void axpy_plain(float *restrict y, const float *restrict x, float a, int64_t n) {
	for (int64_t c = 0; c < n; c++) {
		y[c] += a * x[c];
	}
}

// axpy4_plain: o[r] += e[r]*v for the 4 rows.
static void axpy4_plain(float *const o[ATTN_ROWS], const float *v, const float e[ATTN_ROWS], int64_t n) {
	for (int r = 0; r < ATTN_ROWS; r++) {
		axpy_plain(o[r], v, e[r], n);
	}
}

#if defined(__x86_64__)
// dot4_avx2: 8 accumulators (4 rows x 2 halves of 16 columns), one load of
// k per 4 FMAs, and the 4 horizontal sums in 3 hadds.
__attribute__((target("avx2,fma"))) static void dot4_avx2(const float *const q[ATTN_ROWS], const float *k, int64_t n, float out[ATTN_ROWS]) {
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
	__m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
	const float *q0 = q[0], *q1 = q[1], *q2 = q[2], *q3 = q[3];
	int64_t c = 0;
	for (; c + 16 <= n; c += 16) {
		const __m256 k0 = _mm256_loadu_ps(k + c), k1 = _mm256_loadu_ps(k + c + 8);
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + c), k0, a0), b0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + c + 8), k1, b0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + c), k0, a1), b1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + c + 8), k1, b1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + c), k0, a2), b2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + c + 8), k1, b2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + c), k0, a3), b3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + c + 8), k1, b3);
	}
	for (; c + 8 <= n; c += 8) {
		const __m256 k0 = _mm256_loadu_ps(k + c);
		a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + c), k0, a0);
		a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + c), k0, a1);
		a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + c), k0, a2);
		a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + c), k0, a3);
	}
	a0 = _mm256_add_ps(a0, b0), a1 = _mm256_add_ps(a1, b1), a2 = _mm256_add_ps(a2, b2), a3 = _mm256_add_ps(a3, b3);
	// hadd(hadd(a0, a1), hadd(a2, a3)) holds each row's lane sums of
	// the low half in lanes 0..3 and of the high half in lanes 4..7.
	const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
	_mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
	for (; c < n; c++) {
		out[0] += q0[c] * k[c], out[1] += q1[c] * k[c], out[2] += q2[c] * k[c], out[3] += q3[c] * k[c];
	}
}

__attribute__((target("avx2,fma"))) static void axpy_avx2(float *y, const float *x, float a, int64_t n) {
	const __m256 av = _mm256_set1_ps(a);
	int64_t c = 0;
	for (; c + 8 <= n; c += 8) {
		_mm256_storeu_ps(y + c, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + c), _mm256_loadu_ps(y + c)));
	}
	for (; c < n; c++) {
		y[c] += a * x[c];
	}
}

__attribute__((target("avx2,fma"))) static void axpy4_avx2(float *const o[ATTN_ROWS], const float *v, const float e[ATTN_ROWS], int64_t n) {
	const __m256 e0 = _mm256_set1_ps(e[0]), e1 = _mm256_set1_ps(e[1]), e2 = _mm256_set1_ps(e[2]), e3 = _mm256_set1_ps(e[3]);
	float *o0 = o[0], *o1 = o[1], *o2 = o[2], *o3 = o[3];
	int64_t c = 0;
	for (; c + 8 <= n; c += 8) {
		const __m256 x = _mm256_loadu_ps(v + c);
		_mm256_storeu_ps(o0 + c, _mm256_fmadd_ps(e0, x, _mm256_loadu_ps(o0 + c)));
		_mm256_storeu_ps(o1 + c, _mm256_fmadd_ps(e1, x, _mm256_loadu_ps(o1 + c)));
		_mm256_storeu_ps(o2 + c, _mm256_fmadd_ps(e2, x, _mm256_loadu_ps(o2 + c)));
		_mm256_storeu_ps(o3 + c, _mm256_fmadd_ps(e3, x, _mm256_loadu_ps(o3 + c)));
	}
	for (; c < n; c++) {
		o0[c] += e[0] * v[c], o1[c] += e[1] * v[c], o2[c] += e[2] * v[c], o3[c] += e[3] * v[c];
	}
}
#endif

void ag_attention(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	const struct ggml_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *keep = dst->src[3];
	const uint32_t bits = (uint32_t)(uintptr_t)userdata;
	float scale;
	memcpy(&scale, &bits, sizeof scale);
	const int64_t D = q->ne[0], Tq = q->ne[1], Tk = k->ne[1], Dv = v->ne[0], A2 = q->ne[2];
	const int64_t per = (Tq + ATTN_ROWS - 1) / ATTN_ROWS, blocks = per * A2 * q->ne[3];
	void (*dot4)(const float *const[ATTN_ROWS], const float *, int64_t, float[ATTN_ROWS]) = dot4_plain;
	void (*axpy)(float *, const float *, float, int64_t) = axpy_plain;
	void (*axpy4)(float *const[ATTN_ROWS], const float *, const float[ATTN_ROWS], int64_t) = axpy4_plain;
#if defined(__x86_64__)
	__builtin_cpu_init(); // see ag_matmul_tn
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		dot4 = dot4_avx2, axpy = axpy_avx2, axpy4 = axpy4_avx2;
	}
#endif
	// The keys the block attends, which of its queries attend each (a bit
	// per row), and each query's scores, then weights, of those keys.
	int32_t *idx = malloc((size_t)Tk * sizeof *idx);
	uint8_t *att = malloc((size_t)Tk);
	float *sc = malloc((size_t)Tk * ATTN_ROWS * sizeof *sc);
	GGML_ASSERT(idx != NULL && att != NULL && sc != NULL);
	// keep's step along the keys: 0 where it broadcasts.
	const size_t kstep = keep->ne[0] == 1 ? 0 : keep->nb[0];
	// Blocks interleave among the threads: under a causal mask the later
	// queries attend more keys.
	for (int64_t blk = ith; blk < blocks; blk += nth) {
		const int64_t i0 = (blk % per) * ATTN_ROWS, i2 = (blk / per) % A2, i3 = blk / (per * A2);
		const int nr = Tq - i0 < ATTN_ROWS ? (int)(Tq - i0) : ATTN_ROWS;
		const char *kb = (const char *)k->data + i2 * k->nb[2] + i3 * k->nb[3];
		const char *vb = (const char *)v->data + i2 * v->nb[2] + i3 * v->nb[3];
		const float *qr[ATTN_ROWS];
		float *o[ATTN_ROWS];
		const char *mp[ATTN_ROWS];
		for (int r = 0; r < ATTN_ROWS; r++) {
			const int64_t i = i0 + (r < nr ? r : 0); // rows past Tq repeat row 0, unused
			qr[r] = (const float *)((const char *)q->data + i * q->nb[1] + i2 * q->nb[2] + i3 * q->nb[3]);
			o[r] = (float *)((char *)dst->data + i * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
			mp[r] = (const char *)keep->data + (i % keep->ne[1]) * keep->nb[1] + (i2 % keep->ne[2]) * keep->nb[2] + (i3 % keep->ne[3]) * keep->nb[3];
		}
		int64_t n = 0;
		uint8_t seen = 0; // the rows that attend some key
		for (int64_t j = 0; j < Tk; j++) {
			uint8_t a = 0;
			for (int r = 0; r < nr; r++) {
				a |= (*(const float *)(mp[r] + j * kstep) != 0) << r; // NaN attends
			}
			if (a) {
				idx[n] = (int32_t)j, att[n] = a;
				n++;
				seen |= a;
			}
		}
		float mx[ATTN_ROWS], sum[ATTN_ROWS];
		for (int r = 0; r < ATTN_ROWS; r++) {
			mx[r] = -INFINITY, sum[r] = 0;
		}
		for (int64_t t = 0; t < n; t++) {
			float s[ATTN_ROWS];
			dot4(qr, (const float *)(kb + idx[t] * k->nb[1]), D, s);
			for (int r = 0; r < nr; r++) {
				s[r] *= scale;
				sc[r * Tk + t] = s[r];
				if (att[t] >> r & 1 && (s[r] > mx[r] || s[r] != s[r])) {
					mx[r] = s[r]; // a NaN stays: nothing compares above it
				}
			}
		}
		for (int r = 0; r < nr; r++) {
			memset(o[r], 0, (size_t)Dv * sizeof(float)); // no key attended: 0
			float *e = sc + r * Tk;
			for (int64_t t = 0; t < n; t++) {
				if (att[t] >> r & 1) {
					e[t] = expf(e[t] - mx[r]);
					sum[r] += e[t];
				}
			}
		}
		for (int64_t t = 0; t < n; t++) {
			const float *vj = (const float *)(vb + idx[t] * v->nb[1]);
			if (att[t] == 0xF) {
				const float e[ATTN_ROWS] = {sc[t], sc[Tk + t], sc[2 * Tk + t], sc[3 * Tk + t]};
				axpy4(o, vj, e, Dv);
				continue;
			}
			for (int r = 0; r < nr; r++) {
				if (att[t] >> r & 1) {
					axpy(o[r], vj, sc[r * Tk + t], Dv);
				}
			}
		}
		for (int r = 0; r < nr; r++) {
			if (!(seen >> r & 1)) {
				continue; // attends no key: 0
			}
			const float inv = 1 / sum[r];
			for (int64_t c = 0; c < Dv; c++) {
				o[r][c] *= inv;
			}
		}
	}
	free(idx);
	free(att);
	free(sc);
}

struct ggml_tensor *ag_attention_op(struct ggml_context *ctx, struct ggml_tensor *q, struct ggml_tensor *k, struct ggml_tensor *v, struct ggml_tensor *keep, float scale) {
	struct ggml_tensor *src[4] = {q, k, v, keep};
	uint32_t bits;
	memcpy(&bits, &scale, sizeof bits);
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, v->ne[0], q->ne[1], q->ne[2], q->ne[3], src, 4, ag_attention, GGML_N_TASKS_MAX, (void *)(uintptr_t)bits);
	ggml_set_name(t, "ATTENTION(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

// Philox4x32-10 (backend/philox.go is the reference; see there).
static void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
	for (int r = 0; r < 10; r++) {
		if (r > 0) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		const uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
		const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
		c[0] = n0;
		c[1] = (uint32_t)p1;
		c[2] = n2;
		c[3] = (uint32_t)p0;
	}
}

static uint64_t state_piece(float f) { return f >= 0 && f < 65536.0f ? (uint64_t)f : 0; }

void ag_rand_uniform_fill(float *dst, int64_t e0, int64_t e1, const float *state, uint64_t start) {
	uint64_t key = 0, ctr = 0;
	for (int i = 0; i < 4; i++) {
		key |= state_piece(state[i]) << (16 * i);
		ctr |= state_piece(state[4 + i]) << (16 * i);
	}
	const uint64_t base = ctr + start;
	for (int64_t e = e0; e < e1;) {
		const uint64_t blk = base + (uint64_t)(e / 4);
		uint32_t c[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 0, 0};
		philox(c, (uint32_t)key, (uint32_t)(key >> 32));
		for (int q = (int)(e % 4); q < 4 && e < e1; q++, e++) {
			dst[e - e0] = (float)(c[q] >> 8) * 0x1p-24f;
		}
	}
}

void ag_rand_uniform(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
	int64_t e0, e1;
	range_of(ggml_nelements(dst), ith, nth, &e0, &e1);
	if (e0 < e1) {
		ag_rand_uniform_fill((float *)dst->data + e0, e0, e1, (const float *)dst->src[0]->data, (uint64_t)(uintptr_t)userdata);
	}
}

struct ggml_tensor *ag_rand_uniform_op(struct ggml_context *ctx, struct ggml_tensor *state, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint64_t start) {
	struct ggml_tensor *src[1] = {state};
	struct ggml_tensor *t = ggml_custom_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3, src, 1, ag_rand_uniform, GGML_N_TASKS_MAX, (void *)(uintptr_t)start);
	ggml_set_name(t, "RAND_UNIFORM(custom)"); // its label in profiles (nodetimer.go)
	return t;
}

struct ggml_tensor *ag_philox_op(struct ggml_context *ctx, struct ggml_tensor *state, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, uint64_t start) {
	struct ggml_tensor *t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
	// arange's own parameters (start 0, stop n, step 1) keep the node
	// self-consistent for anything that reads them; [4] and [5] are the
	// counter offset (patch 0010).
	const float arange[3] = {0.0f, (float)ggml_nelements(t), 1.0f};
	memcpy(t->op_params, arange, sizeof arange);
	t->op_params[4] = (int32_t)(uint32_t)start;
	t->op_params[5] = (int32_t)(uint32_t)(start >> 32);
	t->op = GGML_OP_ARANGE;
	t->src[0] = state;
	ggml_set_name(t, "RAND_UNIFORM(philox)"); // its label in profiles (nodetimer.go)
	return t;
}

static int64_t ag_now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void ag_node_clock_start(ag_node_clock *c) {
	c->n = 0;
	if (c->cap > 0) {
		c->ts[c->n++] = ag_now_ns();
	}
}

bool ag_node_clock_cb(void *data) {
	ag_node_clock *c = data;
	if (c->n < c->cap) {
		c->ts[c->n++] = ag_now_ns();
	}
	return false;
}

// ggml's default logger prints every level, its Vulkan backend's debug
// lines included, to stderr; ag's keeps warnings and errors (and, with
// AG_GGML_LOG, the level asked for). A continuation line follows its
// line's level.
static int ag_log_min = GGML_LOG_LEVEL_WARN;
static int ag_log_last = GGML_LOG_LEVEL_NONE;

// ag_matrix_cores holds what ggml-vulkan's device line said of matrix
// cores for each device index ("none", "KHR_coopmat", "NV_coopmat2"); the
// line is logged once, when ggml-vulkan first lists its devices, whatever
// level is shown.
static char ag_matrix_cores[AG_VK_MAX_DEVICES][32];

static void ag_note_matrix_cores(const char *text) {
    const char *p = strstr(text, "matrix cores: ");
    unsigned idx;
    if (p == NULL || sscanf(text, "ggml_vulkan: %u =", &idx) != 1 || idx >= AG_VK_MAX_DEVICES) {
        return;
    }
    p += strlen("matrix cores: ");
    size_t n = strcspn(p, "\r\n");
    if (n >= sizeof ag_matrix_cores[idx]) {
        n = sizeof ag_matrix_cores[idx] - 1;
    }
    memcpy(ag_matrix_cores[idx], p, n);
    ag_matrix_cores[idx][n] = 0;
}

const char *ag_vk_matrix_cores(int dev) {
    if (dev < 0 || dev >= AG_VK_MAX_DEVICES) {
        return "";
    }
    return ag_matrix_cores[dev];
}

static void ag_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    ag_note_matrix_cores(text);
    if (level == GGML_LOG_LEVEL_CONT) {
        level = ag_log_last;
    } else {
        ag_log_last = level;
    }
    if (level >= ag_log_min && level != GGML_LOG_LEVEL_NONE) {
        fputs(text, stderr);
        fflush(stderr);
    }
}

void ag_log_init(int min_level) {
    ag_log_min = min_level;
    ggml_log_set(ag_log, NULL);
}

const char *ag_custom_name(const struct ggml_tensor *t) {
	if (t->op != GGML_OP_CUSTOM) {
		return NULL;
	}
	// op_params begins with the function (ggml-impl.h's ggml_custom_op_params).
	ggml_custom_op_t fun;
	memcpy(&fun, t->op_params, sizeof(fun));
	static const struct {
		ggml_custom_op_t fn;
		const char *name;
	} known[] = {
	    {ag_transpose, "transpose"},     {ag_matmul_tn, "matmul_tn"}, {ag_relu, "relu"},
	    {ag_sign_step, "sign_step"},     {ag_sum_squares, "sum_squares"}, {ag_clamp, "clamp"},
	    {ag_row_max, "row_max"},         {ag_gelu, "gelu"},           {ag_gelu_back, "gelu_back"},
	    {ag_dropout, "dropout"},         {ag_attention, "attention"}, {ag_rand_uniform, "rand_uniform"},
	    {ag_layer_norm_back, "layer_norm_back"}, {ag_index, "index"},
	    {ag_rms_norm_back, "rms_norm_back"}, {ag_batch_norm, "batch_norm"},
	    {ag_batch_norm_back, "batch_norm_back"}, {ag_max_pool_back, "max_pool_back"},
	    {ag_batch_norm_stats, "batch_norm_stats"},
	    {ag_vk_kernel, "vulkan_kernel"},
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].fn == fun) {
			return known[i].name;
		}
	}
	return "other";
}

// extent is the bytes from t's first element to past its last, through its
// strides (ggml_nbytes for the unquantized types ag uses); 0 when empty.
static size_t extent(const struct ggml_tensor *t, const size_t nb[4]) {
	size_t n = ggml_type_size(t->type);
	for (int i = 0; i < GGML_MAX_DIMS; i++) {
		if (t->ne[i] <= 0) {
			return 0;
		}
		n += (size_t)(t->ne[i] - 1) * nb[i];
	}
	return n;
}

int ag_check_extents(struct ggml_cgraph *gf, char *err, size_t errlen) {
	int n = ggml_graph_n_nodes(gf);
	for (int i = 0; i < n; i++) {
		struct ggml_tensor *t = ggml_graph_node(gf, i);
		for (int s = -1; s < GGML_MAX_SRC; s++) {
			const struct ggml_tensor *x = s < 0 ? t : t->src[s];
			if (x == NULL || x->view_src == NULL) {
				continue;
			}
			size_t need = x->view_offs + extent(x, x->nb), have = ggml_nbytes(x->view_src);
			if (need > have) {
				snprintf(err, errlen,
				         "%s (%s of node %d, %s) [%lld %lld %lld %lld] strides [%zu %zu %zu %zu] from byte %zu reaches byte %zu of a tensor of %zu",
				         x->name, s < 0 ? "itself" : "a source", i, ggml_op_desc(t), (long long)x->ne[0], (long long)x->ne[1],
				         (long long)x->ne[2], (long long)x->ne[3], x->nb[0], x->nb[1], x->nb[2], x->nb[3], x->view_offs, need, have);
				return -1;
			}
		}
		if (t->op == GGML_OP_ACC || t->op == GGML_OP_SET) {
			// src1 written into src0 at the strides and offset of the op's
			// parameters (ggml_acc_impl: nb1, nb2, nb3, offset as int32)
			const int32_t *p = (const int32_t *)t->op_params;
			const struct ggml_tensor *b = t->src[1];
			size_t nb[4] = {ggml_type_size(b->type), (size_t)p[0], (size_t)p[1], (size_t)p[2]};
			size_t need = (size_t)p[3] + extent(b, nb), have = ggml_nbytes(t->src[0]);
			if (need > have) {
				snprintf(err, errlen, "%s of node %d writes [%lld %lld %lld %lld] at strides [%zu %zu %zu] from byte %d up to byte %zu of a tensor of %zu",
				         ggml_op_desc(t), i, (long long)b->ne[0], (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3], nb[1], nb[2],
				         nb[3], p[3], need, have);
				return -1;
			}
		}
	}
	return 0;
}
