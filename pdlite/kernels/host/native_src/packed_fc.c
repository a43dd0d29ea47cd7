/* pdlite native host kernels: packed_fc, fc on the wide register tile of packed_gemm.c (see common.h).
 * Split from packed_gemm.c (one module per form, none over ~600 lines); packed.h holds the tile shape both use. */
#include "common.h"
#include "neon.h"   /* aarch64: the tile as NEON sub-tiles (g_neon) */
#include "avx2.h"   /* x86-64: the tile as AVX2 sub-tiles (g_avx2_tiles) */
#include "packed.h" /* PW_MR, PW_NR */

/* fc on the wide form's register tile: out (M, N) = act(x (M, K) @ W (K, N) + bias (N)), W packed once
 * (pack_fc_weights) as [column tile][K][48] (zeros past N), x packed per call in panels of 8 rows, [panel][K][8]
 * (zeros past M): per reduction step 3 vector loads of W's tile (contiguous), 8 broadcasts of x's rows, 24 FMAs.
 * The BLAS NumPy ships ran the transformer's (128 x 128) @ (128 x 512) at 77 GFLOP/s on one Xeon (Emerald
 * Rapids) core. Items: (column tile, block of rows: fc_blocks), column tile major. */
#define FC_RB 32 /* rows per item: 4 panels */
/* Products of fewer multiply-adds (M * K * N) run on the calling thread: the pool's hand-off and wait cost ~1.9 us
 * (Zen 5, 2 threads, the other CPU free), what the second thread saves on ~0.26 M multiply-adds (~3.7 us on one
 * core); measured (benchmarks/fc_small_m.py) 32 x 128 x 128 (0.52 M) 6.7 -> 5.2 us, 32 x 256 x 96 9.1 -> 6.7 us at 2
 * threads. x's panels are packed on the calling thread below FC_PACK_PAR_FLOATS (a copy of M * K floats, ~2 us at
 * 64 K). Same sums either way: each output one item's. */
#define FC_PAR_MACS (3 << 17)
#define FC_PACK_PAR_FLOATS (1 << 16)
#define FC_MIN_ITEMS 8 /* items the pool gets at least, where the rows allow (fc_blocks) */

typedef struct {
    const float *x, *w, *bias;
    float *xp, *out;
    isz M, K, N, panels, rbp, rblocks, ntiles; /* rbp: panels per row block (FC_RB / PW_MR, fewer: fc_blocks) */
    act_t act;
} fc_args;

/* x's panels [begin, end) into xp */
PD_INLINE void fc_pack_task_impl(void *vctx, isz begin, isz end) {
    const fc_args *a = (const fc_args *)vctx;
    for (isz p = begin; p < end; p++) {
        float *d = a->xp + p * a->K * PW_MR;
        const isz r0 = p * PW_MR, rows = a->M - r0 < PW_MR ? a->M - r0 : PW_MR;
        for (isz k = 0; k < a->K; k++) {
            for (isz i = 0; i < rows; i++) d[k * PW_MR + i] = a->x[(r0 + i) * a->K + k];
            for (isz i = rows; i < PW_MR; i++) d[k * PW_MR + i] = 0.0f;
        }
    }
}

PD_INLINE void fc_task_impl(void *vctx, isz begin, isz end) {
    const fc_args *a = (const fc_args *)vctx;
    const int in_regs = act_in_regs(&a->act);
    for (isz it = begin; it < end; it++) {
        const isz nt = it / a->rblocks, rb = it % a->rblocks;
        const isz n0 = nt * PW_NR, cols = a->N - n0 < PW_NR ? a->N - n0 : PW_NR;
        const float *wt = a->w + nt * a->K * PW_NR;
        pd_v16 bv[3] = {{0}, {0}, {0}};
        if (a->bias) {
            float t[PW_NR] = {0};
            memcpy(t, a->bias + n0, (size_t)cols * sizeof(float));
            for (int v = 0; v < 3; v++) memcpy(&bv[v], t + v * 16, sizeof(pd_v16));
        }
        /* the W tile the next item reads, prefetched into L2 by this item's first panel (a model's fc weights
         * come from L3: their tiles otherwise stall the first panel over them) */
        const float *nw = it + 1 < end && (it + 1) / a->rblocks != nt ? wt + a->K * PW_NR : NULL;
        const isz p0 = rb * a->rbp;
        for (isz p = p0; p < a->panels && p < p0 + a->rbp; p++) {
            const float *xp = a->xp + p * a->K * PW_MR;
            const isz r0 = p * PW_MR, rows = a->M - r0 < PW_MR ? a->M - r0 : PW_MR;
            for (isz i = 0; i < rows; i++) /* this panel's output lines, for writing */
                for (int v = 0; v < 3; v++) __builtin_prefetch(a->out + (r0 + i) * a->N + n0 + v * 16, 1, 3);
#if defined(PD_X86_DISPATCH)
            if (g_avx2_tiles) { /* the epilogue on the rows in memory (as pw_rows_out, bias per column here) */
                float t[PW_MR * PW_NR];
                /* a last tile of at most 32 columns (N = 128: 3 tiles of 48, 16 zero columns) as two of 16: the same
                 * sums per output, 1/3 fewer multiply-adds on it */
                rows4_v8(cols <= 32 ? 2 : 3, a->K, xp, wt, PW_NR, t, nw && p == p0 ? nw : NULL, NULL);
                for (isz i = 0; i < rows; i++) {
                    float *o = a->out + (r0 + i) * a->N + n0;
                    if (a->bias) {
                        PD_SIMD for (isz q = 0; q < cols; q++) o[q] = t[i * PW_NR + q] + a->bias[n0 + q];
                    } else {
                        memcpy(o, t + i * PW_NR, (size_t)cols * sizeof(float));
                    }
                    bias_act_copy(o, o, cols, 0.0f, 0, &a->act);
                }
                continue;
            }
#endif
            pd_v16 acc[PW_MR][3];
            for (int i = 0; i < PW_MR; i++)
                for (int v = 0; v < 3; v++) acc[i][v] = (pd_v16){0};
            isz kd = a->K;
#if defined(__aarch64__)
            if (g_neon) {
                float t[PW_MR * PW_NR];
                rows8_neon(3, kd, xp, wt, PW_NR, t);
                memcpy(acc, t, sizeof(t));
                kd = 0; /* (the loop below has nothing left to do) */
            }
#endif
            for (isz k = 0; k < kd; k++) {
                if (nw && p == p0)
                    for (int v = 0; v < 3; v++) __builtin_prefetch(nw + k * PW_NR + v * 16, 0, 2);
                pd_v16 wv[3];
                for (int v = 0; v < 3; v++) memcpy(&wv[v], wt + k * PW_NR + v * 16, sizeof(pd_v16));
                for (int i = 0; i < PW_MR; i++) {
                    const float xi = xp[k * PW_MR + i];
                    for (int v = 0; v < 3; v++) acc[i][v] += wv[v] * xi;
                }
            }
            for (isz i = 0; i < rows; i++) {
                float *o = a->out + (r0 + i) * a->N + n0;
                for (int v = 0; v < 3; v++) {
                    if (a->bias) acc[i][v] += bv[v];
                    if (in_regs) bias_act_v16(&acc[i][v], 0.0f, 0, &a->act);
                }
                if (cols == PW_NR) {
                    for (int v = 0; v < 3; v++) memcpy(o + v * 16, &acc[i][v], sizeof(pd_v16));
                } else {
                    float t[PW_NR];
                    for (int v = 0; v < 3; v++) memcpy(t + v * 16, &acc[i][v], sizeof(pd_v16));
                    memcpy(o, t, (size_t)cols * sizeof(float));
                }
                if (!in_regs) bias_act_copy(o, o, cols, 0.0f, 0, &a->act);
            }
        }
    }
}

PD_VERSIONS(fc_pack_task)
PD_VERSIONS(fc_task)

/* The row blocks: FC_RB rows, or halved (down to one panel) until the items number FC_MIN_ITEMS: the encoder's
 * 32 tokens through a 512 -> 128 fc were 3 column tiles, one item each, 2 and 1 per thread at 2 threads; in blocks of
 * 8 rows, 12 items, 6 each. A W tile is then read once per block (from L1 / L2 after the first). The split depends on
 * the shape only, and each output is one item's sum in the same order: the same bits at any thread count. */
static void fc_blocks(fc_args *a) {
    a->rbp = FC_RB / PW_MR;
    while (a->rbp > 1 && a->ntiles * ((a->panels + a->rbp - 1) / a->rbp) < FC_MIN_ITEMS) a->rbp /= 2;
    a->rblocks = (a->panels + a->rbp - 1) / a->rbp;
}

PD_HIDDEN PyObject *py_packed_fc(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *wo, *bo, *oo, *ap;
    fc_args a;
    int act;
    (void)self;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, "OOOO(nnn)iO", &xo, &wo, &bo, &oo, &a.M, &a.K, &a.N, &act, &ap)) return NULL;
    if (a.M < 0 || a.K <= 0 || a.N <= 0) {
        PyErr_SetString(PyExc_ValueError, "packed_fc: bad shape");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    a.ntiles = (a.N + PW_NR - 1) / PW_NR;
    a.panels = (a.M + PW_MR - 1) / PW_MR;
    fc_blocks(&a);
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.M * a.K, "packed_fc input");
    a.w = bufs_take(&bs, wo, 0, a.ntiles * PW_NR * a.K, "packed_fc packed weights");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.N, "packed_fc bias");
    a.out = bufs_take(&bs, oo, 1, a.M * a.N, "packed_fc output");
    if (bs.failed) return NULL;
    int ok = 1;
    if (a.M > 0) {
        Py_BEGIN_ALLOW_THREADS;
        a.xp = (float *)pd_alloc64((size_t)(a.panels * PW_MR * a.K) * sizeof(float));
        if (a.xp) {
            const int par = a.M * a.K * a.N >= FC_PAR_MACS;
            if (par && a.panels * PW_MR * a.K >= FC_PACK_PAR_FLOATS)
                parallel_for(fc_pack_task, &a, a.panels, 1);
            else
                fc_pack_task(&a, 0, a.panels);
            if (par)
                parallel_for(fc_task, &a, a.ntiles * a.rblocks, 1);
            else
                fc_task(&a, 0, a.ntiles * a.rblocks);
            free(a.xp);
        } else {
            ok = 0;
        }
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    if (!ok) return PyErr_NoMemory();
    return pd_done(pd_fail0);
}
