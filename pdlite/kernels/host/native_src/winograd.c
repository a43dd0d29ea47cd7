/* pdlite native host kernels: Winograd F(2x2, 3x3) (see common.h) */
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* Winograd F(2x2, 3x3) for 3x3 stride-1 convs: 16 GEMMs U[p] (OC x C) @ V[p] (C x T) over the T     */
/* 2x2 output tiles, 2.25x fewer multiplications than im2col. U = G g G^T comes transformed (Python), */
/* laid out for the BLAS or (`packed`, narrow passes with AVX-512) for packed_gemm.c's register tiles. */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const float *x, *u, *bias;
    const float *res;   /* the residual added before the activation (out's layout), or NULL */
    float *out, *v, *m; /* v: (16, C, T), m: (16, OC, T) scratch */
    isz C, H, W, OC, OH, OW, PT, PL, TH, TW, T;
    isz NB, TT;               /* images per pass (x, out: the pass's first one) and their tiles, NB * TP */
    isz ty0, ty1, TP;         /* the pass's tile rows [ty0, ty1) of each image: TP = (ty1 - ty0) * TW tiles */
    isz cols_per, col_blocks; /* GEMM blocks: 16 positions x col_blocks */
    int packed;               /* u packed per position as packed_gemm.c's weights, v as its column tiles */
    isz vtiles;               /* packed: v's column tiles of 7 per position ([16][vtiles][C][7]) */
    act_t act;
} wino_args;

/* v's index of (position p, channel c, tile column t): (16, C, TT), or packed ([16][vtiles][C][7]) */
PD_INLINE isz wino_v(const wino_args *a, isz p, isz c, isz t) {
    if (!a->packed) return (p * a->C + c) * a->TT + t;
    return ((p * a->vtiles + t / 7) * a->C + c) * 7 + t % 7;
}

/* The input transform of one channel plane (ic = image * C + channel) with AVX-512, 16 tiles of a tile row at a
 * time: each of the tile row's 4 input rows as the masked loads (zeros in the padding) of its columns 2 tx - PL + [0,
 * 32) and + 2, B^T down the rows on those vectors, then B along the columns with the even / odd columns picked by
 * two-vector permutes; masked stores of the tiles (runs of 7 in the packed layout). The same sums, in the same
 * order, as the row-buffer path of wino_in_task (bit-equal). That path spent most of its time on per-row overheads
 * (loops of 7 tiles on 14x14; its input transform was a third of the conv). One Xeon (Emerald Rapids) core, batch 4,
 * the whole conv: 256 -> 256 on 14x14 2.91 -> 2.60 ms, 128 -> 128 on 28x28 4.09 -> 3.28, 64 -> 64 on 56x56 3.95
 * -> 3.40 (the packed layout's 512 -> 512 on 7x7: no change); with wino_out_plane16, 2.22, 2.78, 3.08, 3.98. */
#ifdef PD_X86_DISPATCH
#include <immintrin.h>
PD_TARGET_AVX512 static inline __attribute__((always_inline)) __mmask16 wino_cols_mask(isz col0, isz W) {
    const isz lo = col0 < 0 ? -col0 : 0, hi = W - col0 < 16 ? W - col0 : 16; /* lanes with 0 <= col0 + l < W */
    if (hi <= lo) return 0;
    return (__mmask16)((((unsigned)1 << hi) - 1) & ~(((unsigned)1 << lo) - 1));
}

/* lanes [0, nc) of y as tiles t0 .. t0 + nc - 1 of position p (wino_v's layout) */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void wino_store16(const wino_args *a, isz p, isz c,
                                                                                isz t0, isz nc, __m512 y) {
    if (!a->packed) {
        _mm512_mask_storeu_ps(a->v + (p * a->C + c) * a->TT + t0, (__mmask16)((1u << nc) - 1), y);
        return;
    }
    for (isz l0 = 0; l0 < nc;) { /* runs of tiles within one group of 7 */
        const isz t = t0 + l0, l1 = l0 + (7 - t % 7) < nc ? l0 + (7 - t % 7) : nc;
        const __mmask16 m = (__mmask16)(((1u << l1) - 1) & ~((1u << l0) - 1));
        _mm512_mask_storeu_ps(a->v + wino_v(a, p, c, t) - l0, m, y);
        l0 = l1;
    }
}

PD_TARGET_AVX512 __attribute__((noinline)) static void wino_in_plane16(const wino_args *a, isz ic) {
    const isz c = ic % a->C, toff = (ic / a->C) * a->TP - a->ty0 * a->TW, TW = a->TW, W = a->W;
    const float *src = a->x + ic * a->H * W;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (isz tx0 = 0; tx0 < TW; tx0 += 16) {
        const isz col = 2 * tx0 - a->PL, nc = TW - tx0 < 16 ? TW - tx0 : 16;
        const __mmask16 m[4] = {wino_cols_mask(col, W), wino_cols_mask(col + 16, W), wino_cols_mask(col + 2, W),
                                wino_cols_mask(col + 18, W)};
        for (isz ty = a->ty0; ty < a->ty1; ty++) {
            __m512 d[4][4]; /* [input row i][columns col, col + 16, col + 2, col + 18] */
            for (int i = 0; i < 4; i++) {
                const isz iy = 2 * ty - a->PT + i;
                for (int h = 0; h < 4; h++)
                    d[i][h] = iy < 0 || iy >= a->H ? _mm512_setzero_ps()
                                                   : _mm512_maskz_loadu_ps(m[h], src + iy * W + col + (h & 1) * 16 +
                                                                                     (h >> 1) * 2);
            }
            const isz base = toff + ty * TW + tx0;
            for (int i = 0; i < 4; i++) {
                __m512 t[4]; /* B^T down the rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3 */
                for (int h = 0; h < 4; h++)
                    t[h] = i == 0   ? _mm512_sub_ps(d[0][h], d[2][h])
                           : i == 1 ? _mm512_add_ps(d[1][h], d[2][h])
                           : i == 2 ? _mm512_sub_ps(d[2][h], d[1][h])
                                    : _mm512_sub_ps(d[1][h], d[3][h]);
                const __m512 e = _mm512_permutex2var_ps(t[0], even, t[1]), o = _mm512_permutex2var_ps(t[0], odd, t[1]);
                const __m512 e1 = _mm512_permutex2var_ps(t[2], even, t[3]);
                const __m512 o1 = _mm512_permutex2var_ps(t[2], odd, t[3]);
                wino_store16(a, 4 * i + 0, c, base, nc, _mm512_sub_ps(e, e1));
                wino_store16(a, 4 * i + 1, c, base, nc, _mm512_add_ps(o, e1));
                wino_store16(a, 4 * i + 2, c, base, nc, _mm512_sub_ps(e1, o));
                wino_store16(a, 4 * i + 3, c, base, nc, _mm512_sub_ps(o, o1));
            }
        }
    }
}
#else
static void wino_in_plane16(const wino_args *a, isz ic) { (void)a, (void)ic; } /* never called */
#endif

/* channel plane ic's input transform by row buffers (CPUs without AVX-512): `buf` holds 4 * PW + 8 * (TW + 1)
 * floats */
PD_INLINE void wino_in_rows(const wino_args *a, isz ic, float *buf) {
    const isz TW = a->TW, PW = 2 * TW + 2; /* padded row: columns 2*tx - PL .. 2*tx - PL + 3 of each tile */
    float *rows = buf;           /* 4 input rows (zero padded), then the vertical combinations in place */
    float *ev = buf + 4 * PW;    /* even / odd columns of one combined row: 4 x (TW + 1) each */
    float *od = ev + 4 * (TW + 1);
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
            /* B along the columns of tile tx:
             * (e[tx] - e[tx+1], o[tx] + e[tx+1], e[tx+1] - o[tx], o[tx] - o[tx+1]) */
            const isz base = toff + ty * TW, TT = a->TT;
            if (a->packed) {
                const isz ps = a->vtiles * a->C * 7; /* one position's columns */
                float *vt = a->v + wino_v(a, 4 * i, c, base);
                for (isz tx = 0, j = base % 7; tx < TW; tx++) {
                    vt[0] = e[tx] - e[tx + 1];
                    vt[ps] = o[tx] + e[tx + 1];
                    vt[2 * ps] = e[tx + 1] - o[tx];
                    vt[3 * ps] = o[tx] - o[tx + 1];
                    if (++j < 7) { /* the next column of this tile, or the first of the next */
                        vt++;
                    } else {
                        j = 0;
                        vt += a->C * 7 - 6;
                    }
                }
                continue;
            }
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

/* input transform of channel c: V[p][c][t] = (B^T d B)[p] for each tile's 4x4 patch d */
PD_INLINE void wino_in_task_impl(void *vctx, isz begin, isz end) {
    const wino_args *a = (const wino_args *)vctx;
    float *buf = NULL; /* wino_in_rows' buffers: AVX-512's whole vectors of tiles (wino_in_plane16) need none */
    if (!g_avx512) {
        buf = (float *)pd_scratch((size_t)(4 * (2 * a->TW + 2) + 8 * (a->TW + 1)) * sizeof(float));
        if (!buf) return;
    }
    for (isz ic = begin; ic < end; ic++) { /* ic = image * C + channel */
        const isz c = ic % a->C;
        if (g_avx512)
            wino_in_plane16(a, ic);
        else
            wino_in_rows(a, ic, buf);
        if (a->packed && ic / a->C == a->TT / a->TP - 1) /* the pass's last image: zeros past its last tile
                                                           * column (computed over, never written out) */
            for (isz p = 0; p < 16; p++)
                for (isz t = a->TT; t < a->vtiles * 7; t++) a->v[wino_v(a, p, c, t)] = 0.0f;
    }
    free(buf);
}

/* GEMM blocks: position p = t / col_blocks, columns block t % col_blocks */
PD_INLINE void wino_gemm_task_impl(void *vctx, isz begin, isz end) {
    const wino_args *a = (const wino_args *)vctx;
    if (a->packed) { /* the band path's products, on this thread */
        packed_products(a->u, a->v, a->m, 16, a->OC, a->C, a->TT, 0);
        return;
    }
    for (isz t = begin; t < end; t++) {
        const isz p = t / a->col_blocks, c0 = (t % a->col_blocks) * a->cols_per;
        const isz cols = a->TT - c0 < a->cols_per ? a->TT - c0 : a->cols_per;
        sgemm_rm(a->OC, cols, a->C, a->u + p * a->OC * a->C, a->C, a->v + p * a->C * a->TT + c0, a->TT,
                 a->m + p * a->OC * a->TT + c0, a->TT);
    }
}

/* The output transform of one plane (io = image * OC + output channel) with AVX-512, 16 tiles at a time: the 16
 * positions' masked loads, A^T m A on the vectors, the two output rows' even / odd columns interleaved by permutes
 * into `row` (2 rows of RW floats), then bias, residual and activation as wino_out_task's (the same sums in the
 * same order: bit-equal). Batch 4, one Xeon (Emerald Rapids) core, the whole conv (after wino_in_plane16): 256 ->
 * 256 on 14x14 2.60 -> 2.22 ms, 128 -> 128 on 28x28 3.28 -> 2.78, 64 -> 64 on 56x56 3.40 -> 3.08, 512 -> 512 on
 * 7x7 4.25 -> 3.98. */
#ifdef PD_X86_DISPATCH
PD_TARGET_AVX512 __attribute__((noinline)) static void wino_out_plane16(const wino_args *a, isz io, float *row,
                                                                         isz RW) {
    const isz TW = a->TW, TT = a->TT, OW = a->OW, oc = io % a->OC, toff = (io / a->OC) * a->TP - a->ty0 * TW;
    const float b = a->bias ? a->bias[oc] : 0.0f;
    float *o = a->out + io * a->OH * OW;
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (isz ty = a->ty0; ty < a->ty1; ty++) {
        const isz base = toff + ty * TW;
        for (isz tx0 = 0; tx0 < TW; tx0 += 16) {
            const isz nc = TW - tx0 < 16 ? TW - tx0 : 16;
            const __mmask16 m = (__mmask16)((1u << nc) - 1);
            __m512 s[2][4]; /* rows of A^T m: s[0][j] = m0j + m1j + m2j, s[1][j] = m1j - m2j - m3j */
            for (int j = 0; j < 4; j++) {
                __m512 v[4];
                for (int i = 0; i < 4; i++)
                    v[i] = _mm512_maskz_loadu_ps(m, a->m + ((4 * i + j) * a->OC + oc) * TT + base + tx0);
                s[0][j] = _mm512_add_ps(_mm512_add_ps(v[0], v[1]), v[2]);
                s[1][j] = _mm512_sub_ps(_mm512_sub_ps(v[1], v[2]), v[3]);
            }
            for (int r = 0; r < 2; r++) {
                const __m512 ye = _mm512_add_ps(_mm512_add_ps(s[r][0], s[r][1]), s[r][2]);
                const __m512 yo = _mm512_sub_ps(_mm512_sub_ps(s[r][1], s[r][2]), s[r][3]);
                _mm512_storeu_ps(row + r * RW + 2 * tx0, _mm512_permutex2var_ps(ye, lo, yo));
                _mm512_storeu_ps(row + r * RW + 2 * tx0 + 16, _mm512_permutex2var_ps(ye, hi, yo));
            }
        }
        for (isz r = 0; r < 2; r++) {
            const isz oy = 2 * ty + r;
            if (oy < a->OH)
                bias_res_act_copy(o + oy * OW, row + r * RW, OW, b, a->bias != NULL,
                                  a->res ? a->res + io * a->OH * OW + oy * OW : NULL, &a->act);
        }
    }
}
#else
static void wino_out_plane16(const wino_args *a, isz io, float *row, isz RW) { (void)a, (void)io, (void)row, (void)RW; }
#endif

/* output transform of channel oc: Y = A^T m A per tile, A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]; + bias, act */
PD_INLINE void wino_out_task_impl(void *vctx, isz begin, isz end) {
    const wino_args *a = (const wino_args *)vctx;
    const isz TW = a->TW, TT = a->TT, OW = a->OW, RW = 32 * ((TW + 15) / 16); /* (wino_out_plane16's rows) */
    float *buf = (float *)pd_scratch((size_t)(8 * TW + 2 * RW) * sizeof(float));
    if (!buf) return;
    float *s0 = buf, *s1 = buf + 4 * TW; /* s0[j], s1[j]: rows of A^T m for column j (4 x TW each) */
    float *row = buf + 8 * TW;           /* two output rows of width 2*TW */
    for (isz io = begin; io < end; io++) { /* io = image * OC + output channel */
        if (g_avx512) {
            wino_out_plane16(a, io, row, RW);
            continue;
        }
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
                float *y = row + r * RW;
                for (isz tx = 0; tx < TW; tx++) {
                    y[2 * tx] = c0[tx] + c1[tx] + c2[tx];
                    y[2 * tx + 1] = c1[tx] - c2[tx] - c3[tx];
                }
                const isz oy = 2 * ty + r;
                if (oy < a->OH)
                    bias_res_act_copy(o + oy * OW, y, OW, b, a->bias != NULL,
                                      a->res ? a->res + io * a->OH * OW + oy * OW : NULL, &a->act);
            }
        }
    }
    free(buf);
}


/* Large images (one per pass) as bands of tile rows, one whole band per item: its input transform, 16 GEMMs and
 * output transform on the thread that runs it, in that thread's own scratch: no barrier between the three steps
 * (the passes had three each), and the band's transformed data stays in that thread's caches. Measured in
 * ResNet18 on its 64 -> 64 convs on 56x56 maps: 2 threads 1.10 -> 0.90 ms at batch 1, 3.8 -> 3.0 ms at batch 4. */
typedef struct {
    const wino_args *a; /* the call's arguments (x, out: image 0) */
    isz bands, rows;    /* bands per image, tile rows per band (the last one may have fewer) */
} wino_band_args;

/* (image, band) items [begin, end) */
PD_INLINE void wino_band_task_impl(void *vctx, isz begin, isz end) {
    const wino_band_args *ba = (const wino_band_args *)vctx;
    wino_args la = *ba->a;
    const isz most = ba->rows * la.TW; /* tiles of the widest band */
    const isz vcols = la.packed ? packed_tiles(most) * 7 : most; /* v's columns per channel and position */
    float *v = (float *)pd_scratch((size_t)(16 * (la.C * vcols + la.OC * most)) * sizeof(float));
    if (!v) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    la.v = v;
    la.m = v + 16 * la.C * vcols;
    la.col_blocks = 1;
    for (isz it = begin; it < end; it++) {
        const isz img = it / ba->bands, band = it % ba->bands;
        la.x = ba->a->x + img * la.C * la.H * la.W;
        la.out = ba->a->out + img * la.OC * la.OH * la.OW;
        if (la.res) la.res = ba->a->res + img * la.OC * la.OH * la.OW;
        la.ty0 = band * ba->rows;
        la.ty1 = la.ty0 + ba->rows < la.TH ? la.ty0 + ba->rows : la.TH;
        la.TP = (la.ty1 - la.ty0) * la.TW;
        la.TT = la.TP;
        la.cols_per = la.TT;
        la.vtiles = packed_tiles(la.TT);
        wino_in_task_impl(&la, 0, la.C);
        wino_gemm_task_impl(&la, 0, 16);
        wino_out_task_impl(&la, 0, la.OC);
    }
    free(v);
}

PD_VERSIONS(wino_band_task)
PD_VERSIONS(wino_in_task)
PD_VERSIONS(wino_gemm_task)
PD_VERSIONS(wino_out_task)

/* Passes of about 256 tile columns: wider ones fall out of the caches (the transformed input and the products
 * are 16 values per tile and channel). Small images go through together: their tiles side by side make the 16
 * GEMMs wider, and the weights (16 * OC * C, often larger than the images) are streamed once per pass instead of
 * once per image; large images go through in bands of tile rows. Sets the images per pass and the tile rows per
 * pass of a batch of n images of TH x TW tiles; returns the tile columns of the widest pass. */
static isz wino_split(isz n, isz TH, isz TW, isz *NB, isz *rows_per) {
    const isz T = TH * TW;
    *NB = T >= 256 ? 1 : 256 / T;
    if (*NB > n) *NB = n > 0 ? n : 1;
    *rows_per = *NB > 1 ? TH : (TW >= 256 ? 1 : 256 / TW);
    if (*rows_per > TH) *rows_per = TH;
    return *NB > 1 ? *NB * T : *rows_per * TW;
}

PD_HIDDEN PyObject *py_winograd_pass_tiles(PyObject *self, PyObject *args) {
    isz n, oh, ow, nb, rows;
    (void)self;
    if (!PyArg_ParseTuple(args, "nnn", &n, &oh, &ow)) return NULL;
    if (n < 0 || oh <= 0 || ow <= 0) {
        PyErr_SetString(PyExc_ValueError, "winograd_pass_tiles: bad shape");
        return NULL;
    }
    return PyLong_FromSsize_t(wino_split(n, (oh + 1) / 2, (ow + 1) / 2, &nb, &rows));
}

PD_HIDDEN PyObject *py_winograd_conv3x3(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *uo, *bo, *oo, *ap, *ro = Py_None;
    wino_args a;
    isz n;
    int act;
    (void)self;
    memset(&a, 0, sizeof(a));
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnnnn)iO|pO", &xo, &uo, &bo, &oo, &n, &a.C, &a.H, &a.W, &a.OC, &a.OH,
                          &a.OW, &a.PT, &a.PL, &act, &ap, &a.packed, &ro))
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
    pd_bufs bs = {0};
    const float *x = bufs_take(&bs, xo, 0, n * a.C * a.H * a.W, "winograd input");
    a.u = bufs_take(&bs, uo, 0, 16 * (a.packed ? (a.OC + 15) / 16 * 16 : a.OC) * a.C, "winograd weights");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.OC, "winograd bias");
    float *out = bufs_take(&bs, oo, 1, n * a.OC * a.OH * a.OW, "winograd output");
    const float *res = ro == Py_None ? NULL : bufs_take(&bs, ro, 0, n * a.OC * a.OH * a.OW, "winograd residual");
    if (bs.failed) return NULL;
    a.res = res;
    isz rows_per;
    const isz most = wino_split(n, a.TH, a.TW, &a.NB, &rows_per); /* tile columns of the widest pass */
    const isz bands = (a.TH + rows_per - 1) / rows_per; /* passes per image */
    if (a.NB == 1 && n * bands >= 2) {
        /* one image per pass and at least two passes in all: bands run whole, one per item (wino_band_task),
         * of equal rows, an even count of them (a balanced split on 2 threads; the split depends on the shapes
         * only, not on the thread count). An image of one band stays on the pass path, which spreads each of its
         * steps over the threads (as 2 bands, measured 6-30% slower on 2 threads, ResNet18's 28x28 and 14x14). */
        wino_band_args ba;
        ba.a = &a;
        ba.bands = bands + (bands % 2 && n % 2);
        ba.rows = (a.TH + ba.bands - 1) / ba.bands;
        ba.bands = (a.TH + ba.rows - 1) / ba.rows;
        a.x = x;
        a.out = out;
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(wino_band_task, &ba, n * ba.bands, 1);
        Py_END_ALLOW_THREADS;
        bufs_release(&bs);
        return pd_done(pd_fail0);
    }
    const isz vcols = a.packed ? packed_tiles(most) * 7 : most;
    a.v = (float *)pd_alloc64((size_t)(16 * (a.C * vcols + a.OC * most)) * sizeof(float));
    if (!a.v) {
        bufs_release(&bs);
        return PyErr_NoMemory();
    }
    a.m = a.v + 16 * a.C * vcols;
    a.col_blocks = 1; /* one block per position: 16 blocks, whatever the thread count (same results) */
    Py_BEGIN_ALLOW_THREADS;
    for (isz i = 0; i < n; i += a.NB) {
        const isz nb = n - i < a.NB ? n - i : a.NB; /* the last pass may hold fewer images */
        a.x = x + i * a.C * a.H * a.W;
        a.out = out + i * a.OC * a.OH * a.OW;
        if (res) a.res = res + i * a.OC * a.OH * a.OW;
        for (a.ty0 = 0; a.ty0 < a.TH; a.ty0 = a.ty1) {
            a.ty1 = a.ty0 + rows_per < a.TH ? a.ty0 + rows_per : a.TH;
            a.TP = (a.ty1 - a.ty0) * a.TW;
            a.TT = nb * a.TP;
            a.cols_per = a.TT;
            a.vtiles = packed_tiles(a.TT);
            parallel_for(wino_in_task, &a, nb * a.C, grain_for(nb * a.C, 4));
            if (a.packed)
                packed_products(a.u, a.v, a.m, 16, a.OC, a.C, a.TT, 1);
            else
                parallel_for(wino_gemm_task, &a, 16 * a.col_blocks, 1);
            parallel_for(wino_out_task, &a, nb * a.OC, grain_for(nb * a.OC, 4));
        }
    }
    Py_END_ALLOW_THREADS;
    free(a.v);
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
