/* pdlite native host kernels: bias + activation in place, and a sum + activation (see common.h) */
/* No floating-point exception flags are read, so selects may be computed on every lane (the same values): without
 * this GCC 12 left the activations' exp / erf (gelu, ...) loops scalar in the AVX2 clones ("control flow in loop"; AVX-512's masked lanes
 * vectorised them). Per file, not for the whole build: it slowed PP-OCRv4 det's convs by ~1.5% on AVX-512. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "common.h"

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


PD_VERSIONS(ba_task)

PD_HIDDEN PyObject *py_bias_act(PyObject *self, PyObject *args) {
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
    pd_bufs bs = {0};
    a.out = bufs_take(&bs, oo, 1, n * c * inner, "bias_act output");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, c, "bias_act bias");
    if (bs.failed) return NULL;
    a.C = c;
    a.inner = inner;
    if (inner > 0 && (a.bias != NULL || a.act.kind != ACT_NONE)) {
        const isz rows = n * c, grain = row_grain(rows, inner);
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(ba_task, &a, rows, grain);
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ */
/* out = act(x + y), same shapes (a residual add and its relu): one pass on the pool, where NumPy's    */
/* add runs on one thread and the activation after it is a second pass                              */
/* ------------------------------------------------------------------------------------------------ */

#define AA_BLOCK 4096 /* floats per item: the sum is still in L1 when the activation runs over it */

typedef struct {
    const float *x, *y;
    float *out;
    isz n;
    act_t act;
} aa_args;

/* blocks [begin, end) of AA_BLOCK floats: the sum as NumPy's float32 add, then bias_act_copy's activation */
PD_INLINE void aa_task_impl(void *vctx, isz begin, isz end) {
    const aa_args *a = (const aa_args *)vctx;
    for (isz b = begin; b < end; b++) {
        const isz i0 = b * AA_BLOCK, m = a->n - i0 < AA_BLOCK ? a->n - i0 : AA_BLOCK;
        const float *restrict x = a->x + i0, *restrict y = a->y + i0;
        float *restrict o = a->out + i0;
        PD_SIMD for (isz i = 0; i < m; i++) o[i] = x[i] + y[i];
        if (a->act.kind != ACT_NONE) bias_act_copy(o, o, m, 0.0f, 0, &a->act);
    }
}

PD_VERSIONS(aa_task)

PD_HIDDEN PyObject *py_add_act(PyObject *self, PyObject *args) {
    PyObject *xo, *yo, *oo, *ap;
    isz n;
    int act;
    aa_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOniO", &xo, &yo, &oo, &n, &act, &ap)) return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "add_act: bad size");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, n, "add_act x");
    a.y = bufs_take(&bs, yo, 0, n, "add_act y");
    a.out = bufs_take(&bs, oo, 1, n, "add_act output");
    if (bs.failed) return NULL;
    a.n = n;
    const isz blocks = (n + AA_BLOCK - 1) / AA_BLOCK;
    if (blocks > 0) {
        /* one contiguous half per thread on 2 (a stream each); small tensors on one thread (waking a worker
         * costs more than the work) */
        const isz grain = n < PD_ONE_THREAD_FLOATS ? blocks : (blocks + g_threads - 1) / g_threads;
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(aa_task, &a, blocks, grain);
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------------ */
/* out[r, :] = x[r, :] * s[r]: a per-(image, channel) scale (squeeze-and-excitation's elementwise_mul of an    */
/* (N, C, H, W) map by its (N, C, 1, 1) gate), where NumPy's broadcasting multiply runs on one thread at about */
/* a quarter of the memory speed                                                                               */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const float *x, *s;
    float *out;
    isz inner;
} mr_args;

PD_INLINE void mr_task_impl(void *vctx, isz begin, isz end) {
    const mr_args *a = (const mr_args *)vctx;
    for (isz r = begin; r < end; r++) {
        const float *restrict x = a->x + r * a->inner;
        float *restrict o = a->out + r * a->inner;
        const float s = a->s[r];
        PD_SIMD for (isz i = 0; i < a->inner; i++) o[i] = x[i] * s;
    }
}

PD_VERSIONS(mr_task)

PD_HIDDEN void mul_rows_run(const float *x, const float *s, float *out, isz rows, isz inner) {
    mr_args a = {x, s, out, inner};
    if (rows > 0 && inner > 0) parallel_for(mr_task, &a, rows, row_grain(rows, inner));
}

PD_HIDDEN PyObject *py_mul_rows(PyObject *self, PyObject *args) {
    PyObject *xo, *so, *oo;
    isz rows, inner;
    mr_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO(nn)", &xo, &so, &oo, &rows, &inner)) return NULL;
    if (rows < 0 || inner < 0) {
        PyErr_SetString(PyExc_ValueError, "mul_rows: bad shape");
        return NULL;
    }
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, rows * inner, "mul_rows x");
    a.s = bufs_take(&bs, so, 0, rows, "mul_rows scales");
    a.out = bufs_take(&bs, oo, 1, rows * inner, "mul_rows output");
    if (bs.failed) return NULL;
    a.inner = inner;
    Py_BEGIN_ALLOW_THREADS;
    mul_rows_run(a.x, a.s, a.out, rows, inner);
    Py_END_ALLOW_THREADS;
    bufs_release(&bs);
    Py_RETURN_NONE;
}
