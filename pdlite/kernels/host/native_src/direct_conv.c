/* pdlite native host kernels: direct conv of few input channels (see common.h) */
#include "common.h"
#include "avx2.h" /* x86-64: pd_v8, the AVX2 tiles below (g_avx2_tiles) */

/* ------------------------------------------------------------------------------------------------ */
/* direct_conv: out[n] = act(conv(x[n], W) + bias) for convs with a short reduction over few input   */
/* channels (a network's stem: 3 channels, 3x3 to 7x7, stride 1 or 2), where an im2col GEMM spends    */
/* much of its time writing and reading back columns (C*KH*KW rows of OH*OW floats for a product of    */
/* few rows). Here a band of output rows reads its input rows from one zero-padded copy (so no tap     */
/* checks an edge), 16 output columns in a vector times 16 output channels (16 accumulators); each tap */
/* one input vector (stride 2: the even lanes of two loads) times 16 broadcast weights. Weights packed */
/* once as [oc block][c][kh][kw][16] (zeros past OC).                                                  */
/* ------------------------------------------------------------------------------------------------ */

#define DC_OCB 16  /* output channels per block (accumulators) */
#define DC_ROWS 4  /* output rows per work item */

typedef struct {
    const float *x, *wp, *bias;
    float *out;
    isz N, C, H, W, OC, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
    act_t act;
} dc_args;

/* acc[j] += sum over the taps of input vector * w[j], the input rows from the band's padded copy (rows of L floats,
 * every read inside; sw: 1 or 2, a constant) */
PD_INLINE void dc_taps(pd_v16 acc[DC_OCB], const float *band, isz L, isz R, const float *restrict wp, isz r0, isz s,
                       const dc_args *a, const isz sw) {
    const isz C = a->C, KH = a->KH, KW = a->KW, DW = a->DW;
    for (isz c = 0; c < C; c++)
        for (isz ky = 0; ky < KH; ky++) {
            const float *row = band + (c * R + r0 + ky * a->DH) * L + s;
            const float *wt = wp + (c * KH + ky) * KW * DC_OCB;
            for (isz kx = 0; kx < KW; kx++, wt += DC_OCB, row += DW) {
                pd_v16 v;
                if (sw == 1) {
                    memcpy(&v, row, sizeof(v));
                } else {
                    pd_v16 lo, hi;
                    memcpy(&lo, row, sizeof(lo));
                    memcpy(&hi, row + 16, sizeof(hi));
                    v = PD_SHUFFLE16(lo, hi, PD_EVEN16);
                }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 16
#endif
                for (int j = 0; j < DC_OCB; j++) acc[j] += v * wt[j];
            }
        }
}

#ifdef PD_X86_DISPATCH
/* dc_taps on AVX2's 16 registers (g_avx2_tiles): 8 output columns times the block's channels j0 .. j0 + 7 (8
 * accumulators; 16 would leave none for the input and the weights); the same taps in the same order, one FMA each,
 * so the same sums as dc_task's and dcv_task's AVX-512 tiles */
PD_INLINE void dc_taps_v8(pd_v8 acc[8], const float *band, isz L, isz R, const float *restrict wp, isz r0, isz s,
                          const dc_args *a, const isz sw, isz j0) {
    const isz C = a->C, KH = a->KH, KW = a->KW, DW = a->DW;
    for (isz c = 0; c < C; c++)
        for (isz ky = 0; ky < KH; ky++) {
            const float *row = band + (c * R + r0 + ky * a->DH) * L + s;
            const float *wt = wp + (c * KH + ky) * KW * DC_OCB + j0;
            for (isz kx = 0; kx < KW; kx++, wt += DC_OCB, row += DW) {
                pd_v8 v = pd_load8(row);
                if (sw == 2) v = PD_SHUFFLE8(v, pd_load8(row + 8), PD_EVEN8);
                for (int j = 0; j < 8; j++) acc[j] += v * wt[j];
            }
        }
}

/* one output row oy of channels [oc0, oc0 + noc) (on: the block's first channel plane) by dc_taps_v8: the sums stored,
 * then bias and activation over each channel's row (bias_act_copy: the operations of bias_act_v16, the same bits) */
PD_INLINE void dc_row_v8(const dc_args *a, const float *band, isz L, isz R, const float *restrict wp, isz oy, isz oy0,
                         float *on, isz oc0, isz noc) {
    const isz OH = a->OH, OW = a->OW;
    for (isz j0 = 0; j0 < noc; j0 += 8)
        for (isz ox0 = 0; ox0 < OW; ox0 += 8) {
            pd_v8 acc[8];
            for (int j = 0; j < 8; j++) acc[j] = (pd_v8){0};
            if (a->SW == 2)
                dc_taps_v8(acc, band, L, R, wp, (oy - oy0) * a->SH, ox0 * 2, a, 2, j0);
            else
                dc_taps_v8(acc, band, L, R, wp, (oy - oy0) * a->SH, ox0, a, 1, j0);
            const isz nx = OW - ox0 < 8 ? OW - ox0 : 8;
            for (isz j = j0; j < j0 + 8 && j < noc; j++) {
                float *dst = on + j * OH * OW + oy * OW + ox0;
                if (nx == 8) {
                    memcpy(dst, &acc[j - j0], sizeof(pd_v8));
                } else {
                    float t[8];
                    memcpy(t, &acc[j - j0], sizeof(t));
                    memcpy(dst, t, (size_t)nx * sizeof(float));
                }
            }
        }
    for (isz j = 0; j < noc; j++)
        bias_act_copy(on + j * OH * OW + oy * OW, on + j * OH * OW + oy * OW, OW, a->bias ? a->bias[oc0 + j] : 0.0f,
                      a->bias != NULL, &a->act);
}
#endif

/* the padded row length of direct_conv's band copies: every vector's reads (16 columns from s = 16*SW*v, its taps
 * up to (KW-1)*DW further, stride 2 reading 32 floats) inside */
PD_INLINE isz dc_row_len(const dc_args *a) {
    const isz nv = (a->OW + 15) / 16;
    const isz need = (nv - 1) * 16 * a->SW + (a->KW - 1) * a->DW + 16 * a->SW;
    const isz img = a->PL + a->W;
    return need > img ? need : img;
}

/* items: (image, band of DC_ROWS output rows); per item, the band's input rows are copied once, zero-padded (rows
 * above / below the image zero too), then every output channel block and vector reads them without edge checks */
PD_INLINE void dc_task_impl(void *vctx, isz begin, isz end) {
    const dc_args args = *(const dc_args *)vctx, *a = &args; /* a local copy, as dcv_task's (0.97x the time) */
    const isz OH = a->OH, OW = a->OW, H = a->H, W = a->W, C = a->C;
    const isz nocb = (a->OC + DC_OCB - 1) / DC_OCB, nband = (OH + DC_ROWS - 1) / DC_ROWS;
    const isz taps = C * a->KH * a->KW, L = dc_row_len(a);
    const isz R = (DC_ROWS - 1) * a->SH + (a->KH - 1) * a->DH + 1; /* input rows per band */
    const int in_regs = act_in_regs(&a->act);
    float *band = (float *)pd_scratch((size_t)(C * R * L) * sizeof(float));
    if (!band) return;
    for (isz item = begin; item < end; item++) {
        const isz n = item / nband, oy0 = item % nband * DC_ROWS, oy1 = OH - oy0 < DC_ROWS ? OH : oy0 + DC_ROWS;
        const isz rows = (oy1 - oy0 - 1) * a->SH + (a->KH - 1) * a->DH + 1;
        for (isz c = 0; c < C; c++) /* band row r: image row oy0*SH - PT + r, column i: image column i - PL */
            gather_plane(band + c * R * L, a->x + (n * C + c) * H * W, H, W, rows, L, oy0 * a->SH - a->PT, -a->PL,
                         1, 1);
        for (isz ob = 0; ob < nocb; ob++) {
            const isz oc0 = ob * DC_OCB, noc = a->OC - oc0 < DC_OCB ? a->OC - oc0 : DC_OCB;
            const float *restrict wp = a->wp + ob * taps * DC_OCB;
            float *on = a->out + (n * a->OC + oc0) * OH * OW;
            float bias[DC_OCB] = {0};
            if (a->bias)
                for (isz j = 0; j < noc; j++) bias[j] = a->bias[oc0 + j];
            for (isz oy = oy0; oy < oy1; oy++) {
#ifdef PD_X86_DISPATCH
                if (g_avx2_tiles) {
                    dc_row_v8(a, band, L, R, wp, oy, oy0, on, oc0, noc);
                    continue;
                }
#endif
                for (isz ox0 = 0; ox0 < OW; ox0 += 16) {
                    pd_v16 acc[DC_OCB];
                    for (int j = 0; j < DC_OCB; j++) acc[j] = (pd_v16){0};
                    if (a->SW == 2)
                        dc_taps(acc, band, L, R, wp, (oy - oy0) * a->SH, ox0 * 2, a, 2);
                    else
                        dc_taps(acc, band, L, R, wp, (oy - oy0) * a->SH, ox0, a, 1);
                    const isz nx = OW - ox0 < 16 ? OW - ox0 : 16;
                    for (isz j = 0; j < noc; j++) {
                        pd_v16 y = acc[j];
                        if (in_regs) bias_act_v16(&y, bias[j], a->bias != NULL, &a->act);
                        else if (a->bias) y += bias[j];
                        float *dst = on + j * OH * OW + oy * OW + ox0;
                        if (nx == 16) {
                            memcpy(dst, &y, sizeof(y));
                        } else {
                            float t[16];
                            memcpy(t, &y, sizeof(t));
                            memcpy(dst, t, (size_t)nx * sizeof(float));
                        }
                    }
                }
                if (!in_regs) /* the other activations over the row just written (bias already added) */
                    for (isz j = 0; j < noc; j++)
                        bias_act_copy(on + j * OH * OW + oy * OW, on + j * OH * OW + oy * OW, OW, 0.0f, 0, &a->act);
            }
        }
    }
    free(band);
}

PD_VERSIONS(dc_task)

#ifdef PD_X86_DISPATCH
#include <immintrin.h>
/* The AVX-512 form for windows up to 3 wide (whole blocks of 16 output channels; wider windows keep dc_task, 1.04x
 * faster on ResNet's 7x7 stem): the same tiles and sums as dc_task, but the input rows read in place, the columns a
 * tap reads outside the image (padding, past the last column) masked off in the loads and the rows outside it
 * skipped, so no band is copied; the epilogue's activation a constant of the row's code (the 16 accumulators stay
 * in registers through the stores); MobileNet's stem (3 channels, 3x3) a constant geometry of the tap loop. Its
 * arguments are read from a local copy (dcv_task): through the task's pointer every field was reloaded after each
 * store to the output (a store through a float pointer may alias the arguments' floats, and memcpy's stores
 * anything). One Xeon (Emerald Rapids) core, MobileNet's 3x3 / 2 stems: to 32 channels 0.179 -> 0.137 ms (0.77x;
 * batch 4 0.77x), to 16 channels 0.71x. A software prefetch of the next row's input rows made it slower. */

/* lanes l < 16 with 0 <= base + l < w */
static inline __mmask16 dcv_mask(isz base, isz w) {
    const isz lo = base < 0 ? -base : 0, hi = w - base < 16 ? w - base : 16;
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* acc[j] += sum over the taps of the input vector (16 output columns from input column b0, stride sw) * weight j;
 * mlo / mhi: the loads' masks per tap column (NULL: every lane inside) */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void dcv_taps(const dc_args *a, pd_v16 acc[DC_OCB],
                                                                            isz n, isz oy, const float *restrict wp,
                                                                            isz b0, const isz sw,
                                                                            const __mmask16 *mlo,
                                                                            const __mmask16 *mhi, const isz C,
                                                                            const isz KH, const isz KW) {
    const isz H = a->H, W = a->W;
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    for (isz c = 0; c < C; c++)
        for (isz ky = 0; ky < KH; ky++) {
            const isz iy = oy * a->SH - a->PT + ky * a->DH;
            if (iy < 0 || iy >= H) continue; /* a row of padding: zeros */
            const float *row = a->x + ((n * C + c) * H + iy) * W + b0;
            const float *wt = wp + (c * KH + ky) * KW * DC_OCB;
            for (isz kx = 0; kx < KW; kx++, wt += DC_OCB, row += a->DW) {
                __m512 lo, hi = _mm512_setzero_ps();
                if (mlo) {
                    lo = _mm512_maskz_loadu_ps(mlo[kx], row);
                    if (sw == 2) hi = _mm512_maskz_loadu_ps(mhi[kx], row + 16);
                } else {
                    lo = _mm512_loadu_ps(row);
                    if (sw == 2) hi = _mm512_loadu_ps(row + 16);
                }
                const pd_v16 v = (pd_v16)(sw == 2 ? _mm512_permutex2var_ps(lo, even, hi) : lo);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 16
#endif
                for (int j = 0; j < DC_OCB; j++) acc[j] += v * wt[j];
            }
        }
}

/* dcv_taps, with MobileNet's stem geometry (3 channels, 3x3) as constants where it is that (0.93x the time) */
#define dcv_taps3(a, acc, n, oy, wp, b0, sw, mlo, mhi)                                                             \
    do {                                                                                                           \
        if ((a)->C == 3 && (a)->KH == 3 && (a)->KW == 3)                                                           \
            dcv_taps(a, acc, n, oy, wp, b0, sw, mlo, mhi, 3, 3, 3);                                                \
        else                                                                                                       \
            dcv_taps(a, acc, n, oy, wp, b0, sw, mlo, mhi, (a)->C, (a)->KH, (a)->KW);                               \
    } while (0)

/* one output row oy of 16 channels (block ob) of image n: kind, the activation in registers (a constant where
 * inlined), sw the stride along the width (1 or 2, a constant) */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void dcv_row(const dc_args *a, isz n, isz ob, isz oy,
                                                                           const int kind, const isz sw) {
    const isz C = a->C, W = a->W, KH = a->KH, KW = a->KW, OW = a->OW, OH = a->OH;
    const isz taps = C * KH * KW, oc0 = ob * DC_OCB;
    const float *restrict wp = a->wp + ob * taps * DC_OCB;
    float *on = a->out + (n * a->OC + oc0) * OH * OW + oy * OW;
    act_t ak = a->act;
    ak.kind = kind;
    for (isz ox0 = 0; ox0 < OW; ox0 += 16) {
        pd_v16 acc[DC_OCB];
        for (int j = 0; j < DC_OCB; j++) acc[j] = (pd_v16){0};
        const isz b0 = ox0 * sw - a->PL; /* the input column of lane 0 at tap column 0 */
        /* every lane of every tap inside the row: plain loads (the lanes past OW read real columns, never stored);
         * else masked loads, their masks per tap column */
        if (b0 >= 0 && b0 + (KW - 1) * a->DW + 16 * sw <= W)
            dcv_taps3(a, acc, n, oy, wp, b0, sw, NULL, NULL);
        else {
            __mmask16 mlo[16], mhi[16];
            for (isz kx = 0; kx < KW; kx++) {
                mlo[kx] = dcv_mask(b0 + kx * a->DW, W);
                mhi[kx] = dcv_mask(b0 + kx * a->DW + 16, W);
            }
            dcv_taps3(a, acc, n, oy, wp, b0, sw, mlo, mhi);
        }
        const isz nx = OW - ox0 < 16 ? OW - ox0 : 16;
        const __mmask16 sm = (__mmask16)((1u << nx) - 1);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 16
#endif
        for (int j = 0; j < DC_OCB; j++) {
            pd_v16 y = acc[j];
            if (kind != -1) bias_act_v16(&y, a->bias ? a->bias[oc0 + j] : 0.0f, a->bias != NULL, &ak);
            else if (a->bias) y += a->bias[oc0 + j];
            _mm512_mask_storeu_ps(on + j * OH * OW + ox0, sm, (__m512)y);
        }
    }
    if (kind == -1) /* the other activations over the row just written (bias already added) */
        for (isz j = 0; j < DC_OCB; j++) bias_act_copy(on + j * OH * OW, on + j * OH * OW, OW, 0.0f, 0, &a->act);
}

/* items: (image, band of DC_ROWS output rows), as dc_task; OC a multiple of 16 */
PD_TARGET_AVX512 static void dcv_task(void *vctx, isz begin, isz end) {
    const dc_args args = *(const dc_args *)vctx, *a = &args; /* a local copy: see above */
    const isz nocb = a->OC / DC_OCB, nband = (a->OH + DC_ROWS - 1) / DC_ROWS;
    /* the activation as a constant of the row's code: those of act_in_regs, or -1 (applied after) */
    const int kind = act_in_regs(&a->act) ? a->act.kind : -1;
    for (isz item = begin; item < end; item++) {
        const isz n = item / nband, oy0 = item % nband * DC_ROWS;
        const isz oy1 = a->OH - oy0 < DC_ROWS ? a->OH : oy0 + DC_ROWS;
        for (isz ob = 0; ob < nocb; ob++)
            for (isz oy = oy0; oy < oy1; oy++) {
#define DCV_ROW(k)                                                                                                 \
    case k:                                                                                                        \
        if (a->SW == 2)                                                                                            \
            dcv_row(a, n, ob, oy, k, 2);                                                                           \
        else                                                                                                       \
            dcv_row(a, n, ob, oy, k, 1);                                                                           \
        break;
                switch (kind) {
                    DCV_ROW(ACT_NONE)
                    DCV_ROW(ACT_RELU)
                    DCV_ROW(ACT_RELU6)
                    DCV_ROW(ACT_LEAKY)
                    DCV_ROW(ACT_HSWISH)
                default:
                    if (a->SW == 2)
                        dcv_row(a, n, ob, oy, -1, 2);
                    else
                        dcv_row(a, n, ob, oy, -1, 1);
                }
#undef DCV_ROW
            }
    }
}
#endif

/* wp[ob][c][kh][kw][j] = w[ob*16 + j][c][kh][kw] (0 past OC) */
PD_HIDDEN PyObject *py_direct_conv_pack(PyObject *self, PyObject *args) {
    PyObject *wo, *po;
    isz oc, c, kh, kw;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nnnn)", &wo, &po, &oc, &c, &kh, &kw)) return NULL;
    if (oc <= 0 || c <= 0 || kh <= 0 || kw <= 0) {
        PyErr_SetString(PyExc_ValueError, "direct_conv_pack: bad shape");
        return NULL;
    }
    const isz taps = c * kh * kw, nocb = (oc + DC_OCB - 1) / DC_OCB;
    pd_bufs bs = {0};
    const float *w = bufs_take(&bs, wo, 0, oc * taps, "direct_conv_pack filter");
    float *p = bufs_take(&bs, po, 1, nocb * taps * DC_OCB, "direct_conv_pack output");
    if (bs.failed) return NULL;
    for (isz ob = 0; ob < nocb; ob++)
        for (isz t = 0; t < taps; t++)
            for (isz j = 0; j < DC_OCB; j++) {
                const isz o = ob * DC_OCB + j;
                p[(ob * taps + t) * DC_OCB + j] = o < oc ? w[o * taps + t] : 0.0f;
            }
    bufs_release(&bs);
    Py_RETURN_NONE;
}

PD_HIDDEN PyObject *py_direct_conv(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *wo, *bo, *oo, *ap;
    dc_args a;
    int act;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnnnnnnnnnn)iO", &xo, &wo, &bo, &oo, &a.N, &a.C, &a.H, &a.W, &a.OC, &a.OH,
                          &a.OW, &a.KH, &a.KW, &a.SH, &a.SW, &a.DH, &a.DW, &a.PT, &a.PL, &act, &ap))
        return NULL;
    if (a.N < 0 || a.C <= 0 || a.H < 0 || a.W < 0 || a.OC <= 0 || a.OH < 0 || a.OW < 0 || a.KH <= 0 || a.KW <= 0 ||
        a.SH <= 0 || (a.SW != 1 && a.SW != 2) || a.DH <= 0 || a.DW <= 0) {
        PyErr_SetString(PyExc_ValueError, "direct_conv: bad geometry (strides along the width 1 or 2)");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    const isz nocb = (a.OC + DC_OCB - 1) / DC_OCB;
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.N * a.C * a.H * a.W, "direct_conv input");
    a.wp = bufs_take(&bs, wo, 0, nocb * a.C * a.KH * a.KW * DC_OCB, "direct_conv packed filter");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.OC, "direct_conv bias");
    a.out = bufs_take(&bs, oo, 1, a.N * a.OC * a.OH * a.OW, "direct_conv output");
    if (bs.failed) return NULL;
    const isz items = a.N * ((a.OH + DC_ROWS - 1) / DC_ROWS);
    if (items > 0 && a.OW > 0) {
        Py_BEGIN_ALLOW_THREADS;
#ifdef PD_X86_DISPATCH
        if (g_avx512 && a.OC % DC_OCB == 0 && a.KW <= 3)
            parallel_for(dcv_task, &a, items, grain_for(items, 4));
        else
#endif
            parallel_for(dc_task, &a, items, grain_for(items, 4));
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
