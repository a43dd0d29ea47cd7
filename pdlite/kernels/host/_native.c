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
 *                     images of a batch side by side in the same GEMMs)
 *   bias_act          in place: out[n, c, :] = act(out[n, c, :] + bias[c])
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
 */
#if defined(_WIN32)
#error "pdlite's native kernels need POSIX threads; setup.py does not build them on Windows (NumPy kernels are used)"
#endif
#ifndef PD_SOURCE_SHA256
#define PD_SOURCE_SHA256 "unknown" /* setup.py defines it: the SHA-256 of this file, checked by native.py */
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

typedef Py_ssize_t isz;

/* ------------------------------------------------------------------------------------------------ */
/* thread pool                                                                                      */
/* ------------------------------------------------------------------------------------------------ */

typedef void (*pd_task)(void *ctx, isz begin, isz end);

#define PD_MAX_THREADS 64

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_cv_done = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t g_run_mu = PTHREAD_MUTEX_INITIALIZER; /* one parallel job at a time */
static int g_threads = 1;   /* threads per job, the caller included */
static int g_workers = 0;   /* worker threads started */
static int g_want = 0;      /* workers invited to the current job */
static unsigned long g_gen = 0;
static int g_open = 0;
static int g_active = 0;
static pd_task g_fn = NULL;
static void *g_ctx = NULL;
static isz g_n = 0, g_grain = 1;
static isz g_next = 0;

static void run_chunks(pd_task fn, void *ctx, isz n, isz grain) {
    for (;;) {
        isz b = __atomic_fetch_add(&g_next, grain, __ATOMIC_RELAXED);
        if (b >= n) break;
        isz e = b + grain < n ? b + grain : n;
        fn(ctx, b, e);
    }
}

/* Spinning: after a job, a worker polls for the next one for g_spin_ns before sleeping on the condition
 * variable, and the caller polls for the workers to finish before sleeping. Waking a sleeping thread takes
 * a futex call and, on a virtual machine whose other vCPU has gone idle, often far longer than the
 * kernels between two consecutive ops (measured: 2 threads ran 1.3x faster than 1 with sleeping
 * workers). PDLITE_NATIVE_SPIN_US sets the time (0: never spin). */
static long g_spin_ns = 200000;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* poll until *p != v (returns 1) or the spin time is over (0) */
static int spin_until_changes(unsigned long *p, unsigned long v) {
    if (g_spin_ns <= 0) return 0;
    long deadline = now_ns() + g_spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v) return 1;
            cpu_relax();
        }
        if (now_ns() > deadline) return 0;
    }
}

static void spin_until_zero(int *p) {
    if (g_spin_ns <= 0) return;
    long deadline = now_ns() + g_spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == 0) return;
            cpu_relax();
        }
        if (now_ns() > deadline) return;
    }
}

static void *worker_main(void *arg) {
    int idx = (int)(intptr_t)arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        for (;;) { /* wait for an open job that invites this worker and that it has not run */
            if (g_open && g_gen != seen && idx < g_want) break;
            if (!(g_open && idx < g_want)) seen = g_gen; /* nothing to join up to now */
            pthread_mutex_unlock(&g_mu);
            int changed = spin_until_changes(&g_gen, seen);
            pthread_mutex_lock(&g_mu);
            if (g_open && g_gen != seen && idx < g_want) break;
            if (!changed) pthread_cond_wait(&g_cv_work, &g_mu);
        }
        seen = g_gen;
        g_active++;
        pd_task fn = g_fn;
        void *ctx = g_ctx;
        isz n = g_n, grain = g_grain;
        pthread_mutex_unlock(&g_mu);
        run_chunks(fn, ctx, n, grain);
        pthread_mutex_lock(&g_mu);
        if (--g_active == 0) pthread_cond_signal(&g_cv_done);
    }
    return NULL;
}

static void pool_after_fork_child(void) {
    /* worker threads do not survive fork(): start over in the child */
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER, run = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cw = PTHREAD_COND_INITIALIZER, cd = PTHREAD_COND_INITIALIZER;
    g_mu = mu;
    g_run_mu = run;
    g_cv_work = cw;
    g_cv_done = cd;
    g_workers = 0;
    g_want = 0;
    g_open = 0;
    g_active = 0;
}

/* Run fn over [0, n) in chunks of `grain`, on up to g_threads threads (the caller is one of them). */
static void parallel_for(pd_task fn, void *ctx, isz n, isz grain) {
    if (grain < 1) grain = 1;
    int threads = g_threads;
    if (threads <= 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&g_run_mu);
    isz chunks = (n + grain - 1) / grain;
    int want = threads - 1;
    if ((isz)want > chunks - 1) want = (int)(chunks - 1);
    pthread_mutex_lock(&g_mu);
    while (g_workers < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)g_workers);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        g_workers++;
    }
    if (want > g_workers) want = g_workers;
    g_fn = fn;
    g_ctx = ctx;
    g_n = n;
    g_grain = grain;
    __atomic_store_n(&g_next, 0, __ATOMIC_RELAXED);
    g_want = want;
    g_open = 1;
    __atomic_store_n(&g_gen, g_gen + 1, __ATOMIC_RELEASE); /* spinning workers see the job from here */
    if (want > 0) pthread_cond_broadcast(&g_cv_work);
    pthread_mutex_unlock(&g_mu);
    run_chunks(fn, ctx, n, grain);
    spin_until_zero(&g_active);
    pthread_mutex_lock(&g_mu);
    while (g_active > 0) pthread_cond_wait(&g_cv_done, &g_mu);
    g_open = 0;
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_run_mu);
}

/* chunk size giving about `per_thread` chunks per thread */
static isz grain_for(isz n, int per_thread) {
    isz t = (isz)g_threads * per_thread;
    isz g = n / (t > 0 ? t : 1);
    return g > 0 ? g : 1;
}

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

PD_INLINE float pd_expf(float y) {
    float c = y < -104.0f ? -104.0f : y; /* NaN compares false: stays NaN */
    c = c > 88.3762589f ? 88.3762589f : c;
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
    v = y < -104.0f ? 0.0f : v;
    return y > 88.7228394f ? HUGE_VALF : v;
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
    const float al = a > 4.0f ? 4.0f : a, t = al - 0.84375f;
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
    return a < 0.84375f ? small : large;
}

enum { ACT_NONE = 0, ACT_RELU = 1, ACT_RELU6 = 2, ACT_LEAKY = 3, ACT_HSWISH = 4, ACT_HSIGMOID = 5, ACT_GELU = 6 };

typedef struct {
    int kind;
    float a0, a1, a2;
} act_t;

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
/* depthwise conv2d                                                                                 */
/* ------------------------------------------------------------------------------------------------ */

/* [lo, hi): the outputs o in [0, no) whose input index o*s - p + off lies in [0, size) */
static void valid_range(isz no, isz s, isz p, isz off, isz size, isz *lo, isz *hi) {
    isz base = off - p; /* input index of output 0 */
    isz l = base >= 0 ? 0 : (-base + s - 1) / s;
    isz h = size - 1 - base < 0 ? 0 : (size - 1 - base) / s + 1;
    if (h > no) h = no;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

typedef struct {
    const float *x, *w, *bias;
    float *out;
    isz N, C, H, W, OC, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
    act_t act;
} dw_args;

/* dst (hq, wq) with dst[y][x] = src[r0 + y*sh][c0 + x*sw] inside the (h, w) image, 0 outside: a padded copy
 * (sh = sw = 1) or one polyphase component of the padded image (strided windows become unit-stride ones). */
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

/* stride 2 x 2: the four phase planes (row phase pr, column phase pc) of the padded image in one pass over
 * the input rows, each row split into its even and odd columns: plane (pr, pc)[y][x] = image[2y + pr - pt][2x + pc - pl] */
PD_INLINE void gather_phases_s2(float *restrict buf, const float *restrict src, isz h, isz w, isz hq, isz wq,
                                isz pt, isz pl, isz plane) {
    /* columns x where both 2x - pl and 2x + 1 - pl are inside the row: [xa, xb) */
    isz xa = (pl + 1) / 2, xb = (w - 1 + pl) / 2; /* 2x - pl >= 0 and 2x + 1 - pl <= w - 1 */
    if (xb > wq) xb = wq;
    if (xa > xb) xa = xb;
    for (isz pr = 0; pr < 2; pr++)
        for (isz y = 0; y < hq; y++) {
            float *e = buf + (pr * 2) * plane + y * wq, *o = buf + (pr * 2 + 1) * plane + y * wq;
            const isz iy = 2 * y + pr - pt;
            if (iy < 0 || iy >= h) {
                for (isz x = 0; x < wq; x++) e[x] = o[x] = 0.0f;
                continue;
            }
            const float *s = src + iy * w;
            for (isz x = 0; x < xa; x++) {
                const isz ie = 2 * x - pl, io = ie + 1;
                e[x] = ie >= 0 && ie < w ? s[ie] : 0.0f;
                o[x] = io >= 0 && io < w ? s[io] : 0.0f;
            }
            const float *sp = s - pl;
            for (isz x = xa; x < xb; x++) {
                e[x] = sp[2 * x];
                o[x] = sp[2 * x + 1];
            }
            for (isz x = xb; x < wq; x++) {
                const isz ie = 2 * x - pl, io = ie + 1;
                e[x] = ie >= 0 && ie < w ? s[ie] : 0.0f;
                o[x] = io >= 0 && io < w ? s[io] : 0.0f;
            }
        }
}

#define DW_MAX_TAPS 32 /* taps per pass over an L1 block of the accumulator */
#define DW_BLOCK 512   /* outputs per block of the tap-by-tap path (stays in L1) */

/* acc[q] = sum_t k[t] * p[t][q] for q in [0, len): 9 taps in registers */
PD_INLINE void dw_flat9(float *restrict acc, const float *const *p, const float *restrict k, isz len) {
    const float *restrict p0 = p[0], *restrict p1 = p[1], *restrict p2 = p[2], *restrict p3 = p[3],
                          *restrict p4 = p[4], *restrict p5 = p[5], *restrict p6 = p[6], *restrict p7 = p[7],
                          *restrict p8 = p[8];
    const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
    PD_SIMD for (isz q = 0; q < len; q++)
        acc[q] = k0 * p0[q] + k1 * p1[q] + k2 * p2[q] + k3 * p3[q] + k4 * p4[q] + k5 * p5[q] + k6 * p6[q] +
                 k7 * p7[q] + k8 * p8[q];
}

/* a[q] (=|+=) sum of up to 4 taps k[u] * p[u][q] (one pass over a) */
PD_INLINE void dw_group(float *restrict a, const float *const *p, const float *restrict k, isz off, isz nt, isz n,
                        int init) {
    const float *restrict s0 = p[0] + off, *restrict s1 = nt > 1 ? p[1] + off : s0,
                          *restrict s2 = nt > 2 ? p[2] + off : s0, *restrict s3 = nt > 3 ? p[3] + off : s0;
    const float k0 = k[0], k1 = nt > 1 ? k[1] : 0.0f, k2 = nt > 2 ? k[2] : 0.0f, k3 = nt > 3 ? k[3] : 0.0f;
    if (init) {
        switch (nt) {
        case 1: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q]; break;
        case 2: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q] + k1 * s1[q]; break;
        case 3: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q] + k1 * s1[q] + k2 * s2[q]; break;
        default: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q] + k1 * s1[q] + k2 * s2[q] + k3 * s3[q];
        }
    } else {
        switch (nt) {
        case 1: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q]; break;
        case 2: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q] + k1 * s1[q]; break;
        case 3: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q] + k1 * s1[q] + k2 * s2[q]; break;
        default: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q] + k1 * s1[q] + k2 * s2[q] + k3 * s3[q];
        }
    }
}

/* acc[q] (=|+=) sum_t k[t] * p[t][q]: groups of 4 taps over L1-sized blocks of acc */
PD_INLINE void dw_flat_taps(float *restrict acc, const float *const *p, const float *restrict k, isz taps, isz len,
                            int init) {
    for (isz q0 = 0; q0 < len; q0 += DW_BLOCK) {
        isz n = len - q0 < DW_BLOCK ? len - q0 : DW_BLOCK;
        for (isz t = 0; t < taps; t += 4)
            dw_group(acc + q0, p + t, k + t, q0, taps - t < 4 ? taps - t : 4, n, init && t == 0);
    }
}

PD_INLINE void dw_task_impl(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz SH = a->SH, SW = a->SW, OH = a->OH, OW = a->OW;
    const isz taps = a->KH * a->KW;
    /* polyphase layout: tap (i, j) reads phase plane ((i*DH) % SH, (j*DW) % SW) at flat offset
     * ((i*DH) / SH) * WQ + (j*DW) / SW; output (oy, ox) sits at flat index oy*WQ + ox */
    isz qr_max = ((a->KH - 1) * a->DH) / SH, qc_max = ((a->KW - 1) * a->DW) / SW;
    const isz WQ = OW + qc_max, HQ = OH + qr_max, plane = HQ * WQ, len = (OH - 1) * WQ + OW;
    /* the flat loops run over a multiple of 16 outputs (no scalar remainder); the extra ones read the
     * slack after the planes and are never copied out */
    const isz len_r = (len + 15) / 16 * 16;
    const isz nph = SH * SW;
    float *buf = (float *)malloc((size_t)(plane * nph + 16 + len_r) * sizeof(float));
    if (!buf) return; /* out of memory: the output is left as allocated (cannot happen in practice) */
    float *acc = buf + plane * nph + 16;
    memset(buf + plane * nph, 0, 16 * sizeof(float));
    const isz mult = a->OC / a->C;
    /* per tap: its flat slice in buf; per phase plane: whether some tap reads it */
    const float **ptr = (const float **)malloc((size_t)taps * sizeof(float *));
    unsigned char *used = (unsigned char *)calloc((size_t)nph, 1);
    if (!ptr || !used) {
        free(buf), free(ptr), free(used);
        return;
    }
    for (isz i = 0, t = 0; i < a->KH; i++)
        for (isz j = 0; j < a->KW; j++, t++) {
            isz r = i * a->DH, c = j * a->DW, ph = (r % SH) * SW + (c % SW);
            ptr[t] = buf + ph * plane + (r / SH) * WQ + c / SW;
            used[ph] = 1;
        }
    int all_used = 1;
    for (isz ph = 0; ph < nph; ph++) all_used &= used[ph];
    isz last_src = -1;
    isz n = begin / a->OC, oc = begin % a->OC;
    for (isz p = begin; p < end; p++, oc++) {
        if (oc == a->OC) oc = 0, n++;
        const isz src_plane = n * a->C + oc / mult;
        const float *k = a->w + oc * taps;
        if (src_plane != last_src) {
            const float *src = a->x + src_plane * a->H * a->W;
            if (SH == 2 && SW == 2 && all_used)
                gather_phases_s2(buf, src, a->H, a->W, HQ, WQ, a->PT, a->PL, plane);
            else
                for (isz ph = 0; ph < nph; ph++)
                    if (used[ph])
                        gather_plane(buf + ph * plane, src, a->H, a->W, HQ, WQ, ph / SW - a->PT, ph % SW - a->PL, SH,
                                     SW);
            last_src = src_plane;
        }
        float *o = a->out + p * OH * OW;
        if (taps == 9) {
            dw_flat9(acc, ptr, k, len_r);
        } else {
            for (isz t0 = 0; t0 < taps; t0 += DW_MAX_TAPS) /* tap blocks keep acc's blocks in L1 */
                dw_flat_taps(acc, ptr + t0, k + t0, taps - t0 < DW_MAX_TAPS ? taps - t0 : DW_MAX_TAPS, len_r,
                             t0 == 0);
        }
        const float b = a->bias ? a->bias[oc] : 0.0f;
        if (OW >= 32) { /* bias + activation while copying the rows out */
            for (isz oy = 0; oy < OH; oy++) bias_act_copy(o + oy * OW, acc + oy * WQ, OW, b, a->bias != NULL, &a->act);
        } else { /* short rows: one pass over the whole accumulator, then plain row copies */
            bias_act_copy(acc, acc, len_r, b, a->bias != NULL, &a->act);
            for (isz oy = 0; oy < OH; oy++) {
                float *orow = o + oy * OW;
                const float *arow = acc + oy * WQ;
                for (isz ox = 0; ox < OW; ox++) orow[ox] = arow[ox];
            }
        }
    }
    free(buf), free(ptr), free(used);
}

/* ------------------------------------------------------------------------------------------------ */
/* bias + activation in place                                                                       */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    float *out;
    const float *bias;
    isz C, inner;
    act_t act;
} ba_args;

PD_INLINE void ba_task_impl(void *vctx, isz begin, isz end) {
    const ba_args *a = (const ba_args *)vctx;
    for (isz r = begin; r < end; r++) {
        float b = a->bias ? a->bias[r % a->C] : 0.0f;
        bias_act_copy(a->out + r * a->inner, a->out + r * a->inner, a->inner, b, a->bias != NULL, &a->act);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* row kernels: layer_norm and softmax over the rows of a (rows, cols) matrix                       */
/* ------------------------------------------------------------------------------------------------ */

#define PD_MAXNAN(m, v) (((v) > (m) || (v) != (v)) ? (v) : (m))
#define PD_LANES 16 /* partial sums per row: vectorisable without reassociating one running sum */

PD_INLINE float row_sum(const float *x, isz n) {
    float acc[PD_LANES] = {0};
    isz i = 0;
    for (; i + PD_LANES <= n; i += PD_LANES)
        for (int j = 0; j < PD_LANES; j++) acc[j] += x[i + j];
    float s = 0.0f;
    for (int j = 0; j < PD_LANES; j++) s += acc[j];
    for (; i < n; i++) s += x[i];
    return s;
}

typedef struct {
    const float *x, *scale, *bias;
    float *y, *mean, *var;
    isz cols;
    float eps;
} ln_args;

/* y = (x - mean) / sqrt(var + eps) * scale + bias per row (pdlite/kernels/host/norm.py's order) */
PD_INLINE void ln_task_impl(void *vctx, isz begin, isz end) {
    const ln_args *a = (const ln_args *)vctx;
    const isz n = a->cols;
    for (isz r = begin; r < end; r++) {
        const float *x = a->x + r * n;
        float *y = a->y + r * n;
        const float mean = row_sum(x, n) / (float)n;
        float acc[PD_LANES] = {0}, ss = 0.0f;
        isz i = 0;
        for (; i + PD_LANES <= n; i += PD_LANES)
            for (int j = 0; j < PD_LANES; j++) {
                const float d = x[i + j] - mean;
                acc[j] += d * d;
            }
        for (int j = 0; j < PD_LANES; j++) ss += acc[j];
        for (; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
        const float var = ss / (float)n, inv = 1.0f / sqrtf(var + a->eps);
        const float *sc = a->scale, *b = a->bias;
        if (sc && b) {
            PD_SIMD for (isz k = 0; k < n; k++) y[k] = (x[k] - mean) * inv * sc[k] + b[k];
        } else if (sc) {
            PD_SIMD for (isz k = 0; k < n; k++) y[k] = (x[k] - mean) * inv * sc[k];
        } else if (b) {
            PD_SIMD for (isz k = 0; k < n; k++) y[k] = (x[k] - mean) * inv + b[k];
        } else {
            PD_SIMD for (isz k = 0; k < n; k++) y[k] = (x[k] - mean) * inv;
        }
        if (a->mean) a->mean[r] = mean;
        if (a->var) a->var[r] = var;
    }
}

typedef struct {
    const float *x;
    float *y;
    isz cols;
} sm_args;

/* y = exp(x - max) * (1 / sum) per row (pdlite/kernels/host/math.py's order); NaN propagates through max */
PD_INLINE void sm_task_impl(void *vctx, isz begin, isz end) {
    const sm_args *a = (const sm_args *)vctx;
    const isz n = a->cols;
    for (isz r = begin; r < end; r++) {
        const float *x = a->x + r * n;
        float *y = a->y + r * n;
        float mx[PD_LANES];
        for (int j = 0; j < PD_LANES; j++) mx[j] = -INFINITY;
        isz i = 0;
        for (; i + PD_LANES <= n; i += PD_LANES)
            for (int j = 0; j < PD_LANES; j++) mx[j] = PD_MAXNAN(mx[j], x[i + j]);
        float m = -INFINITY;
        for (int j = 0; j < PD_LANES; j++) m = PD_MAXNAN(m, mx[j]);
        for (; i < n; i++) m = PD_MAXNAN(m, x[i]);
        PD_SIMD for (isz k = 0; k < n; k++) y[k] = pd_expf(x[k] - m);
        const float inv = 1.0f / row_sum(y, n);
        PD_SIMD for (isz k = 0; k < n; k++) y[k] *= inv;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* im2col                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

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

typedef struct {
    const float *x;
    float *cols;
    isz N;
    conv_geo g;
} i2c_args;

PD_INLINE void i2c_task_impl(void *vctx, isz begin, isz end) {
    const i2c_args *a = (const i2c_args *)vctx;
    const conv_geo *g = &a->g;
    const isz rows = g->C * g->KH * g->KW, len = g->OH * g->OW;
    for (isz t = begin; t < end; t++) {
        const isz n = t / rows, r = t % rows;
        im2col_block(g, a->x + n * g->C * g->H * g->W, r, r + 1, 0, len, a->cols + t * len, len);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* conv GEMM: out[n, g] = W[g] @ X[n, g] (+ bias, act), blocks of it on the pool, each one a         */
/* single-threaded sgemm of the BLAS NumPy uses (its cblas_sgemm address is handed over by Python)   */
/* ------------------------------------------------------------------------------------------------ */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };
typedef void (*sgemm64_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                          int64_t, float, float *, int64_t);
typedef void (*sgemm32_t)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                          float *, int);
static void *g_sgemm = NULL;
static int g_sgemm_ilp64 = 1;

static void sgemm_rm(isz m, isz n, isz k, const float *a, isz lda, const float *b, isz ldb, float *c, isz ldc) {
    if (g_sgemm_ilp64)
        ((sgemm64_t)g_sgemm)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c,
                             ldc);
    else
        ((sgemm32_t)g_sgemm)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a,
                             (int)lda, b, (int)ldb, 0.0f, c, (int)ldc);
}

typedef struct {
    const float *w, *x, *bias;
    float *out;
    isz N, G, M, K, L; /* per group: W (M, K), X (K, L), out (M, L) */
    isz blocks, rows_per, cols_per; /* per (n, g): blocks of rows_per rows x cols_per columns */
    isz col_blocks;
    int fused_im2col; /* x is the image (N, C, H, W): each block gathers its columns itself */
    int bias_cols;    /* bias has one value per column (fc: out = x @ w + bias), not per row */
    conv_geo geo;
    act_t act;
} gemm_args;

PD_INLINE void gemm_task_impl(void *vctx, isz begin, isz end) {
    const gemm_args *a = (const gemm_args *)vctx;
    float *buf = NULL;
    if (a->fused_im2col) {
        buf = (float *)malloc((size_t)(a->K * a->cols_per) * sizeof(float));
        if (!buf) return; /* out of memory: the output is left as allocated (cannot happen in practice) */
    }
    for (isz t = begin; t < end; t++) {
        const isz ng = t / a->blocks, blk = t % a->blocks, g = ng % a->G;
        const isz r0 = (blk / a->col_blocks) * a->rows_per, c0 = (blk % a->col_blocks) * a->cols_per;
        const isz rows = a->M - r0 < a->rows_per ? a->M - r0 : a->rows_per;
        const isz cols = a->L - c0 < a->cols_per ? a->L - c0 : a->cols_per;
        const float *w = a->w + (g * a->M + r0) * a->K;
        float *o = a->out + (ng * a->M + r0) * a->L + c0;
        if (a->fused_im2col) {
            const conv_geo *cg = &a->geo;
            const isz n = ng / a->G;
            const float *img = a->x + n * cg->C * cg->H * cg->W;
            im2col_block(cg, img, g * a->K, (g + 1) * a->K, c0, c0 + cols, buf, cols);
            sgemm_rm(rows, cols, a->K, w, a->K, buf, cols, o, a->L);
        } else {
            sgemm_rm(rows, cols, a->K, w, a->K, a->x + ng * a->K * a->L + c0, a->L, o, a->L);
        }
        if (a->bias_cols && a->bias) {
            const float *bc = a->bias + c0;
            for (isz r = 0; r < rows; r++) {
                float *orow = o + r * a->L;
                PD_SIMD for (isz q = 0; q < cols; q++) orow[q] += bc[q];
                if (a->act.kind != ACT_NONE) bias_act_copy(orow, orow, cols, 0.0f, 0, &a->act);
            }
        } else if (a->bias || a->act.kind != ACT_NONE) {
            for (isz r = 0; r < rows; r++)
                bias_act_copy(o + r * a->L, o + r * a->L, cols, a->bias ? a->bias[g * a->M + r0 + r] : 0.0f,
                              a->bias != NULL, &a->act);
        }
    }
    free(buf);
}

/* How gemm_task splits the work: blocks of columns (when there are many), else of rows. The split depends
 * on the shapes only, never on the thread count, so that results do not either (the BLAS may round a
 * block's edge columns differently). */
#define GEMM_BLOCKS 8 /* blocks per product (for up to 8 threads) */
static void gemm_plan(gemm_args *a) {
    const isz ng = a->N * a->G, work = a->M * a->K * a->L;
    a->rows_per = a->M;
    a->cols_per = a->L > 0 ? a->L : 1;
    if (a->fused_im2col) {
        /* columns per block: the gathered block (K x cols) about 1 MiB (smaller blocks measured slower: the
         * BLAS is less efficient on narrow products), a multiple of 16 */
        isz c = (262144 / (a->K > 0 ? a->K : 1)) / 16 * 16;
        if (c < 32) c = 32;
        if (c < a->cols_per) a->cols_per = c;
    }
    if (work >= 65536 && ng < GEMM_BLOCKS) {
        isz per = (GEMM_BLOCKS + ng - 1) / ng; /* blocks wanted per (n, g) */
        isz have = (a->L + a->cols_per - 1) / a->cols_per;
        if (have < per) {
            /* columns: every block packs the whole left-hand side (weights) again: blocks of >= 256 columns */
            const isz colmin = 256;
            if (a->L >= 2 * colmin) {
                isz pc = a->L / colmin;
                pc += pc & 1; /* an even count: no thread idles for a whole block at the end on 2 threads */
                if (pc > per) pc = per;
                isz c = (a->L + pc - 1) / pc;
                a->cols_per = (c + 15) / 16 * 16;
            } else if (a->M >= 32) {
                /* rows: every block packs the whole right-hand side again, so blocks of >= 256 rows where
                 * possible (at least 2 blocks): measured 2x faster than 8 blocks of 64 on 512x4608x49 */
                isz pr = (per + have - 1) / have;
                isz cap = a->M / 256 > 2 ? a->M / 256 : 2;
                if (pr > cap) pr = cap;
                isz r = (a->M + pr - 1) / pr;
                a->rows_per = (r + 15) / 16 * 16;
            }
        }
    }
    a->col_blocks = (a->L + a->cols_per - 1) / a->cols_per;
    if (a->col_blocks < 1) a->col_blocks = 1;
    a->blocks = a->col_blocks * ((a->M + a->rows_per - 1) / a->rows_per);
}

/* ------------------------------------------------------------------------------------------------ */
/* pool2d (max / avg), Paddle's CPU windows: see pdlite/kernels/host/pool.py                       */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const float *x;
    float *out;
    isz NC, H, W, OH, OW, KH, KW, SH, SW, PT, PL;
    int is_max, exclusive;
} pool_args;

/* max that propagates NaN (as np.maximum): v if v > m or v is NaN */

/* one output (oy, ox) the slow way: any window position (padding, clipping at the edges) */
PD_INLINE float pool_one(const pool_args *a, const float *src, isz h0, isz h1, isz hcount, isz ox) {
    isz ws = ox * a->SW - a->PL, we = ws + a->KW;
    if (we > a->W + a->PL) we = a->W + a->PL;
    const isz wcount = we - ws;
    const isz w0 = ws < 0 ? 0 : ws, w1 = we > a->W ? a->W : we;
    if (a->is_max) {
        float m = -FLT_MAX;
        for (isz y = h0; y < h1; y++)
            for (isz x = w0; x < w1; x++) m = PD_MAXNAN(m, src[y * a->W + x]);
        return m;
    }
    float s = 0.0f;
    for (isz y = h0; y < h1; y++)
        for (isz x = w0; x < w1; x++) s += src[y * a->W + x];
    const float div = a->exclusive ? (float)((h1 - h0) * (w1 - w0)) : (float)(hcount * wcount);
    return s / div;
}

PD_INLINE void pool_task_impl(void *vctx, isz begin, isz end) {
    const pool_args *a = (const pool_args *)vctx;
    const isz OW = a->OW, SW = a->SW, KW = a->KW;
    /* output columns whose window lies inside the image horizontally: [ilo, ihi) */
    isz ilo = (a->PL + SW - 1) / SW, ihi = a->W - KW + a->PL >= 0 ? (a->W - KW + a->PL) / SW + 1 : 0;
    if (ihi > OW) ihi = OW;
    if (ilo > ihi) ilo = ihi;
    /* acc: one output row; then the row-reduced input columns (at most W + KW) and their two phases */
    float *acc = (float *)malloc((size_t)(OW + 2 * (a->W + KW) + 2) * sizeof(float));
    if (!acc) return;
    for (isz p = begin; p < end; p++) {
        const float *src = a->x + p * a->H * a->W;
        float *dst = a->out + p * a->OH * OW;
        for (isz oy = 0; oy < a->OH; oy++) {
            isz hs = oy * a->SH - a->PT, he = hs + a->KH;
            if (he > a->H + a->PT) he = a->H + a->PT;
            const isz hcount = he - hs;
            const isz h0 = hs < 0 ? 0 : hs, h1 = he > a->H ? a->H : he;
            float *d = dst + oy * OW;
            for (isz ox = 0; ox < ilo; ox++) d[ox] = pool_one(a, src, h0, h1, hcount, ox);
            for (isz ox = ihi; ox < OW; ox++) d[ox] = pool_one(a, src, h0, h1, hcount, ox);
            if (ilo >= ihi) continue;
            const isz n = ihi - ilo;
            const isz x0 = ilo * SW - a->PL, x1 = (ihi - 1) * SW - a->PL + KW; /* input columns read */
            const int is_max = a->is_max;
            /* separable: reduce the window's rows first (contiguous, vectorised), then its columns */
            float *cv = acc + OW; /* cv[x - x0] for x in [x0, x1) */
            const isz nx = x1 - x0;
            if (h1 <= h0) {
                for (isz q = 0; q < nx; q++) cv[q] = is_max ? -FLT_MAX : 0.0f;
            } else if (h1 - h0 == 1) {
                const float *r = src + h0 * a->W + x0;
                PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = r[q];
            } else {
                /* (no memcpy into cv: its stores would not forward to the vector loads that follow) */
                const float *r0 = src + h0 * a->W + x0, *r1 = r0 + a->W;
                if (is_max) {
                    PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = PD_MAXNAN(r0[q], r1[q]);
                } else {
                    PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = r0[q] + r1[q];
                }
                for (isz y = h0 + 2; y < h1; y++) {
                    const float *r = src + y * a->W + x0;
                    if (is_max) {
                        PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = PD_MAXNAN(cv[q], r[q]);
                    } else {
                        PD_SIMD for (isz q = 0; q < nx; q++) cv[q] += r[q];
                    }
                }
            }
            if (n == 1) { /* one window per row (global pooling): reduce cv over 8 lanes, then the lanes */
                float part[8], r;
                const float init = is_max ? -FLT_MAX : 0.0f;
                for (int l = 0; l < 8; l++) part[l] = init;
                isz x = 0;
                for (; x + 8 <= KW; x += 8)
                    for (int l = 0; l < 8; l++) part[l] = is_max ? PD_MAXNAN(part[l], cv[x + l]) : part[l] + cv[x + l];
                r = part[0];
                for (int l = 1; l < 8; l++) r = is_max ? PD_MAXNAN(r, part[l]) : r + part[l];
                for (; x < KW; x++) r = is_max ? PD_MAXNAN(r, cv[x]) : r + cv[x];
                if (is_max) {
                    d[ilo] = r;
                } else {
                    const float div = a->exclusive ? (float)((h1 - h0) * KW) : (float)(hcount * KW);
                    d[ilo] = r / div;
                }
                continue;
            }
            /* column taps: tap kx of output q reads cv[q*SW + kx]; with SW == 2, from the even / odd phase */
            const float *ph[2] = {cv, cv};
            isz step = SW;
            if (SW == 2) { /* deinterleave, so that every column tap is a contiguous slice */
                float *ev = cv + nx, *od = ev + (nx + 1) / 2;
                for (isz i = 0; 2 * i < nx; i++) ev[i] = cv[2 * i];
                for (isz i = 0; 2 * i + 1 < nx; i++) od[i] = cv[2 * i + 1];
                ph[0] = ev, ph[1] = od, step = 1;
            }
            for (isz kx = 0; kx < KW; kx++) {
                const float *t = SW == 2 ? ph[kx % 2] + kx / 2 : cv + kx;
                if (kx == 0) {
                    if (step == 1) {
                        PD_SIMD for (isz q = 0; q < n; q++) acc[q] = t[q];
                    } else {
                        for (isz q = 0; q < n; q++) acc[q] = t[q * step];
                    }
                } else if (is_max) {
                    if (step == 1) {
                        PD_SIMD for (isz q = 0; q < n; q++) acc[q] = PD_MAXNAN(acc[q], t[q]);
                    } else {
                        for (isz q = 0; q < n; q++) acc[q] = PD_MAXNAN(acc[q], t[q * step]);
                    }
                } else {
                    if (step == 1) {
                        PD_SIMD for (isz q = 0; q < n; q++) acc[q] += t[q];
                    } else {
                        for (isz q = 0; q < n; q++) acc[q] += t[q * step];
                    }
                }
            }
            if (is_max) {
                memcpy(d + ilo, acc, (size_t)n * sizeof(float));
            } else {
                const float div = a->exclusive ? (float)((h1 - h0) * KW) : (float)(hcount * KW);
                for (isz q = 0; q < n; q++) d[ilo + q] = acc[q] / div;
            }
        }
    }
    free(acc);
}

/* ------------------------------------------------------------------------------------------------ */
/* Winograd F(2x2, 3x3) for 3x3 stride-1 convs: 16 GEMMs U[p] (OC x C) @ V[p] (C x T) over the T     */
/* 2x2 output tiles, 2.25x fewer multiplications than im2col. U = G g G^T comes transformed (Python). */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const float *x, *u, *bias;
    float *out, *v, *m; /* v: (16, C, T), m: (16, OC, T) scratch */
    isz C, H, W, OC, OH, OW, PT, PL, TH, TW, T;
    isz NB, TT;               /* images per pass (x, out: the pass's first one) and their tiles, NB * TP */
    isz ty0, ty1, TP;         /* the pass's tile rows [ty0, ty1) of each image: TP = (ty1 - ty0) * TW tiles */
    isz cols_per, col_blocks; /* GEMM blocks: 16 positions x col_blocks */
    act_t act;
} wino_args;

/* input transform of channel c: V[p][c][t] = (B^T d B)[p] for each tile's 4x4 patch d */
PD_INLINE void wino_in_task_impl(void *vctx, isz begin, isz end) {
    const wino_args *a = (const wino_args *)vctx;
    const isz TW = a->TW, PW = 2 * TW + 2; /* padded row: columns 2*tx - PL .. 2*tx - PL + 3 of each tile */
    float *buf = (float *)malloc((size_t)(4 * PW + 8 * (TW + 1)) * sizeof(float));
    if (!buf) return;
    float *rows = buf;           /* 4 input rows (zero padded), then the vertical combinations in place */
    float *ev = buf + 4 * PW;    /* even / odd columns of one combined row: 4 x (TW + 1) each */
    float *od = ev + 4 * (TW + 1);
    for (isz ic = begin; ic < end; ic++) { /* ic = image * C + channel */
        const isz c = ic % a->C, toff = (ic / a->C) * a->TP - a->ty0 * TW;
        const float *src = a->x + ic * a->H * a->W;
        for (isz ty = a->ty0; ty < a->ty1; ty++) {
            for (isz i = 0; i < 4; i++) {
                const isz iy = 2 * ty - a->PT + i;
                float *r = rows + i * PW;
                if (iy < 0 || iy >= a->H) {
                    memset(r, 0, (size_t)PW * sizeof(float));
                    continue;
                }
                const float *s = src + iy * a->W;
                const isz lo = a->PL < PW ? a->PL : PW;               /* r[px] = s[px - PL] for px in [lo, hi) */
                const isz hi = a->PL + a->W < PW ? a->PL + a->W : PW;
                for (isz px = 0; px < lo; px++) r[px] = 0.0f;
                if (hi > lo) memcpy(r + lo, s + (lo - a->PL), (size_t)(hi - lo) * sizeof(float));
                for (isz px = hi > lo ? hi : lo; px < PW; px++) r[px] = 0.0f;
            }
            /* B^T along the rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3 */
            float *d0 = rows, *d1 = rows + PW, *d2 = rows + 2 * PW, *d3 = rows + 3 * PW;
            PD_SIMD for (isz x = 0; x < PW; x++) {
                const float a0 = d0[x], a1 = d1[x], a2 = d2[x], a3 = d3[x];
                d0[x] = a0 - a2;
                d1[x] = a1 + a2;
                d2[x] = a2 - a1;
                d3[x] = a1 - a3;
            }
            for (isz i = 0; i < 4; i++) {
                const float *t = rows + i * PW;
                float *e = ev + i * (TW + 1), *o = od + i * (TW + 1);
                for (isz k = 0; k <= TW; k++) {
                    e[k] = t[2 * k];
                    o[k] = t[2 * k + 1];
                }
                /* B along the columns of tile tx: (e[tx] - e[tx+1], o[tx] + e[tx+1], e[tx+1] - o[tx], o[tx] - o[tx+1]) */
                const isz base = toff + ty * TW, TT = a->TT;
                float *v0 = a->v + ((4 * i + 0) * a->C + c) * TT + base;
                float *v1 = a->v + ((4 * i + 1) * a->C + c) * TT + base;
                float *v2 = a->v + ((4 * i + 2) * a->C + c) * TT + base;
                float *v3 = a->v + ((4 * i + 3) * a->C + c) * TT + base;
                PD_SIMD for (isz tx = 0; tx < TW; tx++) {
                    v0[tx] = e[tx] - e[tx + 1];
                    v1[tx] = o[tx] + e[tx + 1];
                    v2[tx] = e[tx + 1] - o[tx];
                    v3[tx] = o[tx] - o[tx + 1];
                }
            }
        }
    }
    free(buf);
}

/* GEMM blocks: position p = t / col_blocks, columns block t % col_blocks */
PD_INLINE void wino_gemm_task_impl(void *vctx, isz begin, isz end) {
    const wino_args *a = (const wino_args *)vctx;
    for (isz t = begin; t < end; t++) {
        const isz p = t / a->col_blocks, c0 = (t % a->col_blocks) * a->cols_per;
        const isz cols = a->TT - c0 < a->cols_per ? a->TT - c0 : a->cols_per;
        sgemm_rm(a->OC, cols, a->C, a->u + p * a->OC * a->C, a->C, a->v + p * a->C * a->TT + c0, a->TT,
                 a->m + p * a->OC * a->TT + c0, a->TT);
    }
}

/* output transform of channel oc: Y = A^T m A per tile, A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]; + bias, act */
PD_INLINE void wino_out_task_impl(void *vctx, isz begin, isz end) {
    const wino_args *a = (const wino_args *)vctx;
    const isz TW = a->TW, TT = a->TT, OW = a->OW;
    float *buf = (float *)malloc((size_t)(8 * TW + 2 * 2 * TW) * sizeof(float));
    if (!buf) return;
    float *s0 = buf, *s1 = buf + 4 * TW; /* s0[j], s1[j]: rows of A^T m for column j (4 x TW each) */
    float *row = buf + 8 * TW;           /* two output rows of width 2*TW */
    for (isz io = begin; io < end; io++) { /* io = image * OC + output channel */
        const isz oc = io % a->OC, toff = (io / a->OC) * a->TP - a->ty0 * TW;
        const float b = a->bias ? a->bias[oc] : 0.0f;
        float *o = a->out + io * a->OH * OW;
        for (isz ty = a->ty0; ty < a->ty1; ty++) {
            const isz base = toff + ty * TW;
            for (isz j = 0; j < 4; j++) {
                const float *m0 = a->m + ((0 + j) * a->OC + oc) * TT + base;
                const float *m1 = a->m + ((4 + j) * a->OC + oc) * TT + base;
                const float *m2 = a->m + ((8 + j) * a->OC + oc) * TT + base;
                const float *m3 = a->m + ((12 + j) * a->OC + oc) * TT + base;
                float *a0 = s0 + j * TW, *a1 = s1 + j * TW;
                PD_SIMD for (isz tx = 0; tx < TW; tx++) {
                    a0[tx] = m0[tx] + m1[tx] + m2[tx];
                    a1[tx] = m1[tx] - m2[tx] - m3[tx];
                }
            }
            for (isz r = 0; r < 2; r++) {
                const float *c0 = (r ? s1 : s0), *c1 = c0 + TW, *c2 = c0 + 2 * TW, *c3 = c0 + 3 * TW;
                float *y = row + r * 2 * TW;
                for (isz tx = 0; tx < TW; tx++) {
                    y[2 * tx] = c0[tx] + c1[tx] + c2[tx];
                    y[2 * tx + 1] = c1[tx] - c2[tx] - c3[tx];
                }
                const isz oy = 2 * ty + r;
                if (oy < a->OH) bias_act_copy(o + oy * OW, y, OW, b, a->bias != NULL, &a->act);
            }
        }
    }
    free(buf);
}

/* ------------------------------------------------------------------------------------------------ */
/* per-ISA versions of the tasks                                                                    */
/* ------------------------------------------------------------------------------------------------ */

#ifdef PD_X86_DISPATCH
#define PD_VERSIONS(name)                                                                                          \
    static void name##_base(void *c, isz b, isz e) { name##_impl(c, b, e); }                                      \
    PD_TARGET_AVX2 static void name##_avx2(void *c, isz b, isz e) { name##_impl(c, b, e); }                        \
    PD_TARGET_AVX512 static void name##_avx512(void *c, isz b, isz e) { name##_impl(c, b, e); }                    \
    static pd_task name = name##_base;
#else
#define PD_VERSIONS(name)                                                                                          \
    static void name##_base(void *c, isz b, isz e) { name##_impl(c, b, e); }                                      \
    static pd_task name = name##_base;
#endif

PD_VERSIONS(dw_task)
PD_VERSIONS(ba_task)
PD_VERSIONS(i2c_task)
PD_VERSIONS(pool_task)
PD_VERSIONS(gemm_task)
PD_VERSIONS(wino_in_task)
PD_VERSIONS(wino_gemm_task)
PD_VERSIONS(wino_out_task)
PD_VERSIONS(ln_task)
PD_VERSIONS(sm_task)

static const char *g_isa = "baseline";

static void pick_isa(void) {
#ifdef PD_X86_DISPATCH
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    const char *force = getenv("PDLITE_NATIVE_ISA"); /* baseline | avx2 | avx512: testing and benchmarking */
    if (force && strcmp(force, "baseline") == 0) avx2 = avx512 = 0;
    if (force && strcmp(force, "avx2") == 0) avx512 = 0;
#define PD_PICK(name) name = avx512 ? name##_avx512 : (avx2 ? name##_avx2 : name##_base)
    PD_PICK(dw_task);
    PD_PICK(ba_task);
    PD_PICK(i2c_task);
    PD_PICK(pool_task);
    PD_PICK(gemm_task);
    PD_PICK(wino_in_task);
    PD_PICK(wino_gemm_task);
    PD_PICK(wino_out_task);
    PD_PICK(ln_task);
    PD_PICK(sm_task);
#undef PD_PICK
    g_isa = avx512 ? "avx512" : (avx2 ? "avx2" : "baseline");
#endif
}

/* ------------------------------------------------------------------------------------------------ */
/* Python bindings                                                                                  */
/* ------------------------------------------------------------------------------------------------ */

static int get_buf(PyObject *obj, Py_buffer *view, int writable, isz nfloats, const char *what) {
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) return -1;
    if (view->len != nfloats * (isz)sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd float32 values, got a buffer of %zd bytes", what, nfloats,
                     view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int parse_act(int kind, PyObject *params, act_t *act) {
    act->kind = kind;
    act->a0 = act->a1 = act->a2 = 0.0f;
    if (kind < ACT_NONE || kind > ACT_GELU) {
        PyErr_Format(PyExc_ValueError, "unknown activation code %d", kind);
        return -1;
    }
    if (!PyArg_ParseTuple(params, "fff", &act->a0, &act->a1, &act->a2)) return -1;
    return 0;
}

static PyObject *py_depthwise_conv2d(PyObject *self, PyObject *args) {
    PyObject *xo, *wo, *bo, *oo, *ap;
    dw_args a;
    int act;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnnnnnnnnnn)iO", &xo, &wo, &bo, &oo, &a.N, &a.C, &a.H, &a.W, &a.OC, &a.OH,
                          &a.OW, &a.KH, &a.KW, &a.SH, &a.SW, &a.DH, &a.DW, &a.PT, &a.PL, &act, &ap))
        return NULL;
    if (a.N < 0 || a.C <= 0 || a.OC % a.C != 0 || a.H < 0 || a.W < 0 || a.OH < 0 || a.OW < 0 || a.KH <= 0 ||
        a.KW <= 0 || a.SH <= 0 || a.SW <= 0 || a.DH <= 0 || a.DW <= 0) {
        PyErr_SetString(PyExc_ValueError, "depthwise_conv2d: bad geometry");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    Py_buffer xb, wb, bb, ob;
    if (get_buf(xo, &xb, 0, a.N * a.C * a.H * a.W, "depthwise_conv2d input") < 0) return NULL;
    if (get_buf(wo, &wb, 0, a.OC * a.KH * a.KW, "depthwise_conv2d filter") < 0) goto fail_x;
    int has_bias = bo != Py_None;
    if (has_bias && get_buf(bo, &bb, 0, a.OC, "depthwise_conv2d bias") < 0) goto fail_w;
    if (get_buf(oo, &ob, 1, a.N * a.OC * a.OH * a.OW, "depthwise_conv2d output") < 0) goto fail_b;
    a.x = (const float *)xb.buf;
    a.w = (const float *)wb.buf;
    a.bias = has_bias ? (const float *)bb.buf : NULL;
    a.out = (float *)ob.buf;
    if (a.OH > 0 && a.OW > 0) {
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(dw_task, &a, a.N * a.OC, grain_for(a.N * a.OC, 4));
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&ob);
    if (has_bias) PyBuffer_Release(&bb);
    PyBuffer_Release(&wb);
    PyBuffer_Release(&xb);
    Py_RETURN_NONE;
fail_b:
    if (has_bias) PyBuffer_Release(&bb);
fail_w:
    PyBuffer_Release(&wb);
fail_x:
    PyBuffer_Release(&xb);
    return NULL;
}

static PyObject *py_bias_act(PyObject *self, PyObject *args) {
    PyObject *oo, *bo, *ap;
    isz n, c, inner;
    int act;
    ba_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nnn)iO", &oo, &bo, &n, &c, &inner, &act, &ap)) return NULL;
    if (n < 0 || c <= 0 || inner < 0) {
        PyErr_SetString(PyExc_ValueError, "bias_act: bad shape");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    Py_buffer ob, bb;
    int has_bias = bo != Py_None;
    if (get_buf(oo, &ob, 1, n * c * inner, "bias_act output") < 0) return NULL;
    if (has_bias && get_buf(bo, &bb, 0, c, "bias_act bias") < 0) {
        PyBuffer_Release(&ob);
        return NULL;
    }
    a.out = (float *)ob.buf;
    a.bias = has_bias ? (const float *)bb.buf : NULL;
    a.C = c;
    a.inner = inner;
    if (inner > 0 && (has_bias || a.act.kind != ACT_NONE)) {
        isz rows = n * c;
        /* tiny tensors: one thread (waking a worker costs more than the work) */
        isz grain = rows * inner < 16384 ? rows : grain_for(rows, 4);
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(ba_task, &a, rows, grain);
        Py_END_ALLOW_THREADS;
    }
    if (has_bias) PyBuffer_Release(&bb);
    PyBuffer_Release(&ob);
    Py_RETURN_NONE;
}

static PyObject *py_im2col(PyObject *self, PyObject *args) {
    PyObject *xo, *co;
    i2c_args a;
    (void)self;
    conv_geo *g = &a.g;
    if (!PyArg_ParseTuple(args, "OO(nnnnnnnnnnnnnn)", &xo, &co, &a.N, &g->C, &g->H, &g->W, &g->OH, &g->OW, &g->KH,
                          &g->KW, &g->SH, &g->SW, &g->DH, &g->DW, &g->PT, &g->PL))
        return NULL;
    if (a.N < 0 || g->C < 0 || g->H < 0 || g->W < 0 || g->OH < 0 || g->OW < 0 || g->KH <= 0 || g->KW <= 0 ||
        g->SH <= 0 || g->SW <= 0 || g->DH <= 0 || g->DW <= 0) {
        PyErr_SetString(PyExc_ValueError, "im2col: bad geometry");
        return NULL;
    }
    Py_buffer xb, cb;
    if (get_buf(xo, &xb, 0, a.N * g->C * g->H * g->W, "im2col input") < 0) return NULL;
    if (get_buf(co, &cb, 1, a.N * g->C * g->KH * g->KW * g->OH * g->OW, "im2col columns") < 0) {
        PyBuffer_Release(&xb);
        return NULL;
    }
    a.x = (const float *)xb.buf;
    a.cols = (float *)cb.buf;
    isz rows = a.N * g->C * g->KH * g->KW;
    if (g->OH > 0 && g->OW > 0 && rows > 0) {
            Py_BEGIN_ALLOW_THREADS;
        parallel_for(i2c_task, &a, rows, grain_for(rows, 4));
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&xb);
    Py_RETURN_NONE;
}

static PyObject *py_pool2d(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    pool_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nnnnnnnnnnn)ii", &xo, &oo, &a.NC, &a.H, &a.W, &a.OH, &a.OW, &a.KH, &a.KW, &a.SH,
                          &a.SW, &a.PT, &a.PL, &a.is_max, &a.exclusive))
        return NULL;
    if (a.NC < 0 || a.H < 0 || a.W < 0 || a.OH < 0 || a.OW < 0 || a.KH <= 0 || a.KW <= 0 || a.SH <= 0 || a.SW <= 0) {
        PyErr_SetString(PyExc_ValueError, "pool2d: bad geometry");
        return NULL;
    }
    Py_buffer xb, ob;
    if (get_buf(xo, &xb, 0, a.NC * a.H * a.W, "pool2d input") < 0) return NULL;
    if (get_buf(oo, &ob, 1, a.NC * a.OH * a.OW, "pool2d output") < 0) {
        PyBuffer_Release(&xb);
        return NULL;
    }
    a.x = (const float *)xb.buf;
    a.out = (float *)ob.buf;
    if (a.NC > 0 && a.OH > 0 && a.OW > 0) {
        isz grain = a.NC * a.OH * a.OW * a.KH * a.KW < 32768 ? a.NC : grain_for(a.NC, 4);
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(pool_task, &a, a.NC, grain);
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&ob);
    PyBuffer_Release(&xb);
    Py_RETURN_NONE;
}

/* the row count's grain: tiny tensors on one thread (waking a worker costs more than the work) */
static isz row_grain(isz rows, isz cols) { return rows * cols < 16384 ? rows : grain_for(rows, 4); }

static PyObject *py_layer_norm(PyObject *self, PyObject *args) {
    PyObject *xo, *so, *bo, *yo, *mo, *vo;
    isz rows, cols;
    ln_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO(nn)f", &xo, &so, &bo, &yo, &mo, &vo, &rows, &cols, &a.eps)) return NULL;
    if (rows < 0 || cols <= 0) {
        PyErr_SetString(PyExc_ValueError, "layer_norm: bad shape");
        return NULL;
    }
    Py_buffer bufs[6];
    PyObject *objs[6] = {xo, so, bo, yo, mo, vo};
    const isz sizes[6] = {rows * cols, cols, cols, rows * cols, rows, rows};
    const int writable[6] = {0, 0, 0, 1, 1, 1};
    static const char *what[6] = {"layer_norm x", "layer_norm scale", "layer_norm bias", "layer_norm y",
                                  "layer_norm mean", "layer_norm variance"};
    void *ptr[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    int got = 0, ok = 1;
    for (; got < 6; got++) {
        if (objs[got] == Py_None) {
            if (got == 0 || got == 3) {
                PyErr_SetString(PyExc_ValueError, "layer_norm: x and y are required");
                ok = 0;
                break;
            }
            bufs[got].obj = NULL;
            continue;
        }
        if (get_buf(objs[got], &bufs[got], writable[got], sizes[got], what[got]) < 0) {
            ok = 0;
            break;
        }
        ptr[got] = bufs[got].buf;
    }
    if (ok) {
        a.x = (const float *)ptr[0], a.scale = (const float *)ptr[1], a.bias = (const float *)ptr[2];
        a.y = (float *)ptr[3], a.mean = (float *)ptr[4], a.var = (float *)ptr[5];
        a.cols = cols;
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(ln_task, &a, rows, row_grain(rows, cols));
        Py_END_ALLOW_THREADS;
    }
    for (int i = 0; i < got; i++)
        if (objs[i] != Py_None) PyBuffer_Release(&bufs[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_softmax(PyObject *self, PyObject *args) {
    PyObject *xo, *yo;
    isz rows, cols;
    sm_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nn)", &xo, &yo, &rows, &cols)) return NULL;
    if (rows < 0 || cols <= 0) {
        PyErr_SetString(PyExc_ValueError, "softmax: bad shape");
        return NULL;
    }
    Py_buffer xb, yb;
    if (get_buf(xo, &xb, 0, rows * cols, "softmax x") < 0) return NULL;
    if (get_buf(yo, &yb, 1, rows * cols, "softmax y") < 0) {
        PyBuffer_Release(&xb);
        return NULL;
    }
    a.x = (const float *)xb.buf;
    a.y = (float *)yb.buf;
    a.cols = cols;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(sm_task, &a, rows, row_grain(rows, cols));
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&yb);
    PyBuffer_Release(&xb);
    Py_RETURN_NONE;
}

static PyObject *py_set_sgemm(PyObject *self, PyObject *args) {
    unsigned long long addr;
    int ilp64;
    (void)self;
    if (!PyArg_ParseTuple(args, "Kp", &addr, &ilp64)) return NULL;
    g_sgemm = (void *)(uintptr_t)addr;
    g_sgemm_ilp64 = ilp64;
    Py_RETURN_NONE;
}

static PyObject *py_has_sgemm(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyBool_FromLong(g_sgemm != NULL);
}

static PyObject *py_conv_gemm(PyObject *self, PyObject *args) {
    PyObject *wo, *xo, *bo, *oo, *ap, *geo = Py_None;
    gemm_args a;
    int act;
    (void)self;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, "OOOO(nnnnn)iO|Op", &wo, &xo, &bo, &oo, &a.N, &a.G, &a.M, &a.K, &a.L, &act, &ap, &geo,
                          &a.bias_cols))
        return NULL;
    if (g_sgemm == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "conv_gemm: no sgemm (call set_sgemm first)");
        return NULL;
    }
    if (a.N < 0 || a.G <= 0 || a.M <= 0 || a.K <= 0 || a.L < 0) {
        PyErr_SetString(PyExc_ValueError, "conv_gemm: bad shape");
        return NULL;
    }
    if (!g_sgemm_ilp64 && (a.M > INT32_MAX || a.K > INT32_MAX || a.L > INT32_MAX)) {
        PyErr_SetString(PyExc_ValueError, "conv_gemm: too large for a 32-bit BLAS");
        return NULL;
    }
    isz xsize = a.N * a.G * a.K * a.L;
    if (geo != Py_None) {
        conv_geo *g = &a.geo;
        if (!PyArg_ParseTuple(geo, "nnnnnnnnnnnnn", &g->C, &g->H, &g->W, &g->OH, &g->OW, &g->KH, &g->KW, &g->SH,
                              &g->SW, &g->DH, &g->DW, &g->PT, &g->PL))
            return NULL;
        if (g->C <= 0 || g->H < 0 || g->W < 0 || g->OH * g->OW != a.L || g->KH <= 0 || g->KW <= 0 || g->SH <= 0 ||
            g->SW <= 0 || g->DH <= 0 || g->DW <= 0 || g->C * g->KH * g->KW != a.G * a.K) {
            PyErr_SetString(PyExc_ValueError, "conv_gemm: bad conv geometry");
            return NULL;
        }
        a.fused_im2col = 1;
        xsize = a.N * g->C * g->H * g->W;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    Py_buffer wb, xb, bb, ob;
    int has_bias = bo != Py_None;
    if (get_buf(wo, &wb, 0, a.G * a.M * a.K, "conv_gemm weights") < 0) return NULL;
    if (get_buf(xo, &xb, 0, xsize, "conv_gemm input") < 0) goto fail_w;
    if (a.bias_cols && (a.G != 1 || geo != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "conv_gemm: per-column bias needs one group and no im2col");
        goto fail_x;
    }
    if (has_bias && get_buf(bo, &bb, 0, a.bias_cols ? a.L : a.G * a.M, "conv_gemm bias") < 0) goto fail_x;
    if (get_buf(oo, &ob, 1, a.N * a.G * a.M * a.L, "conv_gemm output") < 0) goto fail_b;
    a.w = (const float *)wb.buf;
    a.x = (const float *)xb.buf;
    a.bias = has_bias ? (const float *)bb.buf : NULL;
    a.out = (float *)ob.buf;
    gemm_plan(&a);
    if (a.L > 0 && a.N > 0) {
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(gemm_task, &a, a.N * a.G * a.blocks, 1);
        Py_END_ALLOW_THREADS;
    }
    PyBuffer_Release(&ob);
    if (has_bias) PyBuffer_Release(&bb);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&wb);
    Py_RETURN_NONE;
fail_b:
    if (has_bias) PyBuffer_Release(&bb);
fail_x:
    PyBuffer_Release(&xb);
fail_w:
    PyBuffer_Release(&wb);
    return NULL;
}

static PyObject *py_winograd_conv3x3(PyObject *self, PyObject *args) {
    PyObject *xo, *uo, *bo, *oo, *ap;
    wino_args a;
    isz n;
    int act;
    (void)self;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnnnn)iO", &xo, &uo, &bo, &oo, &n, &a.C, &a.H, &a.W, &a.OC, &a.OH, &a.OW,
                          &a.PT, &a.PL, &act, &ap))
        return NULL;
    if (g_sgemm == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "winograd_conv3x3: no sgemm (call set_sgemm first)");
        return NULL;
    }
    if (n < 0 || a.C <= 0 || a.H <= 0 || a.W <= 0 || a.OC <= 0 || a.OH <= 0 || a.OW <= 0 || a.PT < 0 || a.PL < 0 ||
        a.OH > a.H + 2 * a.PT + 2 || a.OW > a.W + 2 * a.PL + 2) {
        PyErr_SetString(PyExc_ValueError, "winograd_conv3x3: bad geometry");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    a.TH = (a.OH + 1) / 2;
    a.TW = (a.OW + 1) / 2;
    a.T = a.TH * a.TW;
    Py_buffer xb, ub, bb, ob;
    int has_bias = bo != Py_None;
    if (get_buf(xo, &xb, 0, n * a.C * a.H * a.W, "winograd input") < 0) return NULL;
    if (get_buf(uo, &ub, 0, 16 * a.OC * a.C, "winograd weights") < 0) goto fail_x;
    if (has_bias && get_buf(bo, &bb, 0, a.OC, "winograd bias") < 0) goto fail_u;
    if (get_buf(oo, &ob, 1, n * a.OC * a.OH * a.OW, "winograd output") < 0) goto fail_b;
    a.u = (const float *)ub.buf;
    a.bias = has_bias ? (const float *)bb.buf : NULL;
    /* Passes of about 256 tile columns: wider ones fall out of the caches (the transformed input and the
     * products are 16 values per tile and channel). Small images go through together: their tiles side by
     * side make the 16 GEMMs wider, and the weights (16 * OC * C, often larger than the images) are
     * streamed once per pass instead of once per image; large images go through in bands of tile rows. */
    a.NB = a.T >= 256 ? 1 : 256 / a.T;
    if (a.NB > n) a.NB = n > 0 ? n : 1;
    isz rows_per = a.NB > 1 ? a.TH : (a.TW >= 256 ? 1 : 256 / a.TW);
    if (rows_per > a.TH) rows_per = a.TH;
    const isz most = a.NB > 1 ? a.NB * a.T : rows_per * a.TW; /* tile columns of the widest pass */
    a.v = (float *)malloc((size_t)(16 * (a.C + a.OC) * most) * sizeof(float));
    if (!a.v) {
        PyBuffer_Release(&ob);
        PyErr_NoMemory();
        goto fail_b;
    }
    a.m = a.v + 16 * a.C * most;
    a.col_blocks = 1; /* one block per position: 16 blocks, whatever the thread count (same results) */
    Py_BEGIN_ALLOW_THREADS;
    for (isz i = 0; i < n; i += a.NB) {
        const isz nb = n - i < a.NB ? n - i : a.NB; /* the last pass may hold fewer images */
        a.x = (const float *)xb.buf + i * a.C * a.H * a.W;
        a.out = (float *)ob.buf + i * a.OC * a.OH * a.OW;
        for (a.ty0 = 0; a.ty0 < a.TH; a.ty0 = a.ty1) {
            a.ty1 = a.ty0 + rows_per < a.TH ? a.ty0 + rows_per : a.TH;
            a.TP = (a.ty1 - a.ty0) * a.TW;
            a.TT = nb * a.TP;
            a.cols_per = a.TT;
            parallel_for(wino_in_task, &a, nb * a.C, grain_for(nb * a.C, 4));
            parallel_for(wino_gemm_task, &a, 16 * a.col_blocks, 1);
            parallel_for(wino_out_task, &a, nb * a.OC, grain_for(nb * a.OC, 4));
        }
    }
    Py_END_ALLOW_THREADS;
    free(a.v);
    PyBuffer_Release(&ob);
    if (has_bias) PyBuffer_Release(&bb);
    PyBuffer_Release(&ub);
    PyBuffer_Release(&xb);
    Py_RETURN_NONE;
fail_b:
    if (has_bias) PyBuffer_Release(&bb);
fail_u:
    PyBuffer_Release(&ub);
fail_x:
    PyBuffer_Release(&xb);
    return NULL;
}

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) n = 1;
    if (n > PD_MAX_THREADS) n = PD_MAX_THREADS;
    g_threads = (int)n;
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyLong_FromLong(g_threads);
}

static PyObject *py_isa(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(g_isa);
}

static PyMethodDef methods[] = {
    {"depthwise_conv2d", py_depthwise_conv2d, METH_VARARGS,
     "depthwise_conv2d(x, w, bias|None, out, (N,C,H,W,OC,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), act, (a0,a1,a2))"},
    {"bias_act", py_bias_act, METH_VARARGS, "bias_act(out, bias|None, (N,C,inner), act, (a0,a1,a2)): in place"},
    {"im2col", py_im2col, METH_VARARGS, "im2col(x, cols, (N,C,H,W,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL))"},
    {"pool2d", py_pool2d, METH_VARARGS, "pool2d(x, out, (NC,H,W,OH,OW,KH,KW,SH,SW,PT,PL), is_max, exclusive)"},
    {"conv_gemm", py_conv_gemm, METH_VARARGS,
     "conv_gemm(w, x, bias|None, out, (N,G,M,K,L), act, (a0,a1,a2)[, im2col geo|None[, bias_cols]]): "
     "out[n,g] = act(w[g] @ x[n,g] + bias) (bias per row, or per column with bias_cols)"},
    {"winograd_conv3x3", py_winograd_conv3x3, METH_VARARGS,
     "winograd_conv3x3(x, u (16,OC,C), bias|None, out, (N,C,H,W,OC,OH,OW,PT,PL), act, (a0,a1,a2)): stride 1"},
    {"layer_norm", py_layer_norm, METH_VARARGS,
     "layer_norm(x, scale|None, bias|None, y, mean|None, var|None, (rows, cols), eps): over each row"},
    {"softmax", py_softmax, METH_VARARGS, "softmax(x, y, (rows, cols)): over each row"},
    {"set_sgemm", py_set_sgemm, METH_VARARGS, "set_sgemm(address of cblas_sgemm, ilp64)"},
    {"has_sgemm", py_has_sgemm, METH_NOARGS, "whether conv_gemm has an sgemm"},
    {"set_num_threads", py_set_num_threads, METH_O, "set the threads per kernel call (caller included)"},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "the threads per kernel call"},
    {"isa", py_isa, METH_NOARGS, "the instruction set the kernels run with: baseline, avx2 or avx512"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "pdlite host native kernels", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    static int atfork_done = 0;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, pool_after_fork_child);
        atfork_done = 1;
        pick_isa();
        const char *spin = getenv("PDLITE_NATIVE_SPIN_US");
        if (spin && *spin) g_spin_ns = atol(spin) * 1000L;
    }
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "SOURCE_HASH", PD_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
