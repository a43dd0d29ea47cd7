/* pdlite native host kernels: the depthwise conv's row-vector forms (see depthwise.h; picked by depthwise.c) */
#include "depthwise.h"

/* The row-vector form (dwr_applies: AVX-512, outputs 9 to 64 wide; stride 1 without row dilation, or 3x3 stride 2
 * padding 1): planar, output rows in up to 4 vectors of 16 columns, the taps' input columns read by masked loads
 * (lanes that fall in the padding or past the row read as 0: no padded copy, no edge cases, no transposes). 3x3
 * stride 1 padding 1 (dwr3_plane): 16 columns at a time down a band of rows, the three input rows' vectors slid down
 * in registers; other stride-1 kernels (dwr_plane): 4 output rows at a time; 3x3 stride 2 (dwr_s2_plane): even / odd
 * input columns picked by shuffles, rows in order. Inside the models (one process, the form toggled between runs,
 * one Zen 4 core), against the channel-blocked form (maps up to 32x32) and the planar dw3 / polyphase forms:
 * MobileNetV1's five 512ch 14x14 layers together 0.385 -> 0.200 ms (batch 4 3.05 -> 1.03), 256ch 28x28 0.151 ->
 * 0.067, 128ch 56x56 0.234 -> 0.140; stride 2: 64ch 112x112 at batch 4 1.78 -> 0.93, 96ch 112x112 0.414 -> 0.220;
 * MobileNetV1 b4 62.7 -> 58.2 ms, MobileNetV2 b1 10.00 -> 9.29. Left to the other forms: 7x7 outputs (3x3 no
 * faster, 5x5 1.3x slower than the blocked form) and stride-1 maps wider than 64 (its bands on 112x112 at batch 4,
 * from memory, 1.4x slower than dw3). */
#define DWR_MAX_W 64 /* output columns: up to 4 vectors per row */
#define DWR_BAND_FLOATS 2048 /* the 3x3 form on maps more than 16 wide: rows per band (8 KiB of input) */
PD_HIDDEN int g_dwr_on = 1;
#ifdef PD_X86_DISPATCH
#include <immintrin.h>
/* the 3x3 same-size form (dwr3_plane) */
static int dwr3_applies(const dw_args *a) {
    return a->KH == 3 && a->KW == 3 && a->PT == 1 && a->PL == 1 && a->DW == 1 && a->OH == a->H && a->OW == a->W;
}

/* 3x3, stride 2, padding 1 (dwr_s2_plane) */
static int dwr_s2_applies(const dw_args *a) {
    return a->KH == 3 && a->KW == 3 && a->SH == 2 && a->SW == 2 && a->DH == 1 && a->DW == 1 && a->PT == 1 &&
           a->PL == 1;
}

PD_HIDDEN int dwr_applies(const dw_args *a) {
    return g_avx512 && g_dwr_on && a->OW > 8 && a->OW <= DWR_MAX_W &&
           ((a->SH == 1 && a->SW == 1 && a->DH == 1 && a->KW <= 16) || dwr_s2_applies(a));
}

/* one plane's epilogue: bias and relu / relu6 on each output vector, then its masked store (other activations:
 * bias_act_copy over the plane after). Passed by value: behind a pointer it measured ~8% slower on 512ch 14x14
 * (likely reloaded after every store: a float store may alias an __m512) */
typedef struct {
    __m512 bias, top;
    int has_bias, relu, relu6;
} dwr_ep;
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void dwr_store(const dwr_ep *e, __m512 y, float *dst,
                                                                             __mmask16 m) {
    if (e->has_bias) y = _mm512_add_ps(y, e->bias);
    if (e->relu) y = _mm512_max_ps(_mm512_setzero_ps(), y); /* (0 > y) ? 0 : y: NaN kept, as bias_act_copy */
    if (e->relu6) y = _mm512_min_ps(e->top, y);              /* (t < y) ? t : y */
    _mm512_mask_storeu_ps(dst, m, y);
}

#define DWR_ROWS 4 /* output rows computed together (independent accumulators; each input row loaded once for them) */
/* one plane: all output rows of a channel from its input plane src; nv (a constant where inlined) vectors per row */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void dwr_plane(const dw_args *a, const float *src,
                                                                             const float *wt, float *dst,
                                                                             const dwr_ep ep,
                                                                             const __mmask16 lm[16][4],
                                                                             const __mmask16 sm[4],
                                                                             const int nv) {
    const isz OH = a->OH, OW = a->OW, H = a->H, W = a->W, KH = a->KH, KW = a->KW, PT = a->PT;
    const __m512 zero = _mm512_setzero_ps();
    for (isz oy0 = 0; oy0 < OH; oy0 += DWR_ROWS) {
        const isz nr = OH - oy0 < DWR_ROWS ? OH - oy0 : DWR_ROWS;
        __m512 acc[DWR_ROWS][4];
        for (int r = 0; r < DWR_ROWS; r++)
            for (int v = 0; v < nv; v++) acc[r][v] = zero;
        /* input rows read by these output rows: iy = oy0 + r + kh - PT */
        const isz iy0 = oy0 - PT, iy1 = oy0 + nr - 1 + (KH - 1) - PT;
        for (isz iy = iy0 < 0 ? 0 : iy0; iy <= iy1 && iy < H; iy++) {
            const float *row = src + iy * W - a->PL;
            for (isz kw = 0; kw < KW; kw++) {
                __m512 x[4];
                for (int v = 0; v < nv; v++) x[v] = _mm512_maskz_loadu_ps(lm[kw][v], row + kw * a->DW + v * 16);
                for (int r = 0; r < DWR_ROWS; r++) {
                    const isz kh = iy - (oy0 + r) + PT;
                    if (r >= nr || kh < 0 || kh >= KH) continue;
                    const __m512 w = _mm512_set1_ps(wt[kh * KW + kw]);
                    for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(x[v], w, acc[r][v]);
                }
            }
        }
        for (int r = 0; r < DWR_ROWS; r++) {
            if (r >= nr) break;
            for (int v = 0; v < nv; v++) dwr_store(&ep, acc[r][v], dst + (oy0 + r) * OW + v * 16, sm[v]);
        }
    }
}

/* dwr_plane for 5x5 kernels without column dilation (nv a constant where inlined): the 25 weights broadcast once per
 * plane and, the loops unrolled (input row s of a group of 4 output rows is kernel row s - r of output row r), every
 * weight's index a constant, so each FMA takes its weight from a register (dwr_plane broadcasts one per FMA: load
 * ports, not FMAs, bound it). The same products in the same order per output (kernel rows, then columns,
 * ascending): the same bits. */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void dwr5_plane(const dw_args *a, const float *src,
                                                                              const float *wt, float *dst,
                                                                              const dwr_ep ep,
                                                                              const __mmask16 lm[16][4],
                                                                              const __mmask16 sm[4], const int nv) {
    const isz OH = a->OH, OW = a->OW, H = a->H, W = a->W, PT = a->PT;
    const __m512 zero = _mm512_setzero_ps();
    __m512 w[25];
    for (int t = 0; t < 25; t++) w[t] = _mm512_set1_ps(wt[t]);
    for (isz oy0 = 0; oy0 < OH; oy0 += DWR_ROWS) {
        const isz nr = OH - oy0 < DWR_ROWS ? OH - oy0 : DWR_ROWS;
        __m512 acc[DWR_ROWS][4];
        for (int r = 0; r < DWR_ROWS; r++)
            for (int v = 0; v < nv; v++) acc[r][v] = zero;
#pragma GCC unroll 8
        for (int s = 0; s < DWR_ROWS + 4; s++) {
            const isz iy = oy0 - PT + s;
            if (iy < 0 || iy >= H) continue;
            const float *row = src + iy * W - a->PL;
#pragma GCC unroll 5
            for (int kw = 0; kw < 5; kw++) {
                __m512 x[4];
                for (int v = 0; v < nv; v++) x[v] = _mm512_maskz_loadu_ps(lm[kw][v], row + kw + v * 16);
#pragma GCC unroll 4
                for (int r = 0; r < DWR_ROWS; r++) {
                    const int kh = s - r;
                    if (kh < 0 || kh >= 5 || r >= nr) continue;
                    for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(x[v], w[kh * 5 + kw], acc[r][v]);
                }
            }
        }
        for (int r = 0; r < DWR_ROWS; r++) {
            if (r >= nr) break;
            for (int v = 0; v < nv; v++) dwr_store(&ep, acc[r][v], dst + (oy0 + r) * OW + v * 16, sm[v]);
        }
    }
}

/* the 3x3 form's nine taps, one FMA each in this order (rows oy - 1, oy, oy + 1 in p, c, n; columns x - 1, x, x + 1),
 * on either vector width */
#define DWR_TAPS9(mul, fma)                                                                                        \
    fma(n2, w[8], fma(n1, w[7], fma(n0, w[6], fma(c2, w[5], fma(c1, w[4], fma(c0, w[3], fma(p2, w[2],            \
        fma(p1, w[1], mul(p0, w[0])))))))))

/* 3x3, padding 1, output rows [y0, y1) of the 16 columns from src / dst (masks ml, mc, mr: the input columns x - 1,
 * x, x + 1; ms: the columns stored): the three input rows' vectors kept in registers and slid down (each input row
 * loaded once), the 9 weights broadcast once */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void dwr3_plane(const dw_args *a, const float *src,
                                                                              const float *wt, float *dst,
                                                                              const dwr_ep ep, __mmask16 ml,
                                                                              __mmask16 mc, __mmask16 mr,
                                                                              __mmask16 ms, isz y0, isz y1) {
    const isz H = a->H, W = a->W;
    const __m512 zero = _mm512_setzero_ps();
    __m512 w[9];
    for (int i = 0; i < 9; i++) w[i] = _mm512_set1_ps(wt[i]);
    __m512 p0 = zero, p1 = zero, p2 = zero; /* row oy - 1 at columns x - 1, x, x + 1 */
    if (y0 > 0) {
        const float *r = src + (y0 - 1) * W;
        p0 = _mm512_maskz_loadu_ps(ml, r - 1), p1 = _mm512_maskz_loadu_ps(mc, r);
        p2 = _mm512_maskz_loadu_ps(mr, r + 1);
    }
    const float *r0 = src + y0 * W;
    __m512 c0 = _mm512_maskz_loadu_ps(ml, r0 - 1), c1 = _mm512_maskz_loadu_ps(mc, r0),
           c2 = _mm512_maskz_loadu_ps(mr, r0 + 1); /* row oy */
    for (isz oy = y0; oy < y1; oy++) {
        __m512 n0 = zero, n1 = zero, n2 = zero; /* row oy + 1 */
        if (oy + 1 < H) {
            const float *r = src + (oy + 1) * W;
            n0 = _mm512_maskz_loadu_ps(ml, r - 1), n1 = _mm512_maskz_loadu_ps(mc, r);
            n2 = _mm512_maskz_loadu_ps(mr, r + 1);
        }
        const __m512 y = DWR_TAPS9(_mm512_mul_ps, _mm512_fmadd_ps);
        dwr_store(&ep, y, dst + oy * W, ms);
        p0 = c0, p1 = c1, p2 = c2, c0 = n0, c1 = n1, c2 = n2;
    }
}

/* the stride-2 forms' prefetch: the two input rows output row oy + 8 starts on (at batch 4 MobileNet's 112x112 maps
 * come from memory) */
static inline __attribute__((always_inline)) void dwr_s2_prefetch(const float *src, isz oy, isz H, isz W) {
    for (isz iy = 2 * oy + 1 + 2 * 8; iy < 2 * oy + 3 + 2 * 8 && iy < H; iy++)
        for (isz c = 0; c < W; c += 16) __builtin_prefetch(src + iy * W + c, 0, 3);
}

/* 3x3, stride 2, padding 1 (dwr_s2_applies), one plane, output row by output row (input rows in order, 8 rows
 * prefetched ahead: on 112x112 maps at batch 4 they come from memory): for each vector of 16 output columns x, an
 * input row's columns 2x and 2x + 1 are the even / odd lanes of two loads (32 columns from 32v), picked by two-vector
 * shuffles, and its columns 2x - 1 are the odd ones moved up a lane, lane 0 from the vector before (zero at the
 * left edge). */
PD_TARGET_AVX512 static void dwr_s2_plane(const dw_args *a, const float *src, const float *wt, float *dst,
                                          const dwr_ep ep, const __mmask16 lm[2][4], const __mmask16 sm[4], isz nv) {
    const isz OH = a->OH, OW = a->OW, H = a->H, W = a->W;
    const __m512 zero = _mm512_setzero_ps();
    __m512 w[9];
    for (int i = 0; i < 9; i++) w[i] = _mm512_set1_ps(wt[i]);
    for (isz oy = 0; oy < OH; oy++) {
        dwr_s2_prefetch(src, oy, H, W);
        __m512 carry[3] = {zero, zero, zero}; /* per kernel row: the previous vector's odd lanes */
        for (isz v = 0; v < nv; v++) {
            __m512 y = zero;
            for (isz kh = 0; kh < 3; kh++) {
                const isz iy = 2 * oy - 1 + kh;
                if (iy < 0 || iy >= H) continue;
                const float *r = src + iy * W + 32 * v;
                const pd_v16 lo = (pd_v16)_mm512_maskz_loadu_ps(lm[0][v], r),
                             hi = (pd_v16)_mm512_maskz_loadu_ps(lm[1][v], r + 16);
                const __m512 e = (__m512)PD_SHUFFLE16(lo, hi, PD_EVEN16), o = (__m512)PD_SHUFFLE16(lo, hi, PD_ODD16);
                const __m512 left = _mm512_castsi512_ps(
                    _mm512_alignr_epi32(_mm512_castps_si512(o), _mm512_castps_si512(carry[kh]), 15));
                carry[kh] = o;
                y = _mm512_fmadd_ps(left, w[kh * 3], y);
                y = _mm512_fmadd_ps(e, w[kh * 3 + 1], y);
                y = _mm512_fmadd_ps(o, w[kh * 3 + 2], y);
            }
            dwr_store(&ep, y, dst + oy * OW + v * 16, sm[v]);
        }
    }
}

PD_TARGET_AVX512 PD_HIDDEN void dwr_task(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz OW = a->OW, W = a->W, KH = a->KH, KW = a->KW;
    const isz nv = (OW + 15) / 16, mult = a->OC / a->C, plane = a->H * W;
    /* load masks per (kw, vector): output column x reads input x + kw*DW - PL; store masks per vector */
    __mmask16 lm[16][4], sm[4];
    for (isz v = 0; v < 4; v++) {
        sm[v] = 0;
        for (isz l = 0; l < 16; l++) sm[v] |= (__mmask16)((v * 16 + l < OW) << l);
        for (isz kw = 0; kw < 16; kw++) {
            const isz off = kw * a->DW - a->PL;
            lm[kw][v] = 0;
            for (isz l = 0; l < 16; l++) {
                const isz x = v * 16 + l, ix = x + off;
                lm[kw][v] |= (__mmask16)((x < OW && ix >= 0 && ix < W && kw < KW) << l);
            }
        }
    }
    const int three = dwr3_applies(a), s2 = a->SH == 2;
    __mmask16 l2[2][4]; /* stride 2: the two loads of 16 input columns from 32v */
    for (isz v = 0; v < 4; v++)
        for (isz h = 0; h < 2; h++) {
            l2[h][v] = 0;
            for (isz l = 0; l < 16; l++) l2[h][v] |= (__mmask16)((32 * v + 16 * h + l < W) << l);
        }
    const isz band = W <= 16 ? a->H : DWR_BAND_FLOATS / W; /* rows per band */
    for (isz p = begin; p < end; p++) {
        const isz n = p / a->OC, oc = p % a->OC;
        const float *src = a->x + (n * a->C + oc / mult) * plane, *wt = a->w + oc * KH * KW;
        float *dst = a->out + p * a->OH * OW;
        const dwr_ep ep = {_mm512_set1_ps(a->bias ? a->bias[oc] : 0.0f), _mm512_set1_ps(a->act.a0), a->bias != NULL,
                           a->act.kind == ACT_RELU || a->act.kind == ACT_RELU6, a->act.kind == ACT_RELU6};
        if (s2)
            dwr_s2_plane(a, src, wt, dst, ep, l2, sm, nv);
        else if (three) /* bands of rows (in L1), in each 16 columns at a time down the band */
            for (isz y0 = 0; y0 < a->H; y0 += band) {
                const isz y1 = a->H - y0 < band ? a->H : y0 + band;
                for (isz v = 0; v < nv; v++)
                    dwr3_plane(a, src + v * 16, wt, dst + v * 16, ep, lm[0][v], lm[1][v], lm[2][v], sm[v], y0, y1);
            }
        else if (KH == 5 && KW == 5 && a->DW == 1 && nv == 1) /* 14x14 maps and narrower (MobileNetV3's) */
            dwr5_plane(a, src, wt, dst, ep, lm, sm, 1);
        else if (KH == 5 && KW == 5 && a->DW == 1 && nv == 2)
            dwr5_plane(a, src, wt, dst, ep, lm, sm, 2);
        else switch (nv) { /* a constant vector count: accumulators in registers */
        case 1: dwr_plane(a, src, wt, dst, ep, lm, sm, 1); break;
        case 2: dwr_plane(a, src, wt, dst, ep, lm, sm, 2); break;
        case 3: dwr_plane(a, src, wt, dst, ep, lm, sm, 3); break;
        default: dwr_plane(a, src, wt, dst, ep, lm, sm, 4); break;
        }
        if (!ep.relu && a->act.kind != ACT_NONE) /* (dwr_store applies relu and relu6 only) */
            bias_act_copy(dst, dst, a->OH * OW, 0.0f, 0, &a->act);
    }
}

/* The row-vector form's 3x3 planes on AVX2 + FMA (dwr8_applies: the 3x3 stride-1 padding-1 and 3x3 stride-2
 * padding-1 convs dwr_applies takes at AVX-512): the same algorithm on vectors of 8 columns, the same products in the
 * same order (the same bits), masks as vectors of lanes (vmaskmovps loads; a row's last, partial vector stored
 * masked, the others whole). Measured in MobileNetV2 at AVX2, one Zen 5 core, against dw3 / dws2 (their planar
 * forms): see BENCHMARKS.md "AVX2 + FMA". */
typedef struct {
    __m256 bias, top;
    int has_bias, relu, relu6;
} dwr8_ep;
PD_TARGET_AVX2 static inline __attribute__((always_inline)) void dwr8_store(const dwr8_ep *e, __m256 y, float *dst,
                                                                            __m256i m, int whole) {
    if (e->has_bias) y = _mm256_add_ps(y, e->bias);
    if (e->relu) y = _mm256_max_ps(_mm256_setzero_ps(), y); /* (as dwr_store: NaN kept) */
    if (e->relu6) y = _mm256_min_ps(e->top, y);
    if (whole)
        _mm256_storeu_ps(dst, y);
    else
        _mm256_maskstore_ps(dst, m, y);
}

/* dwr3_plane on 8 columns (ml, mc, mr: the input columns x - 1, x, x + 1; ms the columns stored, whole: all 8) */
PD_TARGET_AVX2 static inline __attribute__((always_inline)) void dwr83_plane(const dw_args *a, const float *src,
                                                                             const float *wt, float *dst,
                                                                             const dwr8_ep ep, __m256i ml, __m256i mc,
                                                                             __m256i mr, __m256i ms, int whole, isz y0,
                                                                             isz y1) {
    const isz H = a->H, W = a->W;
    const __m256 zero = _mm256_setzero_ps();
    __m256 w[9];
    for (int i = 0; i < 9; i++) w[i] = _mm256_set1_ps(wt[i]);
    __m256 p0 = zero, p1 = zero, p2 = zero;
    if (y0 > 0) {
        const float *r = src + (y0 - 1) * W;
        p0 = _mm256_maskload_ps(r - 1, ml), p1 = _mm256_maskload_ps(r, mc), p2 = _mm256_maskload_ps(r + 1, mr);
    }
    const float *r0 = src + y0 * W;
    __m256 c0 = _mm256_maskload_ps(r0 - 1, ml), c1 = _mm256_maskload_ps(r0, mc), c2 = _mm256_maskload_ps(r0 + 1, mr);
    for (isz oy = y0; oy < y1; oy++) {
        __m256 n0 = zero, n1 = zero, n2 = zero;
        if (oy + 1 < H) {
            const float *r = src + (oy + 1) * W;
            n0 = _mm256_maskload_ps(r - 1, ml), n1 = _mm256_maskload_ps(r, mc), n2 = _mm256_maskload_ps(r + 1, mr);
        }
        const __m256 y = DWR_TAPS9(_mm256_mul_ps, _mm256_fmadd_ps);
        dwr8_store(&ep, y, dst + oy * W, ms, whole);
        p0 = c0, p1 = c1, p2 = c2, c0 = n0, c1 = n1, c2 = n2;
    }
}

/* dwr_s2_plane on 8 output columns a vector: an input row's 16 columns from 16v as two loads, their even / odd lanes
 * picked by in-lane shuffles and a cross-lane permute, the columns 2x - 1 the odd ones rotated up a lane with lane 0
 * from the vector before */
PD_TARGET_AVX2 static void dwr8_s2_plane(const dw_args *a, const float *src, const float *wt, float *dst,
                                         const dwr8_ep ep, const __m256i lm[2][8], const __m256i sm[8], isz nv) {
    const isz OH = a->OH, OW = a->OW, H = a->H, W = a->W;
    const __m256 zero = _mm256_setzero_ps();
    const __m256i rot = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
    __m256 w[9];
    for (int i = 0; i < 9; i++) w[i] = _mm256_set1_ps(wt[i]);
    for (isz oy = 0; oy < OH; oy++) {
        dwr_s2_prefetch(src, oy, H, W);
        __m256 carry[3] = {zero, zero, zero};
        for (isz v = 0; v < nv; v++) {
            __m256 y = zero;
            for (isz kh = 0; kh < 3; kh++) {
                const isz iy = 2 * oy - 1 + kh;
                if (iy < 0 || iy >= H) continue;
                const float *r = src + iy * W + 16 * v;
                const __m256 lo = _mm256_maskload_ps(r, lm[0][v]), hi = _mm256_maskload_ps(r + 8, lm[1][v]);
                const __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(
                                     _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8)),
                             o = _mm256_castpd_ps(_mm256_permute4x64_pd(
                                     _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));
                const __m256 left = _mm256_blend_ps(_mm256_permutevar8x32_ps(o, rot),
                                                    _mm256_permutevar8x32_ps(carry[kh], rot), 0x01);
                carry[kh] = o;
                y = _mm256_fmadd_ps(left, w[kh * 3], y);
                y = _mm256_fmadd_ps(e, w[kh * 3 + 1], y);
                y = _mm256_fmadd_ps(o, w[kh * 3 + 2], y);
            }
            dwr8_store(&ep, y, dst + oy * OW + v * 8, sm[v], 8 * v + 8 <= OW);
        }
    }
}

/* (the other stride-1 kernels stay planar at AVX2: dwr_plane on 8-float vectors, rows * vectors <= 8 accumulators,
 * measured slower there, one Zen 5 core: 240ch 5x5 on 14x14 0.069 -> 0.092 ms, 120ch 5x5 on 28x28 0.099 -> 0.16) */
PD_HIDDEN int dwr8_applies(const dw_args *a) {
    return g_avx2_tiles && g_dwr_on && a->OW > 8 && a->OW <= DWR_MAX_W &&
           ((a->SH == 1 && a->SW == 1 && a->DH == 1 && dwr3_applies(a)) || dwr_s2_applies(a));
}

PD_TARGET_AVX2 PD_HIDDEN void dwr8_task(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz OW = a->OW, W = a->W, nv = (OW + 7) / 8, mult = a->OC / a->C, plane = a->H * W;
    /* per vector v (8 output columns x = 8v + l): input columns x - 1, x, x + 1 (stride 1), the 16 input columns
     * from 16v (stride 2), the stored columns */
    __m256i ml[8], mc[8], mr[8], sm[8], l2[2][8];
    for (isz v = 0; v < 8; v++) {
        int32_t t[5][8];
        for (isz l = 0; l < 8; l++) {
            const isz x = v * 8 + l;
            t[0][l] = x < OW && x - 1 >= 0 && x - 1 < W ? -1 : 0;
            t[1][l] = x < OW && x < W ? -1 : 0;
            t[2][l] = x < OW && x + 1 < W ? -1 : 0;
            t[3][l] = 16 * v + l < W ? -1 : 0;
            t[4][l] = 16 * v + 8 + l < W ? -1 : 0;
        }
        ml[v] = _mm256_loadu_si256((const __m256i *)t[0]);
        mc[v] = _mm256_loadu_si256((const __m256i *)t[1]);
        mr[v] = _mm256_loadu_si256((const __m256i *)t[2]);
        sm[v] = mc[v]; /* (OW == W here for stride 1; stride 2 uses x < OW only) */
        l2[0][v] = _mm256_loadu_si256((const __m256i *)t[3]);
        l2[1][v] = _mm256_loadu_si256((const __m256i *)t[4]);
        if (a->SH == 2) {
            for (isz l = 0; l < 8; l++) t[0][l] = v * 8 + l < OW ? -1 : 0;
            sm[v] = _mm256_loadu_si256((const __m256i *)t[0]);
        }
    }
    const isz band = W <= 8 ? a->H : DWR_BAND_FLOATS / W;
    for (isz p = begin; p < end; p++) {
        const isz n = p / a->OC, oc = p % a->OC;
        const float *src = a->x + (n * a->C + oc / mult) * plane, *wt = a->w + oc * 9;
        float *dst = a->out + p * a->OH * OW;
        const dwr8_ep ep = {_mm256_set1_ps(a->bias ? a->bias[oc] : 0.0f), _mm256_set1_ps(a->act.a0),
                            a->bias != NULL, a->act.kind == ACT_RELU || a->act.kind == ACT_RELU6,
                            a->act.kind == ACT_RELU6};
        if (a->SH == 2)
            dwr8_s2_plane(a, src, wt, dst, ep, l2, sm, nv);
        else
            for (isz y0 = 0; y0 < a->H; y0 += band) {
                const isz y1 = a->H - y0 < band ? a->H : y0 + band;
                for (isz v = 0; v < nv; v++)
                    dwr83_plane(a, src + v * 8, wt, dst + v * 8, ep, ml[v], mc[v], mr[v], sm[v], 8 * v + 8 <= OW, y0,
                                y1);
            }
        if (!ep.relu && a->act.kind != ACT_NONE) bias_act_copy(dst, dst, a->OH * OW, 0.0f, 0, &a->act);
    }
}
#else
PD_HIDDEN int dwr_applies(const dw_args *a) { (void)a; return 0; }
PD_HIDDEN int dwr8_applies(const dw_args *a) { (void)a; return 0; }
PD_HIDDEN void dwr_task(void *vctx, isz begin, isz end) { (void)vctx, (void)begin, (void)end; }  /* not called */
PD_HIDDEN void dwr8_task(void *vctx, isz begin, isz end) { (void)vctx, (void)begin, (void)end; } /* not called */
#endif
