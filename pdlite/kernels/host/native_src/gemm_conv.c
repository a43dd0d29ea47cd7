/* pdlite native host kernels: im2col and conv GEMM (see common.h) */
/* No floating-point exception flags are read, so selects may be computed on every lane (the same values): without
 * this GCC 12 left the fused activations' exp / erf loops (fc's gelu on the BLAS path) scalar in the AVX2 clones
 * ("control flow in loop"). Per file, not for the whole build (see norm_softmax.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* im2col                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

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
PD_HIDDEN void *g_sgemm = NULL;
static int g_sgemm_ilp64 = 1;

PD_HIDDEN void sgemm_rm(isz m, isz n, isz k, const float *a, isz lda, const float *b, isz ldb, float *c, isz ldc) {
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
        buf = (float *)pd_scratch((size_t)(a->K * a->cols_per) * sizeof(float));
        if (!buf) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
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


PD_VERSIONS(i2c_task)
PD_VERSIONS(gemm_task)

PD_HIDDEN PyObject *py_im2col(PyObject *self, PyObject *args) {
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
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.N * g->C * g->H * g->W, "im2col input");
    a.cols = bufs_take(&bs, co, 1, a.N * g->C * g->KH * g->KW * g->OH * g->OW, "im2col columns");
    if (bs.failed) return NULL;
    isz rows = a.N * g->C * g->KH * g->KW;
    if (g->OH > 0 && g->OW > 0 && rows > 0) {
            Py_BEGIN_ALLOW_THREADS;
        parallel_for(i2c_task, &a, rows, grain_for(rows, 4));
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
}


PD_HIDDEN PyObject *py_set_sgemm(PyObject *self, PyObject *args) {
    unsigned long long addr;
    int ilp64;
    (void)self;
    if (!PyArg_ParseTuple(args, "Kp", &addr, &ilp64)) return NULL;
    g_sgemm = (void *)(uintptr_t)addr;
    g_sgemm_ilp64 = ilp64;
    Py_RETURN_NONE;
}

PD_HIDDEN PyObject *py_has_sgemm(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyBool_FromLong(g_sgemm != NULL);
}

PD_HIDDEN PyObject *py_conv_gemm(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
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
    pd_bufs bs = {0};
    a.w = bufs_take(&bs, wo, 0, a.G * a.M * a.K, "conv_gemm weights");
    a.x = bufs_take(&bs, xo, 0, xsize, "conv_gemm input");
    if (!bs.failed && a.bias_cols && (a.G != 1 || geo != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "conv_gemm: per-column bias needs one group and no im2col");
        bufs_release(&bs);
        return NULL;
    }
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.bias_cols ? a.L : a.G * a.M, "conv_gemm bias");
    a.out = bufs_take(&bs, oo, 1, a.N * a.G * a.M * a.L, "conv_gemm output");
    if (bs.failed) return NULL;
    gemm_plan(&a);
    if (a.L > 0 && a.N > 0) {
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(gemm_task, &a, a.N * a.G * a.blocks, 1);
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
