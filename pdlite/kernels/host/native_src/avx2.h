/* pdlite native host kernels: AVX2 + FMA register tiles of the packed GEMM forms (see common.h, neon.h)
 *
 * AVX2 has 16 registers of 8 floats: the AVX-512 tiles of packed_gemm.c (28 and 24 vectors of 16 floats) would be 56
 * and 48 of them. Here each tile runs as sub-tiles that fit, one after another over the same reduction steps (GCC /
 * Clang vectors of 8 floats: one ymm register each in the AVX2 clones, where these run: g_avx2_tiles):
 *   pk_tile_v8    16 channels x 4 columns, 32 x 2, 64 x 1: 8 accumulators each (a 64-row panel); per reduction
 *                 step 2, 4, 8 loads of weights, 4, 2, 1 broadcasts of columns, 8 FMAs
 *   rows4_v8      4 rows x 16 columns: 8 accumulators; per step 2 loads of columns, 4 broadcasts of the rows'
 *                 values, 8 FMAs
 * and the tiles' epilogues on rows in memory (pw_rows_out; packed_gemm.c's pk_write_t8).
 * Each output is one fused multiply-add per reduction step, k ascending, as in the AVX-512 and NEON tiles: the same
 * bits (tests/kernels/test_host_native_isa.py). */
#ifndef PD_NATIVE_AVX2_H
#define PD_NATIVE_AVX2_H
#ifdef PD_X86_DISPATCH
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi" /* (pd_v8 values never cross a call: every function here is inlined) */
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* (as above) */
#endif
typedef float pd_v8 __attribute__((vector_size(32)));

typedef int32_t pd_v8i __attribute__((vector_size(32)));
#define PD_EVEN8 0, 2, 4, 6, 8, 10, 12, 14 /* PD_SHUFFLE8(a, b, PD_EVEN8): a[0], a[2], .., b[6] */
#if defined(__clang__)
#define PD_SHUFFLE8(a, b, idx) __builtin_shufflevector(a, b, idx)
#else
#define PD_SHUFFLE8(a, b, idx) __builtin_shuffle(a, b, (pd_v8i){idx})
#endif

PD_INLINE pd_v8 pd_load8(const float *p) {
    pd_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* columns j0 .. j0 + nj - 1 of rows 16g0 .. 16(g0 + ng) - 1 of pk_tile's tile (a: [k][16mv], b: [k*ldb + j], c: [j][64]):
 * nj * 2ng <= 8 accumulators */
PD_INLINE void pk_sub_v8(const int nj, const int ng, int g0, int j0, int lda, isz kc, const float *a, const float *b,
                         isz ldb, float *c, int first, const float *pf, isz pfn) {
    pd_v8 acc[4][8];
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

/* packed_gemm.c's pk_tile (the same arguments; the next block's weights prefetched by the first sub-tile): columns 0-3
 * per group of 16 rows, 4-5 per 32, 6 over the panel, each sub-tile 8 accumulators where the panel allows (the FMA
 * latency of 4 cycles on 2 pipes wants 8 chains; the earlier 4 + 3 columns per group of 16 left 6 on 3 of 7
 * columns: one Zen 5 core, 512x512 3x3 on 7x7 at ~90% of the AVX2 peak; see BENCHMARKS.md "AVX2 + FMA") */
PD_INLINE void pk_tile_v8(const int mv, isz kc, const float *a, const float *b, const isz ldb, float *c, int first,
                          const float *pf, isz pfn) {
    const int lda = 16 * mv;
    for (int g = 0; g < mv; g++) pk_sub_v8(4, 1, g, 0, lda, kc, a, b, ldb, c, first, pf, g == 0 ? pfn : 0);
    for (int g = 0; g < mv; g += 2) {
        if (mv - g >= 2)
            pk_sub_v8(2, 2, g, 4, lda, kc, a, b, ldb, c, first, pf, 0);
        else
            pk_sub_v8(2, 1, g, 4, lda, kc, a, b, ldb, c, first, pf, 0);
    }
    switch (mv) {
    case 4: pk_sub_v8(1, 4, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    case 3: pk_sub_v8(1, 3, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    case 2: pk_sub_v8(1, 2, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    default: pk_sub_v8(1, 1, 0, 6, lda, kc, a, b, ldb, c, first, pf, 0); break;
    }
}

/* The wide form's and packed fc's tile: t[i*48 + q] = sum_k a[k*8 + i] * b[k*ldb + q] for i < 8, q < 16nv. Column
 * groups outer: the two row halves of a group read the same line of b per step, the second from L1 (rows outer, a
 * 1x1 conv's columns read in place, a map apart, came back from L2); the first prefetches them PW8_PF steps ahead
 * (the AVX-512 loop's PW_PF: the hardware's prefetchers do not follow that stride) and, where nxt is not NULL, the
 * next tile's line (packed fc: the next W tile, ldb apart, from L3 inside a model). */
#define PW8_PF 6
PD_INLINE void rows4_v8(const int nv, isz kd, const float *a, const float *b, const isz ldb, float *t,
                        const float *nxt) {
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
                for (int h = 0; h < 2; h++) memcpy(t + (r + i) * 48 + s * 16 + h * 8, &acc[i][h], sizeof(pd_v8));
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
