/* pdlite native host kernels: layer_norm and softmax (see common.h) */
/* No floating-point exception flags are read, so selects may be computed on every lane (the same values): without
 * this GCC 12 left softmax's exp loops scalar in the AVX2 clones ("control flow in loop"; AVX-512's masked lanes
 * vectorised them). Per file, not for the whole build: it slowed PP-OCRv4 det's convs by ~1.5% on AVX-512. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "common.h"
#include "avx2.h" /* pd_v8: vectors of 8 floats */

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
    const float *x, *res, *scale, *bias;
    float *y, *mean, *var;
    isz cols;
    float eps;
} ln_args;

/* y = (x - mean) / sqrt(var + eps) * scale + bias per row (pdlite/kernels/host/norm.py's order); with res (skip_layernorm:
 * the residual add before it), of x + res, the sum written to y first (elementwise_add's one rounded add: the same
 * bits as the two ops) */
PD_INLINE void ln_task_impl(void *vctx, isz begin, isz end) {
    const ln_args *a = (const ln_args *)vctx;
    const isz n = a->cols;
    for (isz r = begin; r < end; r++) {
        const float *x = a->x + r * n;
        float *y = a->y + r * n;
        if (a->res) {
            const float *rr = a->res + r * n;
            PD_SIMD for (isz k = 0; k < n; k++) y[k] = x[k] + rr[k];
            x = y;
        }
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

/* Vectors of 8 floats (avx2.h's pd_v8: one AVX2 register, two SSE / NEON ones, the low half of an AVX-512 one): a
 * row's 16 lane partials (lanes_sum's) as two of them, lanes 0-7 and 8-15. As one 16-float vector, GCC kept the
 * partials on the stack in the AVX2 clones (an add waiting on a store's forwarding each step): softmax over the
 * transformer's 4 x 32 x 32 10.0 us at AVX2 against 3.7 at AVX-512, one Zen 5 core. */
#define SM_SHUFFLE8(a, idx) PD_SHUFFLE8(a, a, idx)
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
#define SM_MAX(a, b) ((pd_v8)(((pd_v8i)(b) & ((b) > (a))) | ((pd_v8i)(a) & ~((b) > (a)))))

/* a row of 16 or more columns: its whole 16-column chunks in vectors (the per-row work of the lane arrays, spilled
 * to the stack for the max and the sum, and a branch per element of the max, was most of a short row's time:
 * attention's 32 columns), the rest one by one. The max is exact in any order; the sum is row_sum's (per lane over
 * the chunks, lanes_sum's tree, then the rest), so the same bits as the lane-array form it replaced; a row holding
 * a NaN is all NaN. */
PD_INLINE void sm_row(const float *x, float *y, isz n) {
    const isz nb = n - n % 16;
    pd_v8 lo, hi, v;
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
    lo = (pd_v8){0}, hi = (pd_v8){0};
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

/* y = exp(x - max) * (1 / sum) over one row of n (pdlite/kernels/host/math.py's order); NaN propagates through
 * max; y may be x */
PD_INLINE void sm_any(const float *x, float *y, isz n) {
    if (n >= 16) {
        sm_row(x, y, n);
        return;
    }
    float m = -INFINITY; /* under 16 columns: no whole chunk (sm_row's tail) */
    for (isz i = 0; i < n; i++) m = PD_MAXNAN(m, x[i]);
    PD_SIMD for (isz k = 0; k < n; k++) y[k] = pd_expf(x[k] - m);
    const float inv = 1.0f / row_sum(y, n);
    PD_SIMD for (isz k = 0; k < n; k++) y[k] *= inv;
}

PD_INLINE void sm_task_impl(void *vctx, isz begin, isz end) {
    const sm_args *a = (const sm_args *)vctx;
    for (isz r = begin; r < end; r++) sm_any(a->x + r * a->cols, a->y + r * a->cols, a->cols);
}

/* ------------------------------------------------------------------------------------------------ */
/* attention: per head, softmax(alpha * q k^T) v (attention_fuse_pass's fused_attention)            */
/* ------------------------------------------------------------------------------------------------ */

/* x (B, S, 3 H D): each token's q, k and v (the siblings' fc output, [Wq | Wk | Wv]), head h at columns h D ..
 * h D + D - 1 of each third; out (B, S, H D): head h's softmax(alpha * q_h k_h^T) v_h at columns h D ... Items are
 * (b, h); per item k_h^T (D, Sj) and v_h (S, Dj) are copied into scratch with zero columns up to multiples of 16
 * (Sj, Dj), the scores (S, Sj) computed there on at_tile, scaled, softmax'd in place (sm_any: the softmax kernel's
 * operations), then multiplied by v_h into out. The products are one multiply-add per reduction step, k ascending
 * (fused where the ISA has FMA): not a BLAS's order, so within fp32 rounding of the unfused ops
 * (docs/determinism.md); the same bits at any thread count and on AVX2 and AVX-512. */
typedef struct {
    const float *x;
    float *out;
    isz S, H, D;
    float alpha;
} at_args;

#define AT_MR 4 /* rows per tile */
#define AT_NR 16 /* columns per tile: two vectors of 8 */
#define AT_PAR_MACS (1 << 17) /* multiply-adds (B H S S D) from which the heads are split over the pool */
#define AT_UP(n) (((n) + AT_NR - 1) / AT_NR * AT_NR)

/* c[i ldc + j] = sum_k a[i][k] b[k ldb + j] for i < nr, j < nc (of a tile of AT_MR x AT_NR: rows past nr repeat a
 * real one, b holds AT_NR columns) */
PD_INLINE void at_tile(const float *const a[AT_MR], isz kd, const float *b, isz ldb, float *c, isz ldc, int nr,
                       isz nc) {
    pd_v8 acc[AT_MR][2], b0, b1;
    for (int i = 0; i < AT_MR; i++) acc[i][0] = acc[i][1] = (pd_v8){0};
    for (isz k = 0; k < kd; k++) {
        memcpy(&b0, b + k * ldb, 32);
        memcpy(&b1, b + k * ldb + 8, 32);
        for (int i = 0; i < AT_MR; i++) {
            const float av = a[i][k];
            acc[i][0] += b0 * av;
            acc[i][1] += b1 * av;
        }
    }
    float t[AT_MR][AT_NR];
    memcpy(t, acc, sizeof t);
    for (int i = 0; i < nr; i++) memcpy(c + i * ldc, t[i], (size_t)nc * sizeof(float));
}

/* out rows (ldc apart) = a (S rows from a0, lda apart; kd of each) @ b (kd, ncols padded to AT_UP) */
PD_INLINE void at_product(const float *a0, isz lda, isz S, isz kd, const float *b, isz ncols, float *c, isz ldc) {
    const isz ldb = AT_UP(ncols);
    for (isz i0 = 0; i0 < S; i0 += AT_MR) {
        const int nr = S - i0 < AT_MR ? (int)(S - i0) : AT_MR;
        const float *a[AT_MR];
        for (int i = 0; i < AT_MR; i++) a[i] = a0 + (i0 + (i < nr ? i : nr - 1)) * lda;
        for (isz j0 = 0; j0 < ncols; j0 += AT_NR)
            at_tile(a, kd, b + j0, ldb, c + i0 * ldc + j0, ldc, nr, ncols - j0 < AT_NR ? ncols - j0 : AT_NR);
    }
}

PD_INLINE void at_task_impl(void *vctx, isz begin, isz end) {
    const at_args *a = (const at_args *)vctx;
    const isz S = a->S, D = a->D, H = a->H, Sj = AT_UP(S), Dj = AT_UP(D), ld = 3 * H * D;
    float *kt = (float *)pd_scratch((size_t)(D * Sj + S * Dj + S * Sj) * sizeof(float));
    if (!kt) return;
    float *vp = kt + D * Sj, *p = vp + S * Dj;
    for (isz it = begin; it < end; it++) {
        const isz b = it / H, h = it % H;
        const float *xb = a->x + b * S * ld, *q = xb + h * D, *k = q + H * D, *v = k + H * D;
        for (isz d = 0; d < D; d++) {
            for (isz j = 0; j < S; j++) kt[d * Sj + j] = k[j * ld + d];
            for (isz j = S; j < Sj; j++) kt[d * Sj + j] = 0.0f;
        }
        for (isz j = 0; j < S; j++) {
            memcpy(vp + j * Dj, v + j * ld, (size_t)D * sizeof(float));
            for (isz d = D; d < Dj; d++) vp[j * Dj + d] = 0.0f;
        }
        at_product(q, ld, S, D, kt, S, p, Sj);
        for (isz i = 0; i < S; i++) {
            float *row = p + i * Sj;
            if (a->alpha != 1.0f) {
                const float al = a->alpha;
                PD_SIMD for (isz j = 0; j < S; j++) row[j] *= al;
            }
            sm_any(row, row, S);
        }
        at_product(p, Sj, S, S, vp, D, a->out + b * S * H * D + h * D, H * D);
    }
    free(kt);
}


PD_VERSIONS(ln_task)
PD_VERSIONS(sm_task)
PD_VERSIONS(at_task)

PD_HIDDEN PyObject *py_layer_norm(PyObject *self, PyObject *args) {
    PyObject *xo, *so, *bo, *yo, *mo, *vo, *ro = Py_None;
    isz rows, cols;
    ln_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO(nn)f|O", &xo, &so, &bo, &yo, &mo, &vo, &rows, &cols, &a.eps, &ro))
        return NULL;
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
    a.res = ro == Py_None ? NULL : bufs_take(&bs, ro, 0, rows * cols, "layer_norm residual");
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

PD_HIDDEN PyObject *py_attention(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *oo;
    isz B;
    at_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nnnn)f", &xo, &oo, &B, &a.S, &a.H, &a.D, &a.alpha)) return NULL;
    if (B < 0 || a.S <= 0 || a.H <= 0 || a.D <= 0) {
        PyErr_SetString(PyExc_ValueError, "attention: bad shape");
        return NULL;
    }
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, B * a.S * 3 * a.H * a.D, "attention x");
    a.out = bufs_take(&bs, oo, 1, B * a.S * a.H * a.D, "attention out");
    if (bs.failed) return NULL;
    const isz items = B * a.H;
    Py_BEGIN_ALLOW_THREADS;
    if (items > 1 && items * a.S * a.S * a.D >= AT_PAR_MACS)
        parallel_for(at_task, &a, items, 1);
    else if (items > 0)
        at_task(&a, 0, items);
    Py_END_ALLOW_THREADS;
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
