/* pdlite native host kernels: AVX2 + FMA register tiles of the packed GEMM forms (see common.h, neon.h)
 *
 * AVX2 has 16 registers of 8 floats: the AVX-512 tiles of packed_gemm.c (28 and 24 vectors of 16 floats) would be 56
 * and 48 of them. Here each tile runs as sub-tiles that fit, one after another over the same reduction steps (GCC /
 * Clang vectors of 8 floats: one ymm register each in the AVX2 clones, where these run: g_avx2_tiles):
 *   pk_tile_v8    32 channels x 3 columns (16 x 6 on an odd group of 16), then 64 x 1: 12 accumulators (8 on the
 *                 last column); per reduction step 4 loads of weights and 3 broadcasts of columns for 12 FMAs
 *   rows4_v8      4 rows x 24 columns: 12 accumulators; per step 3 loads of columns, 4 broadcasts of the rows'
 *                 values, 12 FMAs (4 x 16, 8 accumulators, on partial tiles)
 * and the tiles' epilogues: in registers (pd_v8_out) or, on partial tiles and the other activations, on rows in memory
 * (pw_rows_out).
 * Each output is one fused multiply-add per reduction step, k ascending, as in the AVX-512 and NEON tiles: the same
 * bits (tests/kernels/test_host_native_isa.py). */
#ifndef PD_NATIVE_AVX2_H
#define PD_NATIVE_AVX2_H
/* The vector of 8 floats and its helpers are on every target (norm_softmax.c's rows, gemv.c's AVX2 tiles): one ymm
 * register in the AVX2 and AVX-512 clones, two of 4 floats on SSE and NEON. The tiles below are x86's. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi" /* (pd_v8 values never cross a call: every function here is inlined) */
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* (as above) */
#endif
typedef float pd_v8 __attribute__((vector_size(32)));

typedef int32_t pd_v8i __attribute__((vector_size(32)));
#define PD_EVEN8 0, 2, 4, 6, 8, 10, 12, 14 /* PD_SHUFFLE8(a, b, PD_EVEN8): a[0], a[2], .., b[6] */
#if defined(__clang__) /* (variadic: idx may arrive as its 8 values, a macro of them expanded by an outer macro) */
#define PD_SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define PD_SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, (pd_v8i){__VA_ARGS__})
#endif

PD_INLINE pd_v8 pd_load8(const float *p) {
    pd_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

#ifdef PD_X86_DISPATCH
/* columns j0 .. j0 + nj - 1 of rows 16g0 .. 16(g0 + ng) - 1 of pk_tile's tile (a: [k][16mv], b: [k*ldb + j], c: [j][64]):
 * nj * 2ng <= 8 accumulators */
PD_INLINE void pk_sub_v8(const int nj, const int ng, int g0, int j0, int lda, isz kc, const float *a, const float *b,
                         isz ldb, float *c, int first, const float *pf, isz pfn) {
    pd_v8 acc[6][8];
    for (int j = 0; j < nj; j++)
        for (int h = 0; h < 2 * ng; h++)
            acc[j][h] = first ? (pd_v8){0} : pd_load8(c + (j0 + j) * 64 + g0 * 16 + h * 8);
    const float *ag = a + g0 * 16, *bj = b + j0;
    for (isz k = 0; k < kc; k++) {
        if (k < pfn) __builtin_prefetch(pf + k * 16, 0, 2);
        pd_v8 av[8];
        for (int h = 0; h < 2 * ng; h++) av[h] = pd_load8(ag + k * lda + h * 8);
        for (int j = 0; j < nj; j++) {
            const float bv = bj[k * ldb + j];
            for (int h = 0; h < 2 * ng; h++) acc[j][h] += av[h] * bv;
        }
    }
    for (int j = 0; j < nj; j++)
        for (int h = 0; h < 2 * ng; h++) memcpy(c + (j0 + j) * 64 + g0 * 16 + h * 8, &acc[j][h], sizeof(pd_v8));
}

/* packed_gemm.c's pk_tile (the same arguments; the next block's weights prefetched by the first sub-tile): columns 0-2
 * and 3-5 per group of 32 rows (0-5 on a last group of 16), 12 accumulators each, then column 6 over the panel (the
 * FMA latency of 4 cycles on 2 pipes wants at least 8 chains; 12 leave room for the loads: the earlier sub-tiles of 8,
 * 4 + 2 + 1 columns, were 1.10x the time on MobileNetV2's 7x7 1x1 convs, one Zen 5 core, noisy; BENCHMARKS.md
 * "AVX2 tiles of 12 accumulators") */
PD_INLINE void pk_tile_v8(const int mv, isz kc, const float *a, const float *b, const isz ldb, float *c, int first,
                          const float *pf, isz pfn) {
    const int lda = 16 * mv;
    for (int g = 0; g < mv; g += 2) {
        if (mv - g >= 2) {
            pk_sub_v8(3, 2, g, 0, lda, kc, a, b, ldb, c, first, pf, g == 0 ? pfn : 0);
            pk_sub_v8(3, 2, g, 3, lda, kc, a, b, ldb, c, first, pf, 0);
        } else {
            pk_sub_v8(6, 1, g, 0, lda, kc, a, b, ldb, c, first, pf, g == 0 ? pfn : 0);
        }
    }
    switch (mv) {
    case 4: pk_sub_v8(1, 4, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    case 3: pk_sub_v8(1, 3, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    case 2: pk_sub_v8(1, 2, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    default: pk_sub_v8(1, 1, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    }
}

/* *v = act(*v), bias_act_v16's activations (act_in_regs) on 8 lanes, its operations in its order: the same bits */
PD_INLINE void act_v8(pd_v8 *v, const act_t *act) {
    pd_v8 x = *v;
    PD_ACT_IN_REGS(pd_v8, pd_v8i, x, act);
    *v = x;
}

/* Where rows4_v8 writes: rows of the output (o, ldo apart; those from `rows` on left out), bias per row, residual
 * (res, ldo apart, or NULL) and an activation of act_in_regs applied to the vectors as bias_res_act_v16 does (so the
 * same bits as pw_rows_out); the tile's columns must all be outputs */
typedef struct {
    float *o;
    isz ldo, rows;
    const float *bias, *res;
    const act_t *act;
} pd_v8_out;

/* row i, columns q .. q + 7 of rows4_v8's tile (*v): to t (out NULL: [row][48]) or to out's row */
PD_INLINE void v8_put(const pd_v8 *v, int i, int q, float *t, const pd_v8_out *out) {
    if (!out) {
        memcpy(t + i * 48 + q, v, sizeof *v);
        return;
    }
    pd_v8 x = *v;
    if (i >= out->rows) return;
    if (out->bias) x += out->bias[i];
    if (out->res) x += pd_load8(out->res + i * out->ldo + q);
    act_v8(&x, out->act);
    memcpy(out->o + i * out->ldo + q, &x, sizeof x);
}

/* The wide form's and packed fc's tile: t[i*48 + q] = sum_k a[k*8 + i] * b[k*ldb + q] for i < 8, q < 16nv (or, `out`
 * not NULL, with its epilogue straight to the output rows: pd_v8_out). Column
 * groups outer: the two row halves of a group read the same line of b per step, the second from L1 (rows outer, a
 * 1x1 conv's columns read in place, a map apart, came back from L2); the first prefetches them PW8_PF steps ahead
 * (the AVX-512 loop's PW_PF: the hardware's prefetchers do not follow that stride) and, where nxt is not NULL, the
 * next tile's line (packed fc: the next W tile, ldb apart, from L3 inside a model). */
#define PW8_PF 6
PD_INLINE void rows4_v8(const int nv, isz kd, const float *a, const float *b, const isz ldb, float *t,
                        const float *nxt, const pd_v8_out *out) {
    if (nv == 3) { /* 4 rows x 24 columns: 12 accumulators (0.89x-0.95x the time of the 4 x 16 sub-tiles below on
                    * MobileNetV2's 1x1 convs on 14x14 to 112x112, the epilogue in registers; one Zen 5 core, noisy) */
        for (int s = 0; s < 2; s++)
            for (int r = 0; r < 8; r += 4) {
                pd_v8 acc[4][3];
                for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = acc[i][2] = (pd_v8){0};
                const float *bs = b + s * 24, *ar = a + r;
                for (isz k = 0; k < kd; k++) {
                    if (r == 0) {
                        if (k + PW8_PF < kd) { /* (24 floats: on two lines) */
                            __builtin_prefetch(bs + (k + PW8_PF) * ldb, 0, 3);
                            __builtin_prefetch(bs + (k + PW8_PF) * ldb + 23, 0, 3);
                        }
                        if (nxt) __builtin_prefetch(nxt + k * ldb + s * 24, 0, 2);
                    }
                    const pd_v8 b0 = pd_load8(bs + k * ldb), b1 = pd_load8(bs + k * ldb + 8),
                                b2 = pd_load8(bs + k * ldb + 16);
                    for (int i = 0; i < 4; i++) {
                        const float av = ar[k * 8 + i];
                        acc[i][0] += b0 * av;
                        acc[i][1] += b1 * av;
                        acc[i][2] += b2 * av;
                    }
                }
                for (int i = 0; i < 4; i++)
                    for (int h = 0; h < 3; h++) v8_put(&acc[i][h], r + i, s * 24 + h * 8, t, out);
            }
        return;
    }
    for (int s = 0; s < nv; s++)
        for (int r = 0; r < 8; r += 4) { /* rows r .. r + 3, columns 16s .. 16s + 15 */
            pd_v8 acc[4][2];
            for (int i = 0; i < 4; i++) acc[i][0] = acc[i][1] = (pd_v8){0};
            const float *bs = b + s * 16, *ar = a + r;
            for (isz k = 0; k < kd; k++) {
                if (r == 0) {
                    if (k + PW8_PF < kd) __builtin_prefetch(bs + (k + PW8_PF) * ldb, 0, 3);
                    if (nxt) __builtin_prefetch(nxt + k * ldb + s * 16, 0, 2);
                }
                const pd_v8 b0 = pd_load8(bs + k * ldb), b1 = pd_load8(bs + k * ldb + 8);
                for (int i = 0; i < 4; i++) {
                    const float av = ar[k * 8 + i];
                    acc[i][0] += b0 * av;
                    acc[i][1] += b1 * av;
                }
            }
            for (int i = 0; i < 4; i++)
                for (int h = 0; h < 2; h++) v8_put(&acc[i][h], r + i, s * 16 + h * 8, t, out);
        }
}

/* The epilogue of a tile computed into t (rows ldt apart): o[i*ldo + q] = act(t[i*ldt + q] + bias[i] (+ res[i*ldo +
 * q])) for i < rows, q < cols, in bias_res_act_copy's loops (vectorised by the compiler, 8 floats a step here: the same
 * operations in the same order as bias_act_v16 / bias_res_act_v16, so the same bits). Not the 16-float vector
 * epilogue of the AVX-512 tiles: GCC lowers its compares and masks to scalar code in the AVX2 clones, where it took
 * most of the time of MobileNet's 1x1 convs (short reductions): MobileNetV2 at AVX2, 1 thread, 2.9x the time of the
 * im2col + OpenBLAS path with it, perf record: 66% in pw_task, mostly scalar moves to the stack. */
PD_INLINE void pw_rows_out(const float *t, isz ldt, float *o, isz ldo, isz rows, isz cols, const float *bias,
                           const float *res, const act_t *act) {
    for (isz i = 0; i < rows; i++)
        bias_res_act_copy(o + i * ldo, t + i * ldt, cols, bias ? bias[i] : 0.0f, bias != NULL,
                          res ? res + i * ldo : NULL, act);
}
#endif /* PD_X86_DISPATCH */
#endif /* PD_NATIVE_AVX2_H */
