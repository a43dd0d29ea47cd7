/* pdlite host target: optional native kernels (plain C99 + pthreads, CPython C-API, no NumPy headers).
 *
 * Kernels (float32, NCHW, C-contiguous buffers; shapes are passed in and checked against the buffer sizes):
 *   depthwise_conv2d  any kernel size / stride / padding / dilation / channel multiplier, optional
 *                     per-channel bias, fused activation (none, relu, relu6, leaky_relu, hard_swish,
 *                     hard_sigmoid)
 *   conv_gemm         out[n, g] = act(W[g] @ X[n, g] + bias): blocks of the product, each one a
 *                     single-threaded cblas_sgemm of the BLAS NumPy uses (its address comes from Python),
 *                     optionally gathering its own im2col columns (bounded memory)
 *   winograd_conv3x3  3x3 stride-1 convs by Winograd F(2x2, 3x3): 16 GEMMs over 2x2 output tiles (small
 *                     images of a batch side by side in the same GEMMs), by the BLAS or (weights packed)
 *                     packed_conv's register tiles
 *   packed_conv       out[n] = act(W @ columns(x[n]) + bias) with weights packed once and an own register-tiled
 *                     kernel (vectorised along the output channels: fast on small maps too), no BLAS
 *   packed_fc         out = act(x @ W + bias) on the same register tiles, W packed once
 *   packed_gemv       the same for a few rows of x, as matrix-vector products (W streamed once per row)
 *   direct_conv       convs of few input channels (stems) computed in place, 16 columns x 16 channels a tile
 *   bias_act          in place: out[n, c, :] = act(out[n, c, :] + bias[c])
 *   mul_rows          out[r, :] = x[r, :] * s[r] (squeeze-and-excitation's channel gates)
 *   squeeze_excitation  global average pool, two small products with activations, the channel scaling: one call
 *   im2col            (N, C, H, W) -> columns (N, C*KH*KW, OH*OW), padding read as zeros
 *   pool2d            max / avg windows with Paddle's divisor rules (exclusive or not)
 *   layer_norm        per row of a (rows, cols) matrix, optional scale and bias, mean and variance out
 *   softmax           per row of a (rows, cols) matrix
 * Activations fused where a kernel takes one: relu, relu6, leaky_relu, hard_swish, hard_sigmoid, gelu (erf).
 *
 * Work is split over a small persistent pthread pool (set_num_threads); chunks are claimed dynamically
 * so that a preempted worker on a busy machine costs little: the calling thread takes the rest. How work
 * is split never depends on the thread count, so neither do the results. No fast-math: results follow
 * IEEE float arithmetic; only the summation order (and FMA contraction) differs from the NumPy reference
 * kernels. On x86-64 GCC/Clang, the hot loops are compiled for several instruction sets and picked at load
 * time (no -march=native), so one build runs everywhere.
 *
 * Files (pdlite/kernels/host/native_src/, one extension `pdlite.kernels.host._native`; setup.py compiles every .c
 * here, and the SHA-256 over all of them, in name order, is compiled in as SOURCE_HASH):
 *   common.h        build macros, ISA dispatch (PD_VERSIONS), the pool's interface, activations, shared helpers
 *   threadpool.c    the pthread pool (parallel_for)
 *   depthwise.c     depthwise_conv2d          activation.c    bias_act, add_act, mul_rows
 *   depthwise_short.c  its form for maps of few rows (depthwise.h: the arguments its forms share)
 *   gemm_conv.c     im2col, conv_gemm, sgemm  winograd.c      winograd_conv3x3
 *   packed_gemm.c   packed_conv               direct_conv.c   direct_conv
 *   packed_fc.c     packed_fc (packed.h: the wide tile's shape, shared with packed_gemm.c)
 *   pool.c          pool2d                    norm_softmax.c  layer_norm, softmax
 *   gemv.c          packed_gemv               se.c            squeeze_excitation
 *   module.c        the Python module: method table, ISA pick, threads, SOURCE_HASH
 */
#ifndef PD_NATIVE_COMMON_H
#define PD_NATIVE_COMMON_H
#if defined(_WIN32)
#error "pdlite's native kernels need POSIX threads; setup.py does not build them on Windows (NumPy kernels are used)"
#endif
#ifndef PD_SOURCE_SHA256
#define PD_SOURCE_SHA256 "unknown" /* setup.py defines it: the SHA-256 of these sources, checked by native.py */
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* x86-64 with GCC or Clang: each task is compiled three times (baseline, AVX2+FMA, AVX-512) and the best one
 * the CPU supports is picked when the module loads (feature checks, not CPU model names). */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && !defined(PD_NO_DISPATCH)
#define PD_X86_DISPATCH 1
#define PD_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define PD_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#endif
/* GCC: keep short copy / zero loops inline (the per-row memcpy / memset calls it would make of them cost more
 * than the few floats they move); long rows call memcpy / memset explicitly */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

/* a loop whose iterations are independent (no aliasing between its arrays): vectorise without runtime checks */
#if defined(__clang__)
#define PD_SIMD _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define PD_SIMD _Pragma("GCC ivdep")
#else
#define PD_SIMD
#endif
#if defined(__GNUC__)
#define PD_INLINE static inline __attribute__((always_inline))
#else
#define PD_INLINE static inline
#endif

/* internal linkage across the extension's files, not exported from the shared object */
#if defined(__GNUC__) || defined(__clang__)
#define PD_HIDDEN __attribute__((visibility("hidden")))
#else
#define PD_HIDDEN
#endif

typedef Py_ssize_t isz;

/* ------------------------------------------------------------------------------------------------ */
/* thread pool (threadpool.c)                                                                       */
/* ------------------------------------------------------------------------------------------------ */

typedef void (*pd_task)(void *ctx, isz begin, isz end);

#define PD_MAX_THREADS 64

extern PD_HIDDEN int g_threads; /* threads per job, the caller included */
extern PD_HIDDEN long g_spin_ns; /* how long idle threads poll for work (PDLITE_NATIVE_SPIN_US) */
/* Run fn over [0, n) in chunks of `grain`, on up to g_threads threads (the caller is one of them). */
PD_HIDDEN void parallel_for(pd_task fn, void *ctx, isz n, isz grain);
/* The same, for tasks that gain from each thread running one contiguous stretch of [0, n) (neighbouring items share
 * cached data): thread i owns [n*i/T, n*(i+1)/T) and runs it front to back `grain` items at a time; a thread done
 * with its own takes `grain` items at a time from the back of the fullest other range. So a core slower than the
 * others (another tenant on its sibling hyperthread, a hybrid CPU's efficiency core, interrupts) ends with a
 * smaller share instead of holding up the job. Which thread runs an item never changes its result. */
PD_HIDDEN void parallel_ranges(pd_task fn, void *ctx, isz n, isz grain);
PD_HIDDEN PyObject *py_ranges_trace(PyObject *self, PyObject *args); /* the tests' view of it */
/* chunk size giving about `per_thread` chunks per thread */
PD_HIDDEN isz grain_for(isz n, int per_thread);
/* below this many floats a call runs on one thread (waking a worker costs more than the work) */
#define PD_ONE_THREAD_FLOATS 16384
/* the grain of `rows` rows of `cols` floats each: all of them (one thread) for tiny tensors, else grain_for's */
static inline isz row_grain(isz rows, isz cols) {
    return rows * cols < PD_ONE_THREAD_FLOATS ? rows : grain_for(rows, 4);
}
/* Memory for vectors: malloc's, 64-byte aligned (a 16-float vector load or store of it covers one cache line, not
 * two); released with free. NULL when out of memory. */
PD_HIDDEN void *pd_alloc64(size_t bytes);
/* A task's scratch memory: pd_alloc64, except that a failure (or one injected by the tests through
 * `_inject_alloc_failure`) is counted. A Python entry reads the count first (pd_failures) and ends with
 * `return pd_done(count)`: MemoryError if any task of its call could not get its memory (that task did nothing,
 * so the output is incomplete), else None. Never a silently incomplete output. The count is the calling thread's
 * own (its tasks' failures, wherever the pool ran them): a concurrent call from another thread never sees it. */
PD_HIDDEN void *pd_scratch(size_t bytes);
PD_HIDDEN unsigned pd_failures(void);
PD_HIDDEN PyObject *pd_done(unsigned before);
extern PD_HIDDEN int g_fail_alloc_in; /* > 0: the n-th next pd_scratch fails (module `_inject_alloc_failure`) */
PD_HIDDEN void pool_after_fork_child(void);

/* ------------------------------------------------------------------------------------------------ */
/* activations (same operation order as pdlite/kernels/host/activation.py)                          */
/* ------------------------------------------------------------------------------------------------ */

/* exp and erf written to vectorise (no libm calls in the loops, branch-free selects); no fast-math needed.
 * pd_expf: Cody-Waite reduction y = n*ln2 + r, |r| <= ln2/2, degree-7 Taylor polynomial (~1 ulp), 2^n from
 * the exponent bits (two factors, so that subnormal results round once); y below -104 (exp under half the
 * smallest subnormal) gives 0, above 88.7 +inf; NaN stays NaN. */
PD_INLINE float pd_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

PD_INLINE uint32_t pd_u32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* c ? a : b as a bit select: GCC threads the branches of ternaries on constants (pd_erff's a > 4 makes
 * pd_expf's argument constant) into control flow that it then vectorises only with AVX-512's masks: the erf-GELU
 * loop ran scalar in the AVX2 clones, 8x slower (the transformer's 32 x 512 fc + gelu 0.108 against 0.029 ms) */
PD_INLINE float pd_sel(int c, float a, float b) {
    const uint32_t m = 0u - (uint32_t)c;
    return pd_f32((pd_u32(a) & m) | (pd_u32(b) & ~m));
}

PD_INLINE float pd_expf(float y) {
    float c = pd_sel(y < -104.0f, -104.0f, y); /* NaN compares false: stays NaN */
    c = pd_sel(c > 88.3762589f, 88.3762589f, c);
    const float n = (c * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(c / ln2) */
    float r = c - n * 0.693145752f;
    r = r - n * 1.42860677e-06f;
    float p = 1.98412698e-4f;
    p = p * r + 1.38888889e-3f;
    p = p * r + 8.33333333e-3f;
    p = p * r + 4.16666667e-2f;
    p = p * r + 1.66666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t ni = (int32_t)n;
    /* 2^n as two factors: n = 128 would overflow the exponent field of one */
    const float s1 = pd_f32((uint32_t)((ni >> 1) + 127) << 23), s2 = pd_f32((uint32_t)(ni - (ni >> 1) + 127) << 23);
    float v = p * s1 * s2;
    v = pd_sel(y < -104.0f, 0.0f, v);
    return pd_sel(y > 88.7228394f, HUGE_VALF, v);
}

/* erf as pdlite/kernels/host/activation.py computes it: x + x*P(x^2) for |x| < 0.84375, else
 * sign(x) * (1 - exp(-a^2) * Q(a - 0.84375)) with a = min(|x|, 4) */
PD_INLINE float pd_erff(float x) {
    const float a = fabsf(x), x2 = x * x;
    float ps = 8.913267811294645e-05f;
    ps = ps * x2 + -0.0008260615868493915f;
    ps = ps * x2 + 0.00521061010658741f;
    ps = ps * x2 + -0.0268629752099514f;
    ps = ps * x2 + 0.11283756047487259f;
    ps = ps * x2 + -0.37612637877464294f;
    ps = ps * x2 + 0.12837916612625122f;
    const float small = x + x * ps;
    const float al = pd_sel(a > 4.0f, 4.0f, a), t = al - 0.84375f;
    float q = 9.979753485822584e-06f;
    q = q * t + -0.00013531692093238235f;
    q = q * t + 0.0008465261198580265f;
    q = q * t + -0.0033566260244697332f;
    q = q * t + 0.009912476874887943f;
    q = q * t + -0.024356339126825333f;
    q = q * t + 0.05338519811630249f;
    q = q * t + -0.10733887553215027f;
    q = q * t + 0.19771341979503632f;
    q = q * t + -0.32788291573524475f;
    q = q * t + 0.47436806559562683f;
    q = q * pd_expf(-(al * al));
    const float large = pd_f32(pd_u32(1.0f - q) | (pd_u32(x) & 0x80000000u));
    return pd_sel(a < 0.84375f, small, large);
}

enum { ACT_NONE = 0, ACT_RELU = 1, ACT_RELU6 = 2, ACT_LEAKY = 3, ACT_HSWISH = 4, ACT_HSIGMOID = 5, ACT_GELU = 6 };

typedef struct {
    int kind;
    float a0, a1, a2;
} act_t;

/* 16 floats in one vector (GCC / Clang vector extensions): the register tiles of packed_gemm.c and depthwise.c */
typedef float pd_v16 __attribute__((vector_size(64)));
typedef int32_t pd_v16i __attribute__((vector_size(64)));

/* r[i][j] -> r[j][i] for a 16x16 block in 16 vectors: four rounds of swapping the off-diagonal blocks of size
 * 8, 4, 2, 1 (each a pair of two-vector shuffles per pair of rows). With block size b, rows A and B = A + b:
 * A'[c] = c & b ? B[c - b] : A[c];  B'[c] = c & b ? B[c] : A[c + b]  (B's elements are 16 + index).
 * Correct on every target; fast with AVX-512 only (g_shuffles16) */
#define PD_T16_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define PD_T16_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define PD_T16_LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define PD_T16_HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define PD_T16_LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define PD_T16_HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define PD_T16_LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define PD_T16_HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
/* the even / odd elements of two vectors a, b (PD_SHUFFLE16(a, b, PD_EVEN16): a[0], a[2], .., b[14]) */
#define PD_EVEN16 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define PD_ODD16 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
/* Clang and GCC >= 12 take the indices as constants (__builtin_shufflevector), older GCC as a vector */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define PD_SHUFFLE16(a, b, idx) __builtin_shufflevector(a, b, idx)
#else
#define PD_SHUFFLE16(a, b, idx) __builtin_shuffle(a, b, (pd_v16i){idx})
#endif
#define PD_T16_SWAP(b, A, B)                                                                                       \
    do {                                                                                                           \
        const pd_v16 a_ = r[A], b_ = r[B];                                                                         \
        r[A] = PD_SHUFFLE16(a_, b_, PD_T16_LO##b);                                                                 \
        r[B] = PD_SHUFFLE16(a_, b_, PD_T16_HI##b);                                                                 \
    } while (0)
PD_INLINE void pd_transpose16(pd_v16 r[16]) {
    for (int i = 0; i < 8; i++) PD_T16_SWAP(8, i, i + 8);
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) PD_T16_SWAP(4, i + j, i + j + 4);
    for (int i = 0; i < 16; i += 4)
        for (int j = 0; j < 2; j++) PD_T16_SWAP(2, i + j, i + j + 2);
    for (int i = 0; i < 16; i += 2) PD_T16_SWAP(1, i, i + 1);
}
/* whether the forms built on pd_transpose16 are used (module.c: with AVX-512, where its shuffles are single
 * instructions; AVX2 lowers them to many), or the tests' hook */
extern PD_HIDDEN int g_shuffles16;
/* whether the picked ISA is AVX-512 (not changed by the tests' hooks): the forms written for it alone, in functions
 * with its target (pool.c's pool_3s2_row, depthwise.c's row-vector form), run only then */
extern PD_HIDDEN int g_avx512;
/* aarch64: whether the NEON register tiles (neon.h) run (module.c: unless PDLITE_NATIVE_ISA=baseline) */
extern PD_HIDDEN int g_neon;
/* x86-64: whether the packed GEMM forms run avx2.h's sub-tiles (module.c: where AVX2 is the picked ISA) */
extern PD_HIDDEN int g_avx2_tiles;

/* whether bias_act_v16 computes the activation (the others: bias_act_copy over the written output) */
PD_INLINE int act_in_regs(const act_t *act) {
    return act->kind == ACT_NONE || act->kind == ACT_RELU || act->kind == ACT_RELU6 || act->kind == ACT_LEAKY ||
           act->kind == ACT_HSWISH;
}

/* x = act(x), x a vector of type V (VI: its integer lanes), for the activations of act_in_regs, with bias_act_copy's
 * operations in its order (so the same bits): relu x < 0 ? 0 : x, relu6 then x > t ? t : x (NaN kept), leaky x < 0 ?
 * x * alpha : x, hard_swish min(max(x + offset, 0), threshold) * x / scale. bias_act_v16 below; avx2.h's act_v8. */
#define PD_ACT_IN_REGS(V, VI, x, act)                                                                                  \
    do {                                                                                                               \
        const V zero_ = {0};                                                                                           \
        switch ((act)->kind) {                                                                                         \
        case ACT_RELU:                                                                                                 \
        case ACT_RELU6:                                                                                                \
            x = (V)((VI)x & ~(x < zero_));                                                                             \
            if ((act)->kind == ACT_RELU6) {                                                                            \
                const V top_ = zero_ + (act)->a0;                                                                      \
                const VI over_ = x > top_;                                                                             \
                x = (V)(((VI)x & ~over_) | ((VI)top_ & over_));                                                        \
            }                                                                                                          \
            break;                                                                                                     \
        case ACT_LEAKY: {                                                                                              \
            const VI neg_ = x < zero_;                                                                                 \
            const V scaled_ = x * (act)->a0;                                                                           \
            x = (V)(((VI)scaled_ & neg_) | ((VI)x & ~neg_));                                                           \
            break;                                                                                                     \
        }                                                                                                              \
        case ACT_HSWISH: {                                                                                             \
            V t_ = x + (act)->a0;                                                                                      \
            t_ = (V)((VI)t_ & ~(t_ < zero_));                                                                          \
            const V thr_ = zero_ + (act)->a1;                                                                          \
            const VI over_ = t_ > thr_;                                                                                \
            t_ = (V)(((VI)t_ & ~over_) | ((VI)thr_ & over_));                                                          \
            x = t_ * x / (act)->a2;                                                                                    \
            break;                                                                                                     \
        }                                                                                                              \
        default:                                                                                                       \
            break;                                                                                                     \
        }                                                                                                              \
    } while (0)

/* *v = act(*v + b) (b added when add_bias) for the activations of act_in_regs (PD_ACT_IN_REGS) */
PD_INLINE void bias_act_v16(pd_v16 *v, float b, int add_bias, const act_t *act) {
    pd_v16 x = *v;
    if (add_bias) x += b;
    PD_ACT_IN_REGS(pd_v16, pd_v16i, x, act);
    *v = x;
}

/* o[i] = act(src[i] + b) (b added when add_bias); src may be o (in place) */
PD_INLINE void bias_act_copy(float *o, const float *src, isz n, float b, int add_bias, const act_t *act) {
    if (!add_bias) b = 0.0f; /* x + 0.0f == x for every x but -0.0f; callers without bias pass add_bias = 0 */
    switch (act->kind) {
    case ACT_RELU:
        if (add_bias) {
            PD_SIMD for (isz i = 0; i < n; i++) {
                float v = src[i] + b;
                o[i] = v < 0.0f ? 0.0f : v;
            }
        } else {
            PD_SIMD for (isz i = 0; i < n; i++) o[i] = src[i] < 0.0f ? 0.0f : src[i];
        }
        break;
    case ACT_RELU6: {
        const float t = act->a0;
        PD_SIMD for (isz i = 0; i < n; i++) {
            float v = add_bias ? src[i] + b : src[i];
            v = v < 0.0f ? 0.0f : v;
            o[i] = v > t ? t : v;
        }
        break;
    }
    case ACT_LEAKY: {
        const float al = act->a0;
        PD_SIMD for (isz i = 0; i < n; i++) {
            float v = add_bias ? src[i] + b : src[i];
            o[i] = v < 0.0f ? v * al : v;
        }
        break;
    }
    case ACT_HSWISH: {
        const float off = act->a0, thr = act->a1, sc = act->a2;
        PD_SIMD for (isz i = 0; i < n; i++) {
            float v = add_bias ? src[i] + b : src[i], t = v + off;
            t = t < 0.0f ? 0.0f : t;
            t = t > thr ? thr : t;
            o[i] = t * v / sc;
        }
        break;
    }
    case ACT_HSIGMOID: { /* min(max(x * slope + offset, 0), 1) (the product and sum may fuse into one FMA) */
        const float slope = act->a0, off = act->a1;
        PD_SIMD for (isz i = 0; i < n; i++) {
            float v = add_bias ? src[i] + b : src[i], t = v * slope + off;
            t = t < 0.0f ? 0.0f : t;
            o[i] = t > 1.0f ? 1.0f : t;
        }
        break;
    }
    case ACT_GELU: /* 0.5 * x * (1 + erf(x * sqrt(0.5))), exact (erf) form, activation.py's order */
        PD_SIMD for (isz i = 0; i < n; i++) {
            const float v = add_bias ? src[i] + b : src[i];
            float t = pd_erff(v * 0.707106769f);
            t += 1.0f;
            t *= v;
            o[i] = t * 0.5f;
        }
        break;
    default:
        if (add_bias) {
            PD_SIMD for (isz i = 0; i < n; i++) o[i] = src[i] + b;
        } else if (o != src) {
            memcpy(o, src, (size_t)n * sizeof(float));
        }
        break;
    }
}


/* ------------------------------------------------------------------------------------------------ */
/* shared helpers                                                                                   */
/* ------------------------------------------------------------------------------------------------ */

/* [lo, hi): the outputs o in [0, no) whose input index o*s - p + off lies in [0, size) */
static inline void valid_range(isz no, isz s, isz p, isz off, isz size, isz *lo, isz *hi) {
    isz base = off - p; /* input index of output 0 */
    isz l = base >= 0 ? 0 : (-base + s - 1) / s;
    isz h = size - 1 - base < 0 ? 0 : (size - 1 - base) / s + 1;
    if (h > no) h = no;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* dst (hq, wq) with dst[y][x] = src[r0 + y*sh][c0 + x*sw] inside the (h, w) image, 0 outside: a padded copy
 * (sh = sw = 1) or one polyphase component of the padded image (strided windows become unit-stride ones); the
 * depthwise convs' planes, direct_conv's bands of rows. */
PD_INLINE void gather_plane(float *restrict dst, const float *restrict src, isz h, isz w, isz hq, isz wq, isz r0,
                            isz c0, isz sh, isz sw) {
    isz xlo, xhi;
    valid_range(wq, sw, -c0, 0, w, &xlo, &xhi);
    const int short_rows = wq < 64; /* inline loops: a libc call per short row costs more than the copy */
    for (isz y = 0; y < hq; y++) {
        float *d = dst + y * wq;
        isz iy = r0 + y * sh;
        if (iy < 0 || iy >= h) {
            if (short_rows)
                for (isz x = 0; x < wq; x++) d[x] = 0.0f;
            else
                memset(d, 0, (size_t)wq * sizeof(float));
            continue;
        }
        const float *s = src + iy * w + c0;
        for (isz x = 0; x < xlo; x++) d[x] = 0.0f;
        if (sw == 1) {
            if (short_rows)
                for (isz x = xlo; x < xhi; x++) d[x] = s[x];
            else
                memcpy(d + xlo, s + xlo, (size_t)(xhi - xlo) * sizeof(float));
        } else if (sw == 2) {
            for (isz x = xlo; x < xhi; x++) d[x] = s[2 * x];
        } else {
            for (isz x = xlo; x < xhi; x++) d[x] = s[x * sw];
        }
        for (isz x = xhi; x < wq; x++) d[x] = 0.0f;
    }
}

/* conv geometry of one image: C channels of H x W in, OH x OW out, KH x KW window, strides, dilations, top / left
 * padding */
typedef struct {
    isz C, H, W, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
} conv_geo;

/* Rows [r0, r1) (row = (c, i, j) over C*KH*KW) and columns [q0, q1) (column = oy*OW + ox) of the
 * columns matrix of one image `x` (C, H, W), into dst with row stride ldd; padding reads as 0. */
PD_INLINE void im2col_block(const conv_geo *g, const float *x, isz r0, isz r1, isz q0, isz q1, float *dst, isz ldd) {
    const isz kk = g->KH * g->KW;
    for (isz r = r0; r < r1; r++) {
        const isz c = r / kk, i = (r % kk) / g->KW, j = r % g->KW;
        const float *src = x + c * g->H * g->W;
        float *d = dst + (r - r0) * ldd - q0; /* d[q] for q in [q0, q1) */
        isz ylo, yhi, xlo, xhi;
        valid_range(g->OH, g->SH, g->PT, i * g->DH, g->H, &ylo, &yhi);
        valid_range(g->OW, g->SW, g->PL, j * g->DW, g->W, &xlo, &xhi);
        for (isz oy = q0 / g->OW; oy * g->OW < q1; oy++) {
            const isz qa = oy * g->OW > q0 ? oy * g->OW : q0;           /* this row's columns: [qa, qb) */
            const isz qb = (oy + 1) * g->OW < q1 ? (oy + 1) * g->OW : q1;
            const isz xa = qa - oy * g->OW, xb = qb - oy * g->OW;       /* as ox */
            float *drow = d + oy * g->OW;                               /* drow[ox] */
            if (oy < ylo || oy >= yhi) {
                memset(drow + xa, 0, (size_t)(xb - xa) * sizeof(float));
                continue;
            }
            const float *s = src + (oy * g->SH - g->PT + i * g->DH) * g->W + (j * g->DW - g->PL);
            const isz lo = xlo > xa ? xlo : xa, hi = xhi < xb ? xhi : xb;
            if (lo >= hi) {
                memset(drow + xa, 0, (size_t)(xb - xa) * sizeof(float));
                continue;
            }
            for (isz ox = xa; ox < lo; ox++) drow[ox] = 0.0f;
            if (g->SW == 1)
                memcpy(drow + lo, s + lo, (size_t)(hi - lo) * sizeof(float));
            else if (g->SW == 2)
                for (isz ox = lo; ox < hi; ox++) drow[ox] = s[2 * ox];
            else
                for (isz ox = lo; ox < hi; ox++) drow[ox] = s[ox * g->SW];
            for (isz ox = hi; ox < xb; ox++) drow[ox] = 0.0f;
        }
    }
}

/* o[i] = act((src[i] + b) + res[i]) (b added when add_bias): a conv's epilogue with a residual input (fused_conv2d's
 * ResidualData: the sums a separate add of the biased output and the residual gives); res NULL: bias_act_copy */
PD_INLINE void bias_res_act_copy(float *o, const float *src, isz n, float b, int add_bias, const float *res,
                                 const act_t *act) {
    if (!res) {
        bias_act_copy(o, src, n, b, add_bias, act);
        return;
    }
    if (add_bias) {
        PD_SIMD for (isz i = 0; i < n; i++) o[i] = (src[i] + b) + res[i];
    } else {
        PD_SIMD for (isz i = 0; i < n; i++) o[i] = src[i] + res[i];
    }
    if (act->kind != ACT_NONE) bias_act_copy(o, o, n, 0.0f, 0, act);
}

/* *v = (*v + b) + res[0 .. n) (b added when add_bias), n <= 16 (the lanes past n get + 0); then the activation
 * when act_in_regs(act) */
PD_INLINE void bias_res_act_v16(pd_v16 *v, float b, int add_bias, const float *res, isz n, const act_t *act) {
    pd_v16 x = *v, rv = {0};
    if (add_bias) x += b;
    if (n >= 16) {
        memcpy(&rv, res, sizeof(rv));
    } else {
        float t[16] = {0};
        memcpy(t, res, (size_t)n * sizeof(float));
        memcpy(&rv, t, sizeof(rv));
    }
    x += rv;
    if (act_in_regs(act)) bias_act_v16(&x, 0.0f, 0, act);
    *v = x;
}

/* max that propagates NaN (as np.maximum): v if v > m or v is NaN */
#define PD_MAXNAN(m, v) ((((v) > (m)) | ((v) != (v))) ? (v) : (m)) /* (| not ||: no branch, vectorises) */

/* C = A @ B, row-major, one single-threaded call of the cblas_sgemm NumPy's BLAS has (gemm_conv.c) */
extern PD_HIDDEN void *g_sgemm;
PD_HIDDEN void sgemm_rm(isz m, isz n, isz k, const float *a, isz lda, const float *b, isz ldb, float *c, isz ldc);

/* ------------------------------------------------------------------------------------------------ */
/* per-ISA versions of the tasks                                                                    */
/* ------------------------------------------------------------------------------------------------ */

/* PD_VERSIONS(t), after t_impl: t_base / t_avx2 / t_avx512 and the pointer t the kernels call, set by t_pick
 * (module.c's pick_isa, once at import) */
enum { PD_ISA_BASELINE = 0, PD_ISA_AVX2 = 1, PD_ISA_AVX512 = 2 };
#ifdef PD_X86_DISPATCH
#define PD_VERSIONS(name)                                                                                          \
    static void name##_base(void *c, isz b, isz e) { name##_impl(c, b, e); }                                      \
    PD_TARGET_AVX2 static void name##_avx2(void *c, isz b, isz e) { name##_impl(c, b, e); }                        \
    PD_TARGET_AVX512 static void name##_avx512(void *c, isz b, isz e) { name##_impl(c, b, e); }                    \
    static pd_task name = name##_base;                                                                             \
    PD_HIDDEN void name##_pick(int isa) {                                                                          \
        name = isa == PD_ISA_AVX512 ? name##_avx512 : (isa == PD_ISA_AVX2 ? name##_avx2 : name##_base);            \
    }
#else
#define PD_VERSIONS(name)                                                                                          \
    static void name##_base(void *c, isz b, isz e) { name##_impl(c, b, e); }                                      \
    static pd_task name = name##_base;                                                                             \
    PD_HIDDEN void name##_pick(int isa) { (void)isa; }
#endif

/* ------------------------------------------------------------------------------------------------ */
/* Python bindings                                                                                  */
/* ------------------------------------------------------------------------------------------------ */

/* The buffers an entry point reads and writes (module.c): each taken with bufs_take (obj's buffer, which must
 * hold exactly nfloats float32 values; its data, or NULL on failure), all released with bufs_release. A failed
 * take releases those taken before it and makes later takes return NULL, so an entry point takes them all and
 * checks `failed` once. */
#define PD_MAX_BUFS 6
typedef struct {
    Py_buffer view[PD_MAX_BUFS];
    int n, failed;
} pd_bufs;
PD_HIDDEN float *bufs_take(pd_bufs *s, PyObject *obj, int writable, isz nfloats, const char *what);
PD_HIDDEN void bufs_release(pd_bufs *s);
/* act from an activation code and its (a0, a1, a2) tuple (module.c) */
PD_HIDDEN int parse_act(int kind, PyObject *params, act_t *act);

/* each kernel file's ISA picker and Python entry points (in module.c's method table) */
PD_HIDDEN void dw_task_pick(int isa);
PD_HIDDEN void dw3_task_pick(int isa);
PD_HIDDEN void dws2_task_pick(int isa);
PD_HIDDEN void dwb_task_pick(int isa);
PD_HIDDEN void dws_task_pick(int isa);
PD_HIDDEN void ba_task_pick(int isa);
PD_HIDDEN void aa_task_pick(int isa);
PD_HIDDEN void mr_task_pick(int isa);
PD_HIDDEN void dc_task_pick(int isa);
PD_HIDDEN void i2c_task_pick(int isa);
PD_HIDDEN void pool_task_pick(int isa);
PD_HIDDEN void se_task_pick(int isa);
/* out[p] = mean of x[p * hw .. (p + 1) * hw) for p < planes, the pool2d op's global average (the same bits), on the
 * calling thread (pool.c) */
PD_HIDDEN void pool_avg_planes(const float *x, float *out, isz planes, isz hw);
/* out[r, :] = x[r, :] * s[r] for r < rows, rows of `inner` floats, on the pool (activation.c; mul_rows) */
PD_HIDDEN void mul_rows_run(const float *x, const float *s, float *out, isz rows, isz inner);
extern PD_HIDDEN int g_dwr_on; /* depthwise.c's row-vector form (tests' hook: _set_depthwise_rows) */
PD_HIDDEN void gemm_task_pick(int isa);
PD_HIDDEN void pk_multi_task_pick(int isa);
PD_HIDDEN void fc_pack_task_pick(int isa);
PD_HIDDEN void fc_task_pick(int isa);
PD_HIDDEN void gv_task_pick(int isa);
PD_HIDDEN void wino_in_task_pick(int isa);
PD_HIDDEN void wino_gemm_task_pick(int isa);
PD_HIDDEN void wino_out_task_pick(int isa);
PD_HIDDEN void wino_band_task_pick(int isa);
PD_HIDDEN void pk_pack_task_pick(int isa);
PD_HIDDEN void pk_gemm_task_pick(int isa);
PD_HIDDEN void pw_task_pick(int isa);
PD_HIDDEN void ln_task_pick(int isa);
PD_HIDDEN void sm_task_pick(int isa);
PD_HIDDEN void at_task_pick(int isa);
/* packed_gemm.c's register-tiled GEMM for winograd.c: the column tiles of L columns, and npos products out + p*M*L
 * (M, L) = W[p] @ B[p], W[p] packed as pack_weights packs an (M, K, 1, 1) filter, B[p] as [tile][K][7] (zeros
 * past L); over the pool (parallel) or on the calling thread */
PD_HIDDEN isz packed_tiles(isz L);
PD_HIDDEN void packed_products(const float *w, const float *b, float *out, isz npos, isz M, isz K, isz L,
                               int parallel);
PD_HIDDEN PyObject *py_depthwise_conv2d(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_bias_act(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_add_act(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_mul_rows(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_squeeze_excitation(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_direct_conv(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_direct_conv_pack(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_im2col(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_pool2d(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_conv_gemm(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_winograd_conv3x3(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_winograd_pass_tiles(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_packed_conv(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_packed_fc(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_packed_gemv(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_layer_norm(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_softmax(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_attention(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_set_sgemm(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_has_sgemm(PyObject *self, PyObject *args);

#endif /* PD_NATIVE_COMMON_H */
