/* pdlite native host kernels: conv as a GEMM with pre-packed weights and its own register-tiled kernel (see
 * common.h)
 *
 * out[n] (M, L) = act(W (M, K) @ B[n] (K, L) + bias), B[n] the image itself (1x1, stride 1, no padding) or its
 * im2col columns. Vectorised along the output channels: a register tile is 64 channels (4 vectors of 16) by
 * PK_NR = 7 columns, 28 accumulators, per step of the reduction 4 vector loads of weights, 7 broadcasts of
 * columns, 28 FMAs. The columns' count (L = OH*OW) is free: 7x7 and 14x14 maps, where a BLAS vectorised along
 * L wastes much of its tiles, run as fast as large ones (measured on one Zen 4 core, AVX-512: ~115 GF/s on
 * 512x4608x49 where NumPy's OpenBLAS sgemm gives 72).
 *
 * Weights are packed once (pdlite/kernels/host/native.py `pack_weights`): rows padded with zeros to a multiple of
 * 16, in panels of 64 rows (the last one 16, 32, 48 or 64), panel p at p*64*K, laid out [K][rows of the panel],
 * K tap-major (kernel tap (i, j), then input channel): a tile leaves out the kernel rows that read only padding
 * for its output rows (pk_tile_k; ResNet18's 512x512 3x3 on 7x7, one Zen 4 core, weights from memory: 2.46 ->
 * 2.27 ms, 2/21 of its products skipped).
 * Columns are packed per call (pk_pack_task), for each image [tile][K][7] (7 consecutive columns per tile, zeros
 * past L), gathered from the image directly (no columns matrix); a 1x1 stride-1 conv whose L is a multiple of 7
 * reads them in place instead (pk_args.inplace). Then (pk_gemm_task) each (image, chunk of
 * PK_CHUNK tiles, panel) accumulates its block over K in steps of PK_KC (weights block in L1, the next one
 * prefetched into L2) into a buffer [column][64] and writes it out transposed, with bias and activation (with AVX-512 16x16 blocks
 * at a time through in-register transposes, bias and relu / relu6 on the vectors: 512x512 on 14x14, one Zen 4
 * core, 0.98 -> 0.95 ms; 256->512 0.52 -> 0.49).
 * The wide form (pw_*, below) takes large maps. The reduction order (k ascending, one FMA per k) does not depend
 * on the thread count. */
#include "common.h"
#include "neon.h" /* aarch64: the tiles below as NEON sub-tiles (g_neon) */
#include "avx2.h" /* x86-64: the tiles below as AVX2 sub-tiles (g_avx2_tiles) */

#define PK_NR 7     /* output columns per register tile */
#define PK_MR 64    /* output channels per weight panel (4 vectors of 16 floats) */
#define PK_KC 128   /* reduction steps per pass over a block (its 32 KiB of weights fit L1; with the prefetch below,
                     * 0.95x-0.96x the time of 256 on 7x7 and 14x14 maps, one Xeon core) */
#define PK_CHUNK 32 /* tiles per column chunk (224 columns: its buffer is 56 KiB) */

/* c[j*64 + 16v + i] (+)= sum_k a[k*16mv + 16v + i] * b[k*ldb + j] for j < 7, v < mv, i < 16 (ldb: 7 for packed
 * columns, L for a 1x1 conv's columns read in place); `first`: c starts at 0.
 * Steps k < pfn also prefetch the cache line at pf + 16k into L2 (the next block's weights). */
PD_INLINE void pk_tile(const int mv, isz kc, const float *a, const float *b, const isz ldb, float *c, int first,
                       const float *pf, isz pfn) {
    pd_v16 acc[PK_NR][4];
    for (int j = 0; j < PK_NR; j++)
        for (int v = 0; v < mv; v++) {
            if (first)
                acc[j][v] = (pd_v16){0};
            else
                memcpy(&acc[j][v], c + j * PK_MR + v * 16, sizeof(pd_v16));
        }
    for (isz k = 0; k < kc; k++) {
        if (k < pfn) __builtin_prefetch(pf + k * 16, 0, 2);
        pd_v16 av[4];
        for (int v = 0; v < mv; v++) memcpy(&av[v], a + (k * mv + v) * 16, sizeof(pd_v16));
        for (int j = 0; j < PK_NR; j++) {
            const float bj = b[k * ldb + j];
            for (int v = 0; v < mv; v++) acc[j][v] += av[v] * bj;
        }
    }
    for (int j = 0; j < PK_NR; j++)
        for (int v = 0; v < mv; v++) memcpy(c + j * PK_MR + v * 16, &acc[j][v], sizeof(pd_v16));
}

typedef struct {
    const float *x, *w, *bias;
    const float *res; /* the residual added before the activation (out's layout), or NULL */
    float *bp, *out;
    isz N, M, K, L;
    isz tiles, chunks, panels, kblocks;
    isz ctiles; /* tiles per chunk (at most PK_CHUNK) */
    isz group; /* the wide form: tiles per item */
    int pointwise; /* B[n] is the image itself */
    int inplace; /* the small form reads the image's columns in place (pointwise, L a multiple of PK_NR) */
    conv_geo geo;
    act_t act;
} pk_args;

/* columns of (image, chunk, block of PK_KC rows) items [begin, end) into bp. 1x1 stride 1: PK_PB reduction rows at
 * a time, read in place, each tile's PK_PB x 7 floats written as one contiguous run (a tile's rows are consecutive in
 * bp; row by row, each row's 7 floats per tile went to addresses K * 7 floats apart): one Xeon (Emerald Rapids)
 * core, batch 4, 512 -> 512 on 14x14 2.20 -> 2.07 ms, 1024 -> 1024 on 7x7 2.08 -> 1.96. Others: a row at a time,
 * gathered into `row`, in a loop of their own (in blocks of 16 rows, ResNet18's 3x3 stride-2 convs measured 3-4%
 * slower; one loop for both, its block size 1 for these, 8-15% slower: the 7-float copies lose their fixed
 * stride). */
#define PK_PB 16
PD_INLINE void pk_pack_task_impl(void *vctx, isz begin, isz end) {
    const pk_args *a = (const pk_args *)vctx;
    const conv_geo *g = &a->geo;
    float row[PK_CHUNK * PK_NR];
    for (isz it = begin; it < end; it++) {
        const isz kb = it % a->kblocks, nc = it / a->kblocks, n = nc / a->chunks, t0 = (nc % a->chunks) * a->ctiles;
        const isz k1 = (kb + 1) * PK_KC < a->K ? (kb + 1) * PK_KC : a->K;
        const isz t1 = t0 + a->ctiles < a->tiles ? t0 + a->ctiles : a->tiles;
        const isz q0 = t0 * PK_NR, q1 = t1 * PK_NR < a->L ? t1 * PK_NR : a->L;
        const float *img = a->x + n * g->C * g->H * g->W;
        float *bp = a->bp + n * a->tiles * a->K * PK_NR;
        if (a->pointwise) {
            for (isz k0 = kb * PK_KC; k0 < k1; k0 += PK_PB) {
                const isz nk = k1 - k0 < PK_PB ? k1 - k0 : PK_PB;
                const float *src = img + k0 * a->L + q0; /* row k0 + r at src + r * L */
                for (isz t = t0; t < t1; t++) {
                    float *d = bp + (t * a->K + k0) * PK_NR;
                    const isz qa = t * PK_NR - q0;
                    if ((t + 1) * PK_NR <= q1) {
                        for (isz r = 0; r < nk; r++)
                            for (int j = 0; j < PK_NR; j++) d[r * PK_NR + j] = src[r * a->L + qa + j];
                    } else {
                        for (isz r = 0; r < nk; r++)
                            for (int j = 0; j < PK_NR; j++)
                                d[r * PK_NR + j] = qa + q0 + j < q1 ? src[r * a->L + qa + j] : 0.0f;
                    }
                }
            }
            continue;
        }
        for (isz k = kb * PK_KC; k < k1; k++) { /* gathered columns, a row at a time */
            const isz kk = (k % g->C) * g->KH * g->KW + k / g->C; /* tap-major k as im2col's row (c, tap) */
            im2col_block(g, img, kk, kk + 1, q0, q1, row, q1 - q0);
            for (isz t = t0; t < t1; t++) {
                float *d = bp + (t * a->K + k) * PK_NR;
                const isz qa = t * PK_NR - q0;
                if ((t + 1) * PK_NR <= q1) {
                    for (int j = 0; j < PK_NR; j++) d[j] = row[qa + j];
                } else {
                    for (int j = 0; j < PK_NR; j++) d[j] = qa + q0 + j < q1 ? row[qa + j] : 0.0f;
                }
            }
        }
    }
}

/* The block's rows [m0, m0 + rows) of image n, columns [q0, q1), from the chunk buffer c ([column][64]) to the
 * output rows, 16 rows by 16 columns at a time through an in-register transpose (g_shuffles16), bias and relu /
 * relu6 applied to the vectors (other activations: bias_act_copy over each row after). Reads c's 16-row groups up
 * to the panel's padded rows (computed, zero weights) and its columns up to a multiple of 16 (the buffer holds
 * PK_CHUNK * PK_NR = 224 of them; those past q1 are never written out). */
PD_INLINE void pk_write_t16(const pk_args *a, const float *c, isz n, isz m0, isz rows, isz q0, isz q1) {
    const int in_regs = act_in_regs(&a->act);
    for (isz r0 = 0; r0 < rows; r0 += 16) {
        const isz nr = rows - r0 < 16 ? rows - r0 : 16;
        float *o = a->out + (n * a->M + m0 + r0) * a->L + q0;
        const float *res = a->res ? a->res + (n * a->M + m0 + r0) * a->L + q0 : NULL;
        for (isz j0 = 0; j0 < q1 - q0; j0 += 16) {
            const isz nc = q1 - q0 - j0 < 16 ? q1 - q0 - j0 : 16;
            pd_v16 r[16];
            for (int j = 0; j < 16; j++) memcpy(&r[j], c + (j0 + j) * PK_MR + r0, sizeof(pd_v16));
            pd_transpose16(r); /* r[i]: row r0 + i, columns j0 .. j0 + 15 */
            for (isz i = 0; i < nr; i++) {
                if (res)
                    bias_res_act_v16(&r[i], a->bias ? a->bias[m0 + r0 + i] : 0.0f, a->bias != NULL,
                                     res + i * a->L + j0, nc, &a->act);
                else if (in_regs)
                    bias_act_v16(&r[i], a->bias ? a->bias[m0 + r0 + i] : 0.0f, a->bias != NULL, &a->act);
                if (nc == 16) {
                    memcpy(o + i * a->L + j0, &r[i], sizeof(pd_v16));
                } else {
                    float t[16];
                    memcpy(t, &r[i], sizeof(t));
                    memcpy(o + i * a->L + j0, t, (size_t)nc * sizeof(float));
                }
            }
        }
        if (!in_regs) /* (with a residual, bias and residual were added in the vectors: the activation only) */
            for (isz i = 0; i < nr; i++)
                bias_act_copy(o + i * a->L, o + i * a->L, q1 - q0, a->bias && !res ? a->bias[m0 + r0 + i] : 0.0f,
                              a->bias != NULL && !res, &a->act);
    }
}

/* The reduction steps [*klo, *khi) of tile t that can be non-zero: k is tap-major ((i, j) kernel tap, then
 * input channel), and the kernel rows i whose input rows all lie in the padding for every output row the tile
 * touches are left out (the tile's columns are consecutive, within one or a few output rows). Those rows form one
 * range of i (the valid output rows of kernel row i shift down as i grows). */
PD_INLINE void pk_tile_k(const pk_args *a, isz t, isz *klo, isz *khi) {
    const conv_geo *g = &a->geo;
    const isz r0 = t * PK_NR / g->OW, q1 = (t + 1) * PK_NR < a->L ? (t + 1) * PK_NR : a->L, r1 = (q1 - 1) / g->OW;
    isz ilo = g->KH, ihi = -1;
    for (isz i = 0; i < g->KH; i++) {
        isz ylo, yhi;
        valid_range(g->OH, g->SH, g->PT, i * g->DH, g->H, &ylo, &yhi);
        if (ylo <= r1 && yhi > r0) {
            if (i < ilo) ilo = i;
            ihi = i;
        }
    }
    const isz per_row = g->KW * g->C;
    *klo = ihi < 0 ? 0 : ilo * per_row;
    *khi = ihi < 0 ? 0 : (ihi + 1) * per_row;
}

/* (image, chunk, panel) items [begin, end) */
PD_INLINE void pk_gemm_task_impl(void *vctx, isz begin, isz end) {
    const pk_args *a = (const pk_args *)vctx;
    float *cbuf = (float *)pd_scratch((size_t)PK_CHUNK * PK_NR * PK_MR * sizeof(float));
    if (!cbuf) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    const isz mpad = (a->M + 15) / 16 * 16;
    for (isz it = begin; it < end; it++) {
        const isz p = it % a->panels, nc = it / a->panels, n = nc / a->chunks, t0 = (nc % a->chunks) * a->ctiles;
        const isz t1 = t0 + a->ctiles < a->tiles ? t0 + a->ctiles : a->tiles;
        const isz q0 = t0 * PK_NR, q1 = t1 * PK_NR < a->L ? t1 * PK_NR : a->L;
        if (g_shuffles16) { /* pk_write_t16 reads whole 16-column groups: the columns past the tiles' zeroed
                             * (finite, never written out). Only those: a whole-buffer memset per item cost
                             * Winograd's 64 small items a visible share at 2 threads. */
            const isz filled = (t1 - t0) * PK_NR, used = (q1 - q0 + 15) / 16 * 16;
            if (used > filled) memset(cbuf + filled * PK_MR, 0, (size_t)((used - filled) * PK_MR) * sizeof(float));
        }
        const isz m0 = p * PK_MR, prow = mpad - m0 < PK_MR ? mpad - m0 : PK_MR;
        const int mv = (int)(prow / 16);
        const float *wp = a->w + m0 * a->K;
        const float *bp = a->bp ? a->bp + n * a->tiles * a->K * PK_NR : NULL; /* (NULL: columns in place) */
        isz klo[PK_CHUNK], khi[PK_CHUNK], kmin = a->K, kmax = 0;
        for (isz t = t0; t < t1; t++) {
            pk_tile_k(a, t, &klo[t - t0], &khi[t - t0]);
            if (klo[t - t0] < kmin) kmin = klo[t - t0];
            if (khi[t - t0] > kmax) kmax = khi[t - t0];
            if (klo[t - t0] >= khi[t - t0]) /* every tap in the padding: bias only */
                memset(cbuf + (t - t0) * PK_NR * PK_MR, 0, PK_NR * PK_MR * sizeof(float));
        }
        for (isz k0 = kmin; k0 < kmax; k0 += PK_KC) {
            const isz k1 = kmax - k0 < PK_KC ? kmax : k0 + PK_KC;
            /* the weights the next block will read (this panel's next block, or the first block of the next panel
             * of the same columns), prefetched into L2 by the first tiles of this block, a line per reduction step:
             * the first tile of a block otherwise waits on them (a layer's weights are read once from memory or
             * L3: 9.4 MB for a 512x512 3x3). Measured on one Xeon (Emerald Rapids) core, alone with the caches
             * flushed between calls: 512x512 3x3 on 7x7 0.75x the time, 1024x1024 1x1 on 7x7 0.72x, 256->512 3x3
             * stride 2 to 7x7 0.75x; ResNet18 batch 1, 1 thread, 0.92x. */
            const float *nw = NULL;
            isz nlines = 0;
            if (k1 < kmax) {
                nw = wp + k1 * prow;
                nlines = (kmax - k1 < PK_KC ? kmax - k1 : PK_KC) * prow / 16;
            } else if ((it + 1) / a->panels == nc) { /* (the next item: this thread's next, parallel_ranges) */
                const isz m2 = m0 + PK_MR, prow2 = mpad - m2 < PK_MR ? mpad - m2 : PK_MR;
                nw = a->w + m2 * a->K + kmin * prow2;
                nlines = (kmax - kmin < PK_KC ? kmax - kmin : PK_KC) * prow2 / 16;
            }
            for (isz t = t0; t < t1; t++) {
                const isz ka = k0 > klo[t - t0] ? k0 : klo[t - t0], kb = k1 < khi[t - t0] ? k1 : khi[t - t0];
                if (ka >= kb) continue;
                const float *bk = a->inplace ? a->x + n * a->K * a->L + ka * a->L + t * PK_NR
                                             : bp + (t * a->K + ka) * PK_NR;
                const float *wk = wp + ka * prow;
                const isz ldb = a->inplace ? a->L : PK_NR;
                float *c = cbuf + (t - t0) * PK_NR * PK_MR;
                const int first = ka == klo[t - t0];
                /* lines the earlier tiles of this block prefetched (fewer where a tile skipped padding rows: those
                 * lines are then read as before) */
                const isz done = (t - t0) * PK_KC;
                const float *pf = nw ? nw + done * 16 : NULL;
                const isz pfn = nlines > done ? (nlines - done < kb - ka ? nlines - done : kb - ka) : 0;
#if defined(__aarch64__)
                if (g_neon) {
                    pk_tile_neon(mv, kb - ka, wk, bk, ldb, c, first, pf, pfn);
                    continue;
                }
#elif defined(PD_X86_DISPATCH)
                if (g_avx2_tiles) {
                    pk_tile_v8(mv, kb - ka, wk, bk, ldb, c, first, pf, pfn);
                    continue;
                }
#endif
                switch (mv) { /* the tile with a constant vector count: unrolled, accumulators in registers */
                case 4: pk_tile(4, kb - ka, wk, bk, ldb, c, first, pf, pfn); break;
                case 3: pk_tile(3, kb - ka, wk, bk, ldb, c, first, pf, pfn); break;
                case 2: pk_tile(2, kb - ka, wk, bk, ldb, c, first, pf, pfn); break;
                default: pk_tile(1, kb - ka, wk, bk, ldb, c, first, pf, pfn); break;
                }
            }
        }
        const isz rows = a->M - m0 < PK_MR ? a->M - m0 : PK_MR;
        if (g_shuffles16) {
            pk_write_t16(a, cbuf, n, m0, rows, q0, q1);
            continue;
        }
        for (isz r = 0; r < rows; r++) {
            float *o = a->out + (n * a->M + m0 + r) * a->L;
            const float *cr = cbuf + r; /* column q of the chunk at (q - q0) * PK_MR */
            for (isz q = q0; q < q1; q++) o[q] = cr[(q - q0) * PK_MR];
            if (a->bias || a->act.kind != ACT_NONE || a->res)
                bias_res_act_copy(o + q0, o + q0, q1 - q0, a->bias ? a->bias[m0 + r] : 0.0f, a->bias != NULL,
                                  a->res ? a->res + (n * a->M + m0 + r) * a->L + q0 : NULL, &a->act);
        }
    }
    free(cbuf);
}

/* The wide form, for large maps (measured 1.07x to 1.29x NumPy's OpenBLAS on MobileNet's 1x1 convs on 28x28 to
 * 112x112 maps: the columns of a 1x1 stride-1 conv are read in place, bias and relu applied in registers; 1.08x
 * on ResNet18's 7x7 stride-2 stem, its columns gathered up to 384 at a time): vectorised along the columns, a
 * register tile is PW_MR = 8 output channels by PW_NR = 48 columns (3 vectors; 24 accumulators; per step 3 vector
 * loads of columns, 8 broadcasts of weights). Weights packed in panels of 8 rows (zero rows past M), each [K][8];
 * each item (image, group of tiles of 48 columns) reads or gathers its columns (zeros past L) and runs every
 * panel over each tile, writing rows of the output directly. */
#include "packed.h" /* PW_MR, PW_NR (packed_fc.c uses the same tile) */
#define PW_PF 6 /* a tile's column rows are prefetched into L1 this many reduction steps ahead: a 1x1 conv reads its
                 * rows in place, a map apart (12.5 KiB on 56x56), a stride the hardware's prefetchers do not follow.
                 * One Xeon (Emerald Rapids) core, batch 4: 128 -> 128 on 56x56 0.92x the time, 256 -> 256 on 28x28
                 * 0.92x, 32 -> 64 on 112x112 0.95x (distances 4 and 8 within 1% of 6, 16 slower) */

/* o[i*ldo + q] = act(sum_k a[k*8 + i] * b[k*48 + q] + bias[i] (+ res[i*ldo + q])) for i < rows, q < cols */
PD_INLINE void pw_tile(const int nv, isz kd, const float *a, const float *b, isz ldb, float *o, isz ldo, isz rows,
                       isz cols, const float *bias, const float *res, const act_t *act) {
#if defined(PD_X86_DISPATCH)
    if (g_avx2_tiles) {
        if (cols == nv * 16 && act_in_regs(act)) { /* the epilogue in registers (avx2.h: pd_v8_out). MobileNetV2's
            * 1x1 convs of short reductions at AVX2 (16 -> 96 on 112x112, 24 -> 144 on 56x56), one Zen 5 core, noisy:
            * 0.8x-0.9x the time of the epilogue on the rows in memory below */
            const pd_v8_out out = {o, ldo, rows, bias, res, act};
            rows4_v8(nv, kd, a, b, ldb, NULL, NULL, &out);
            return;
        }
        float t[PW_MR * PW_NR]; /* the epilogue on the rows in memory (avx2.h: pw_rows_out) */
        rows4_v8(nv, kd, a, b, ldb, t, NULL, NULL);
        pw_rows_out(t, PW_NR, o, ldo, rows, cols, bias, res, act);
        return;
    }
#endif
    pd_v16 acc[PW_MR][3];
    for (int i = 0; i < PW_MR; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = (pd_v16){0};
#if defined(__aarch64__)
    if (g_neon) {
        float t[PW_MR * PW_NR] = {0}; /* [row][48]: acc's layout */
        rows8_neon(nv, kd, a, b, ldb, t);
        memcpy(acc, t, sizeof(t));
        kd = 0; /* (the loop below has nothing left to do) */
    }
#endif
    for (isz k = 0; k < kd; k++) {
        pd_v16 bv[3];
        if (k + PW_PF < kd)
            for (int v = 0; v < nv; v++) __builtin_prefetch(b + (k + PW_PF) * ldb + v * 16, 0, 3);
        for (int v = 0; v < nv; v++) memcpy(&bv[v], b + k * ldb + v * 16, sizeof(pd_v16));
        for (int i = 0; i < PW_MR; i++) {
            const float ai = a[k * PW_MR + i];
            for (int v = 0; v < nv; v++) acc[i][v] += bv[v] * ai;
        }
    }
    /* bias, relu and relu6 applied to the tile */
    const int in_regs = act_in_regs(act);
    for (int i = 0; i < PW_MR; i++) {
        if (i >= rows) break;
        float *oi = o + i * ldo;
        if (res)
            for (int v = 0; v < nv && v * 16 < cols; v++)
                bias_res_act_v16(&acc[i][v], bias ? bias[i] : 0.0f, bias != NULL, res + i * ldo + v * 16,
                                 cols - v * 16, act);
        else if (in_regs)
            for (int v = 0; v < nv; v++) bias_act_v16(&acc[i][v], bias ? bias[i] : 0.0f, bias != NULL, act);
        if (cols == nv * 16) {
            for (int v = 0; v < nv; v++) memcpy(oi + v * 16, &acc[i][v], sizeof(pd_v16));
        } else {
            float t[PW_NR];
            for (int v = 0; v < nv; v++) memcpy(t + v * 16, &acc[i][v], sizeof(pd_v16));
            memcpy(oi, t, (size_t)cols * sizeof(float));
        }
        if (!in_regs) bias_act_copy(oi, oi, cols, bias && !res ? bias[i] : 0.0f, bias != NULL && !res, act);
    }
}

/* the group from tile `it` (of all images' tiles): up to a->group tiles, within [it, end) and one image; sets its
 * image, first column and column count, returns its tile count */
PD_INLINE isz pw_group(const pk_args *a, isz it, isz end, isz *n, isz *qa, isz *span) {
    const isz t0 = it % a->tiles;
    isz cnt = a->tiles - t0 < a->group ? a->tiles - t0 : a->group;
    if (cnt > end - it) cnt = end - it;
    *n = it / a->tiles;
    *qa = t0 * PW_NR;
    *span = a->L - *qa < cnt * PW_NR ? a->L - *qa : cnt * PW_NR;
    return cnt;
}

/* Tiles of 48 columns [begin, end), counted over all images (image n's tiles are n * tiles .. (n + 1) * tiles - 1),
 * in groups of up to a->group tiles within one image. 1x1 stride-1 convs read full tiles in place; others gather
 * the group's columns at once (im2col rows of up to 384 columns: its per-row cost spread). Panels outer, tiles
 * inner: each output row is written 48 * group floats at a time (measured faster inside a model, where the output
 * is not in cache, than all panels per tile). */
PD_INLINE void pw_task_impl(void *vctx, isz begin, isz end) {
    const pk_args *a = (const pk_args *)vctx;
    const conv_geo *g = &a->geo;
    const isz ld = a->group * PW_NR;
    /* the gathered group, or (1x1 stride 1) the last, partial tile with zeros past L */
    float *buf = (float *)pd_scratch((size_t)(a->K * (a->pointwise ? PW_NR : ld)) * sizeof(float));
    if (!buf) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    for (isz it = begin; it < end;) {
        isz n, qa, span;
        /* (no software prefetch of the next group's columns: with the maps 64-byte aligned (native.py
         * empty_aligned) the hardware's prefetchers keep up, and the burst of prefetches, a slice of the group's
         * rows per panel, stalled on the full miss queue: MobileNetV2 b1 / b4 at 2 threads 0.97x the time
         * without it, MobileNetV1 b4 and PP-OCRv4 det within 1%, processes alternated) */
        it += pw_group(a, it, end, &n, &qa, &span);
        const isz ntile = (span + PW_NR - 1) / PW_NR;
        const float *img = a->x + n * g->C * g->H * g->W;
        const float *b0 = buf; /* tile t's columns: b0 + t * 48, rows ldb apart */
        isz ldb = ld;
        if (a->pointwise) {
            b0 = img + qa;
            ldb = a->L;
            const isz last = span - (ntile - 1) * PW_NR;
            if (last < PW_NR)
                for (isz k = 0; k < a->K; k++) {
                    memcpy(buf + k * PW_NR, img + k * a->L + qa + span - last, (size_t)last * sizeof(float));
                    memset(buf + k * PW_NR + last, 0, (size_t)(PW_NR - last) * sizeof(float));
                }
        } else {
            im2col_block(g, img, 0, a->K, qa, qa + span, buf, ld);
            if (span < ntile * PW_NR)
                for (isz k = 0; k < a->K; k++)
                    memset(buf + k * ld + span, 0, (size_t)(ntile * PW_NR - span) * sizeof(float));
        }
        for (isz m0 = 0; m0 < a->M; m0 += PW_MR) {
            const isz rows = a->M - m0 < PW_MR ? a->M - m0 : PW_MR;
            float *o = a->out + (n * a->M + m0) * a->L + qa;
            for (isz t = 0; t < ntile; t++) {
                const isz cols = span - t * PW_NR < PW_NR ? span - t * PW_NR : PW_NR;
                /* the next tile's output lines, for writing (inside a model the output is not in cache) */
                const float *nx = t + 1 < ntile ? o + (t + 1) * PW_NR : o + a->L * PW_MR;
                if (t + 1 < ntile || m0 + PW_MR < a->M)
                    for (isz i = 0; i < PW_MR; i++)
                        for (int l = 0; l < 3; l++) __builtin_prefetch(nx + i * a->L + l * 16, 1, 3);
                const int packed_tail = a->pointwise && cols < PW_NR;
                const float *bt = packed_tail ? buf : b0 + t * PW_NR, *wt = a->w + m0 * a->K;
                const isz lb = packed_tail ? PW_NR : ldb;
                const float *bias = a->bias ? a->bias + m0 : NULL;
                const float *res = a->res ? a->res + (n * a->M + m0) * a->L + qa + t * PW_NR : NULL;
                /* a partial last tile on the vectors it needs (14x14: 4 columns on one vector, not three) */
                switch ((cols + 15) / 16) {
                case 1: pw_tile(1, a->K, wt, bt, lb, o + t * PW_NR, a->L, rows, cols, bias, res, &a->act); break;
                case 2: pw_tile(2, a->K, wt, bt, lb, o + t * PW_NR, a->L, rows, cols, bias, res, &a->act); break;
                default: pw_tile(3, a->K, wt, bt, lb, o + t * PW_NR, a->L, rows, cols, bias, res, &a->act); break;
                }
            }
        }
    }
    free(buf);
}

/* Winograd's 16 products on the small form's tiles (winograd.c): out + p * M * L (M, L) = W[p] (M, K) @ B[p] for
 * p < npos, W[p] packed as pack_weights packs an (M, K, 1, 1) filter (mpad * K floats apart), B[p] as
 * pk_pack_task lays out columns, [tile][K][7] (tiles * K * 7 floats apart). Items (p, chunk, panel). */
typedef struct {
    pk_args a; /* one product's shape; its w, bp, out those of product 0 */
    isz per;   /* items per product */
    isz wstep, bstep, ostep;
} pk_multi_args;

PD_INLINE void pk_multi_task_impl(void *vctx, isz begin, isz end) {
    const pk_multi_args *ma = (const pk_multi_args *)vctx;
    for (isz it = begin; it < end;) {
        const isz p = it / ma->per, stop = (p + 1) * ma->per < end ? (p + 1) * ma->per : end;
        pk_args a = ma->a;
        a.w += p * ma->wstep;
        a.bp += p * ma->bstep;
        a.out += p * ma->ostep;
        pk_gemm_task_impl(&a, it - p * ma->per, stop - p * ma->per);
        it = stop;
    }
}

PD_VERSIONS(pk_pack_task)
PD_VERSIONS(pk_gemm_task)
PD_VERSIONS(pk_multi_task)
PD_VERSIONS(pw_task)

PD_HIDDEN isz packed_tiles(isz L) { return (L + PK_NR - 1) / PK_NR; }

PD_HIDDEN void packed_products(const float *w, const float *b, float *out, isz npos, isz M, isz K, isz L,
                               int parallel) {
    pk_multi_args ma;
    memset(&ma, 0, sizeof(ma));
    pk_args *a = &ma.a;
    a->w = w;
    a->bp = (float *)b; /* read only: pk_gemm_task reads the columns */
    a->out = out;
    a->N = 1;
    a->M = M;
    a->K = K;
    a->L = L;
    a->tiles = packed_tiles(L);
    a->panels = (M + PK_MR - 1) / PK_MR;
    a->ctiles = PK_CHUNK;
    a->chunks = (a->tiles + a->ctiles - 1) / a->ctiles;
    a->geo = (conv_geo){.C = K, .H = 1, .W = L, .OH = 1, .OW = L, .KH = 1, .KW = 1, .SH = 1, .SW = 1, .DH = 1, .DW = 1};
    a->act.kind = ACT_NONE;
    ma.per = a->chunks * a->panels;
    ma.wstep = (M + 15) / 16 * 16 * K;
    ma.bstep = a->tiles * K * PK_NR;
    ma.ostep = M * L;
    if (parallel)
        parallel_ranges(pk_multi_task, &ma, npos * ma.per, 1);
    else
        pk_multi_task(&ma, 0, npos * ma.per);
}

PD_HIDDEN PyObject *py_packed_conv(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *wo, *bo, *oo, *ap, *ro = Py_None;
    pk_args a;
    int act, wide = 0;
    (void)self;
    memset(&a, 0, sizeof(a));
    conv_geo *g = &a.geo;
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnnnnnnnnnn)iO|pO", &xo, &wo, &bo, &oo, &a.N, &g->C, &g->H, &g->W, &a.M,
                          &g->OH, &g->OW, &g->KH, &g->KW, &g->SH, &g->SW, &g->DH, &g->DW, &g->PT, &g->PL, &act, &ap,
                          &wide, &ro))
        return NULL;
    if (a.N < 0 || g->C <= 0 || g->H < 0 || g->W < 0 || a.M <= 0 || g->OH < 0 || g->OW < 0 || g->KH <= 0 ||
        g->KW <= 0 || g->SH <= 0 || g->SW <= 0 || g->DH <= 0 || g->DW <= 0) {
        PyErr_SetString(PyExc_ValueError, "packed_conv: bad geometry");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    a.K = g->C * g->KH * g->KW;
    a.L = g->OH * g->OW;
    a.pointwise = g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0 &&
                  g->OH == g->H && g->OW == g->W;
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.N * g->C * g->H * g->W, "packed_conv input");
    a.w = bufs_take(&bs, wo, 0, (wide ? (a.M + 7) / 8 * 8 : (a.M + 15) / 16 * 16) * a.K, "packed_conv packed weights");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.M, "packed_conv bias");
    a.out = bufs_take(&bs, oo, 1, a.N * a.M * a.L, "packed_conv output");
    a.res = ro == Py_None ? NULL : bufs_take(&bs, ro, 0, a.N * a.M * a.L, "packed_conv residual");
    if (bs.failed) return NULL;
    a.tiles = (a.L + PK_NR - 1) / PK_NR;
    a.panels = (a.M + PK_MR - 1) / PK_MR;
    /* chunks of up to PK_CHUNK tiles, smaller where there would be fewer than 8 (image, chunk, panel) items:
     * a 64-row conv on a 14x14 map was one item, run by one thread (384->64 on 14x14, 2 threads: 0.157 -> 0.078
     * ms). The split depends on the shapes only, and no output's reduction order on it. */
    a.ctiles = PK_CHUNK;
    if (a.N * a.panels < 8) {
        const isz per = (8 + a.N * a.panels - 1) / (a.N * a.panels); /* chunks wanted per (image, panel) */
        const isz c = (a.tiles + per - 1) / per;
        if (c < a.ctiles) a.ctiles = c > 0 ? c : 1;
    }
    a.chunks = (a.tiles + a.ctiles - 1) / a.ctiles;
    a.kblocks = (a.K + PK_KC - 1) / PK_KC;
    int ok = 1;
    if (wide && a.N > 0 && a.L > 0) {
        a.tiles = (a.L + PW_NR - 1) / PW_NR;
        /* groups of up to 8 tiles, about 256 KiB of columns (L2), and at most a quarter of an image's tiles (set
         * when each group was an item of the threads: 256x256 1x1 on 28x28, 2 threads: 4 groups of 5, 5, 5, 2
         * tiles 0.59 ms, 5 groups 0.54) */
        a.group = 65536 / (a.K * PW_NR);
        if (a.group > 8) a.group = 8;
        if (a.group > a.tiles / 4) a.group = a.tiles / 4;
        if (a.group < 1) a.group = 1;
        /* one contiguous range of tiles per thread (over all images: thread 0 the first images or the top of the
         * image, thread 1 the rest), not groups handed out in turn (thread A group 0, B group 1, A group 2, ...,
         * the threads on neighbouring stretches of the same rows). Measured on 2 threads, whole models, old and new
         * runs alternated: MobileNetV1 batch 1 7.97 -> 7.42 ms, batch 4 30.0 -> 27.8 ms; MobileNetV2 batch 4
         * 23.8 -> 21.4 ms. Each range runs a group at a time, and a thread done with its own takes groups from the
         * back of the other's (parallel_ranges): on a VM whose two vCPUs ran at different speeds (another tenant
         * on one's sibling hyperthread: its L2 read bandwidth 88-116 GB/s against 121-140), a fixed half each
         * left the fast one waiting; measured in one process, stealing on and off alternated, 2 threads:
         * MobileNetV1 batch 4 0.945x the time, MobileNetV2 batch 4 0.969x, PP-OCRv4 det 0.965x, MobileNetV1 /
         * MobileNetV2 batch 1 0.98x-1.0x. One thread runs the same groups as before (same results: each output's
         * reduction is one tile's, whatever the split and whichever thread runs it). */
        const isz tiles = a.N * a.tiles;
        Py_BEGIN_ALLOW_THREADS;
        parallel_ranges(pw_task, &a, tiles, a.group);
        Py_END_ALLOW_THREADS;
    } else if (a.N > 0 && a.L > 0) {
        Py_BEGIN_ALLOW_THREADS;
        /* a 1x1 stride-1 conv whose columns fill whole tiles (7x7, 14x14, 28x28, 56x56 maps) reads them in place:
         * a tile's 7 columns of reduction row k are 7 consecutive floats of the image's row k, so no columns are
         * packed (the packing pass was ~5% of the time of a 512x512 1x1 on 14x14). One Xeon (Emerald Rapids) core,
         * batch 4: 512x512 on 14x14 2.01 -> 1.97 ms, 1024x1024 on 7x7 1.88 -> 1.85; inside MobileNetV2 at batch 1
         * its 7x7 layers 576 -> 160, 960 -> 160, 960 -> 320 0.87x-0.95x the time (160 -> 960 unchanged);
         * MobileNetV1 batch 4 0.98x, batch 1 0.97x (processes alternated). Same products in the same order:
         * the same bits as packed. */
        a.inplace = a.pointwise && a.L % PK_NR == 0;
        a.bp = a.inplace ? NULL : (float *)pd_alloc64((size_t)(a.N * a.tiles * a.K * PK_NR) * sizeof(float));
        if (a.bp || a.inplace) {
            if (!a.inplace) parallel_for(pk_pack_task, &a, a.N * a.chunks * a.kblocks, 1);
            /* a contiguous range of items per thread (stealing from the back of another's when done), so that
             * the next panel an item prefetches is its own thread's next item (handed out one at a time, it was
             * mostly the other thread's: on 2 threads ResNet18 0.94x the time at batch 1, 0.96x at batch 4,
             * MobileNetV2 0.96x, MobileNetV1 0.98x; Winograd's packed products likewise) */
            parallel_ranges(pk_gemm_task, &a, a.N * a.chunks * a.panels, 1);
            free(a.bp);
        } else {
            ok = 0;
        }
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    if (!ok) return PyErr_NoMemory();
    return pd_done(pd_fail0);
}
