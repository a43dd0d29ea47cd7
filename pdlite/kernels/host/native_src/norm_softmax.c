/* pdlite native host kernels: layer_norm and softmax (see common.h) */
/* No floating-point exception flags are read, so selects may be computed on every lane (the same values): without
 * this GCC 12 left softmax's exp loops scalar in the AVX2 clones ("control flow in loop"; AVX-512's masked lanes
 * vectorised them). Per file, not for the whole build: it slowed PP-OCRv4 det's convs by ~1.5% on AVX-512. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* row kernels: layer_norm and softmax over the rows of a (rows, cols) matrix                       */
/* ------------------------------------------------------------------------------------------------ */

#define PD_LANES 16 /* partial sums per row: vectorisable without reassociating one running sum */

/* acc[0] = the sum of acc[0 .. PD_LANES) as a tree (halves added lane by lane: shuffles and vector adds, where a
 * running sum over the lanes waited on each add; short rows, e.g. attention's 32 columns, are dominated by it) */
PD_INLINE float lanes_sum(float acc[PD_LANES]) {
    for (int w = PD_LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

PD_INLINE float row_sum(const float *x, isz n) {
    float acc[PD_LANES] = {0};
    isz i = 0;
    for (; i + PD_LANES <= n; i += PD_LANES)
        for (int j = 0; j < PD_LANES; j++) acc[j] += x[i + j];
    float s = lanes_sum(acc);
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
        ss = lanes_sum(acc);
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

/* Vectors of 8 floats (one AVX2 register, two SSE / NEON ones, the low half of an AVX-512 one): a row's 16 lane
 * partials (lanes_sum's) as two of them, lanes 0-7 and 8-15. As one 16-float vector, GCC kept the partials on the
 * stack in the AVX2 clones (an add waiting on a store's forwarding each step): softmax over the
 * transformer's 4 x 32 x 32 10.0 us at AVX2 against 3.7 at AVX-512, one Zen 5 core. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi" /* (sm_v8 values never cross a call: the helpers below are inlined) */
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* (as above) */
#endif
typedef float sm_v8 __attribute__((vector_size(32)));
typedef int32_t sm_v8i __attribute__((vector_size(32)));
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SM_SHUFFLE8(a, idx) __builtin_shufflevector(a, a, idx)
#else
#define SM_SHUFFLE8(a, idx) __builtin_shuffle(a, (sm_v8i){idx})
#endif
#define SM_HALF4 4, 5, 6, 7, 4, 5, 6, 7
#define SM_HALF2 2, 3, 2, 3, 2, 3, 2, 3
#define SM_HALF1 1, 1, 1, 1, 1, 1, 1, 1
/* the 16 lanes lo (0-7) and hi (8-15) reduced as lanes_sum does (halves combined lane by lane: 8, 4, 2, 1 apart)
 * with OP(a, b), into lane 0 of lo */
#define SM_LANES_TREE(lo, hi, OP)                                                                                  \
    do {                                                                                                           \
        lo = OP(lo, hi);                                                                                           \
        lo = OP(lo, SM_SHUFFLE8(lo, SM_HALF4));                                                                    \
        lo = OP(lo, SM_SHUFFLE8(lo, SM_HALF2));                                                                    \
        lo = OP(lo, SM_SHUFFLE8(lo, SM_HALF1));                                                                    \
    } while (0)
#define SM_ADD(a, b) ((a) + (b))
/* max lane by lane (b where b > a). Ordered: a NaN may be dropped here, but it reaches the row's sum through its
 * own exp(NaN - m), and the whole row is NaN either way (a NaN test in the mask, b != b, made GCC 12 compute the
 * inlined vector compares one lane at a time) */
#define SM_MAX(a, b) ((sm_v8)(((sm_v8i)(b) & ((b) > (a))) | ((sm_v8i)(a) & ~((b) > (a)))))

/* a row of 16 or more columns: its whole 16-column chunks in vectors (the per-row work of the lane arrays, spilled
 * to the stack for the max and the sum, and a branch per element of the max, was most of a short row's time:
 * attention's 32 columns), the rest one by one. The max is exact in any order; the sum is row_sum's (per lane over
 * the chunks, lanes_sum's tree, then the rest), so the same bits as the lane-array form it replaced; a row holding
 * a NaN is all NaN. */
PD_INLINE void sm_row(const float *x, float *y, isz n) {
    const isz nb = n - n % 16;
    sm_v8 lo, hi, v;
    memcpy(&lo, x, 32);
    memcpy(&hi, x + 8, 32);
    for (isz i = 16; i < nb; i += 16) {
        memcpy(&v, x + i, 32);
        lo = SM_MAX(lo, v);
        memcpy(&v, x + i + 8, 32);
        hi = SM_MAX(hi, v);
    }
    SM_LANES_TREE(lo, hi, SM_MAX);
    float m = lo[0];
    for (isz i = nb; i < n; i++) m = PD_MAXNAN(m, x[i]);
    PD_SIMD for (isz k = 0; k < n; k++) y[k] = pd_expf(x[k] - m);
    lo = (sm_v8){0}, hi = (sm_v8){0};
    for (isz i = 0; i < nb; i += 16) {
        memcpy(&v, y + i, 32);
        lo += v;
        memcpy(&v, y + i + 8, 32);
        hi += v;
    }
    SM_LANES_TREE(lo, hi, SM_ADD);
    float sum = lo[0];
    for (isz i = nb; i < n; i++) sum += y[i];
    const float inv = 1.0f / sum;
    PD_SIMD for (isz k = 0; k < n; k++) y[k] *= inv;
}

/* y = exp(x - max) * (1 / sum) per row (pdlite/kernels/host/math.py's order); NaN propagates through max */
PD_INLINE void sm_task_impl(void *vctx, isz begin, isz end) {
    const sm_args *a = (const sm_args *)vctx;
    const isz n = a->cols;
    if (n >= 16) {
        for (isz r = begin; r < end; r++) sm_row(a->x + r * n, a->y + r * n, n);
        return;
    }
    for (isz r = begin; r < end; r++) { /* under 16 columns: no whole chunk (sm_row's tail) */
        const float *x = a->x + r * n;
        float *y = a->y + r * n;
        float m = -INFINITY;
        for (isz i = 0; i < n; i++) m = PD_MAXNAN(m, x[i]);
        PD_SIMD for (isz k = 0; k < n; k++) y[k] = pd_expf(x[k] - m);
        const float inv = 1.0f / row_sum(y, n);
        PD_SIMD for (isz k = 0; k < n; k++) y[k] *= inv;
    }
}


PD_VERSIONS(ln_task)
PD_VERSIONS(sm_task)

PD_HIDDEN PyObject *py_layer_norm(PyObject *self, PyObject *args) {
    PyObject *xo, *so, *bo, *yo, *mo, *vo;
    isz rows, cols;
    ln_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO(nn)f", &xo, &so, &bo, &yo, &mo, &vo, &rows, &cols, &a.eps)) return NULL;
    if (rows < 0 || cols <= 0) {
        PyErr_SetString(PyExc_ValueError, "layer_norm: bad shape");
        return NULL;
    }
    if (xo == Py_None || yo == Py_None) {
        PyErr_SetString(PyExc_ValueError, "layer_norm: x and y are required");
        return NULL;
    }
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, rows * cols, "layer_norm x");
    a.scale = so == Py_None ? NULL : bufs_take(&bs, so, 0, cols, "layer_norm scale");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, cols, "layer_norm bias");
    a.y = bufs_take(&bs, yo, 1, rows * cols, "layer_norm y");
    a.mean = mo == Py_None ? NULL : bufs_take(&bs, mo, 1, rows, "layer_norm mean");
    a.var = vo == Py_None ? NULL : bufs_take(&bs, vo, 1, rows, "layer_norm variance");
    if (bs.failed) return NULL;
    a.cols = cols;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(ln_task, &a, rows, row_grain(rows, cols));
    Py_END_ALLOW_THREADS;
    bufs_release(&bs);
    Py_RETURN_NONE;
}

PD_HIDDEN PyObject *py_softmax(PyObject *self, PyObject *args) {
    PyObject *xo, *yo;
    isz rows, cols;
    sm_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nn)", &xo, &yo, &rows, &cols)) return NULL;
    if (rows < 0 || cols <= 0) {
        PyErr_SetString(PyExc_ValueError, "softmax: bad shape");
        return NULL;
    }
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, rows * cols, "softmax x");
    a.y = bufs_take(&bs, yo, 1, rows * cols, "softmax y");
    if (bs.failed) return NULL;
    a.cols = cols;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(sm_task, &a, rows, row_grain(rows, cols));
    Py_END_ALLOW_THREADS;
    bufs_release(&bs);
    Py_RETURN_NONE;
}
