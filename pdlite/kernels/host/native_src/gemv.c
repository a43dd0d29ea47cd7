/* pdlite native host kernels: matrix-vector products (see common.h)
 *
 * packed_gemv: out (M, N) = act(x (M, K) @ W (K, N) + bias (N)) for a few rows x (native.py GEMV_MAX_ROWS: the
 * batch-1 fc, a squeeze-and-excitation's 1x1 convs on 1x1 maps), W packed once as packed_fc packs it
 * (pack_fc_weights: [tile of 48 columns][K][48], zeros past N). Each weight is used once per row, so a row's product
 * runs at the speed W streams in (MobileNetV3's 576 -> 1024 fc: 2.4 MB, from L3; its SE convs 0.3 MB, from L2):
 * the BLAS's and packed_fc's GEMM forms (8-row panels of x, 7 of them zeros) spent 104 and ~110 us on that fc, 18 us
 * on each 576 -> 144 SE conv (~20 GB/s). Here per reduction step of a tile: its 48 weights as full-width loads
 * (3 of 16 floats with AVX-512, 6 of 8 with AVX2, 12 of 4 with NEON and the x86 baseline), one broadcast of x[k],
 * one FMA per vector into its own accumulator; GV_NT tiles at once (two contiguous streams of W, 6, 12 or 24
 * accumulators: independent chains that hide the FMA latency; one tile, 12, on SSE's 16 registers).
 * Sums: each output is one (fused, where the ISA has FMA) multiply-add per reduction step, k ascending, from 0, then
 * + bias, then the activation (bias_act_copy): packed_fc's operations in its order, so the same bits as packed_fc on
 * the same ISA (tests/kernels/test_host_gemv.py).
 * Items: tiles, split over the pool by parallel_ranges when W holds at least GV_PAR_FLOATS floats (each thread a
 * contiguous stretch of W, the same one from call to call: a stretch that fits its L2 stays there between runs),
 * else run on the calling thread; each item runs every row of x over its tiles (the tiles from L1 / L2 after the
 * first row). */
#include "common.h"
#include "avx2.h" /* pd_v8 */

#define GV_NR 48 /* columns per tile: packed_gemm.c PW_NR, native.py FC_TILE */
#define GV_NT 2  /* tiles per pass */
#define GV_PAR_FLOATS (1 << 16) /* weights from which the pool splits the tiles (256 KiB) */

/* AVX2's vector of 8 floats (avx2.h's pd_v8), and 4 (SSE, NEON): GCC lowers a vector wider than the target's
 * registers through the stack (aarch64, 8-float vectors: accumulators spilled, x[k] splatted through memory each
 * step) */
typedef float gv_v4 __attribute__((vector_size(16)));

typedef struct {
    const float *x, *w, *bias;
    float *out;
    isz M, K, N, ntiles;
    act_t act;
} gv_args;

/* o[q] = act(t[q] + bias[q]) for q < cols: packed_fc's epilogue, in bias_act_copy's operations */
PD_INLINE void gv_out(const gv_args *a, const float *t, isz m, isz n0) {
    const isz cols = a->N - n0 < GV_NR ? a->N - n0 : GV_NR;
    float *o = a->out + m * a->N + n0;
    if (a->bias) {
        const float *b = a->bias + n0;
        PD_SIMD for (isz q = 0; q < cols; q++) o[q] = t[q] + b[q];
    } else {
        memcpy(o, t, (size_t)cols * sizeof(float));
    }
    if (a->act.kind != ACT_NONE) bias_act_copy(o, o, cols, 0.0f, 0, &a->act);
}

/* name(a, t0, nt): every row of x times the nt tiles from tile t0, on vectors V of L floats (48 / L a tile) */
#define GV_TILES(name, V, L)                                                                                       \
    PD_INLINE void name(const gv_args *a, isz t0, const int nt) {                                                 \
        const isz K = a->K;                                                                                        \
        const float *w = a->w + t0 * K * GV_NR;                                                                    \
        for (isz m = 0; m < a->M; m++) {                                                                           \
            const float *x = a->x + m * K;                                                                         \
            V acc[GV_NT][GV_NR / L];                                                                               \
            for (int t = 0; t < nt; t++)                                                                           \
                for (int v = 0; v < GV_NR / L; v++) acc[t][v] = (V){0};                                            \
            for (isz k = 0; k < K; k++) {                                                                          \
                const float xk = x[k];                                                                             \
                for (int t = 0; t < nt; t++)                                                                       \
                    for (int v = 0; v < GV_NR / L; v++) {                                                          \
                        V wv;                                                                                      \
                        memcpy(&wv, w + (t * K + k) * GV_NR + v * L, sizeof(wv));                                  \
                        acc[t][v] += wv * xk;                                                                      \
                    }                                                                                              \
            }                                                                                                      \
            for (int t = 0; t < nt; t++) {                                                                         \
                float o[GV_NR];                                                                                    \
                memcpy(o, acc[t], sizeof(o));                                                                      \
                gv_out(a, o, m, (t0 + t) * GV_NR);                                                                 \
            }                                                                                                      \
        }                                                                                                          \
    }
GV_TILES(gv_tiles_v16, pd_v16, 16) /* AVX-512 */
GV_TILES(gv_tiles_v8, pd_v8, 8)    /* AVX2 */
GV_TILES(gv_tiles_v4, gv_v4, 4)    /* NEON (24 of its 32 registers accumulate), the x86 baseline */

/* tiles [begin, end): GV_NT at a time, then the odd one */
PD_INLINE void gv_task_impl(void *vctx, isz begin, isz end) {
    const gv_args *a = (const gv_args *)vctx;
    isz t = begin;
    if (g_avx512) {
        for (; t + GV_NT <= end; t += GV_NT) gv_tiles_v16(a, t, GV_NT);
        for (; t < end; t++) gv_tiles_v16(a, t, 1);
    } else if (g_avx2_tiles) {
        for (; t + GV_NT <= end; t += GV_NT) gv_tiles_v8(a, t, GV_NT);
        for (; t < end; t++) gv_tiles_v8(a, t, 1);
    } else {
#if defined(__aarch64__)
        for (; t + GV_NT <= end; t += GV_NT) gv_tiles_v4(a, t, GV_NT); /* 24 accumulators of NEON's 32 registers */
#endif
        for (; t < end; t++) gv_tiles_v4(a, t, 1); /* (SSE: 12 of its 16) */
    }
}

PD_VERSIONS(gv_task)

PD_HIDDEN PyObject *py_packed_gemv(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *wo, *bo, *oo, *ap;
    gv_args a;
    int act;
    (void)self;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, "OOOO(nnn)iO", &xo, &wo, &bo, &oo, &a.M, &a.K, &a.N, &act, &ap)) return NULL;
    if (a.M < 0 || a.K <= 0 || a.N <= 0) {
        PyErr_SetString(PyExc_ValueError, "packed_gemv: bad shape");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    a.ntiles = (a.N + GV_NR - 1) / GV_NR;
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.M * a.K, "packed_gemv input");
    a.w = bufs_take(&bs, wo, 0, a.ntiles * GV_NR * a.K, "packed_gemv packed weights");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.N, "packed_gemv bias");
    a.out = bufs_take(&bs, oo, 1, a.M * a.N, "packed_gemv output");
    if (bs.failed) return NULL;
    if (a.M > 0) {
        Py_BEGIN_ALLOW_THREADS;
        if (a.ntiles * GV_NR * a.K >= GV_PAR_FLOATS)
            parallel_ranges(gv_task, &a, a.ntiles, GV_NT);
        else
            gv_task(&a, 0, a.ntiles);
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
