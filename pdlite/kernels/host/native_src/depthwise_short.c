/* pdlite native host kernels: depthwise conv2d on short maps (see common.h, depthwise.c)
 *
 * Maps with few output rows for the window's height (dws_applies: PP-OCR's direction classifier runs 5x5 convs on
 * 2x96 and 3x96 maps, two or three of the five kernel rows of each output row in the padding). The other forms
 * run every tap over a zero-padded plane or block (the planar ones, the channel-blocked one: 5x5 on 2 rows, 60% of
 * the products on zeros) or take rows up to 64 wide only (the row-vector form). Here, per plane: the input rows
 * copied once into rows padded left and right with zeros (each kernel row's taps then read unit-stride runs), and
 * each output row computed from the kernel rows that fall inside the image only, one pass over the row per kernel
 * row, its taps in registers (vectorised along the row by the compiler: 16 floats a step with AVX-512, 8 with AVX2);
 * at AVX-512 a 5x5 kernel's output row in one pass over all its kernel rows in range (dws_row5).
 * Column stride 1 only (the strided column taps would be gathers).
 * Sums: per output, from 0, one multiply-add per tap in range, kernel rows then columns ascending, as the
 * channel-blocked form's general loop (depthwise.c dwb), which adds the taps in the padding as products with zeros:
 * with finite weights the same sums. The same expressions on every ISA (FMA contracted where there is one): AVX-512
 * and AVX2 give the same bits. */
#include "depthwise.h"

#define DWS_MAX_ROW_FLOATS 65536 /* the padded rows of one plane (256 KiB) */

/* the geometry this form takes (where the row-vector form does not, depthwise.c): column stride 1, rows at least 16
 * wide (shorter ones vectorise poorly: the channel-blocked form), at most KH + 1 output rows (a short map: the
 * padding's share of the taps is large; 3x3 convs on 6x96 maps, a third of them, measured 1.25x faster at
 * AVX-512 but 0.9x at AVX2). One Zen 4 core (loaded, noisy), against the forms that took them (AVX-512: the
 * channel-blocked one; AVX2: the planar one): 200ch 5x5 on 2x96 76 -> 17 us (AVX2 76-116 -> 17), 88ch 5x5 on 3x96
 * 66 -> 13 (64 -> 15), 104ch 5x5 / (2, 1) to 2x96 61 -> 12 (46 -> 12), 32ch 5x5 on 6x96 17 -> 13 (42 -> 14) */
PD_HIDDEN int dws_applies(const dw_args *a) {
    const isz wp = a->OW + (a->KW - 1) * a->DW;
    return g_dwr_on && a->SW == 1 && a->OW >= 16 && a->OH <= a->KH + 1 && a->H * wp <= DWS_MAX_ROW_FLOATS;
}

/* o[q] += sum_j k[j] * s[q + j*dw] for q < n, one multiply-add per tap, j ascending */
PD_INLINE void dws_row(float *restrict o, const float *restrict s, const float *restrict k, isz kw, isz dw, isz n) {
    if (kw == 5 && dw == 1) {
        const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4];
        PD_SIMD for (isz q = 0; q < n; q++) {
            float v = o[q];
            v += k0 * s[q];
            v += k1 * s[q + 1];
            v += k2 * s[q + 2];
            v += k3 * s[q + 3];
            v += k4 * s[q + 4];
            o[q] = v;
        }
    } else if (kw == 3 && dw == 1) {
        const float k0 = k[0], k1 = k[1], k2 = k[2];
        PD_SIMD for (isz q = 0; q < n; q++) {
            float v = o[q];
            v += k0 * s[q];
            v += k1 * s[q + 1];
            v += k2 * s[q + 2];
            o[q] = v;
        }
    } else {
        for (isz j = 0; j < kw; j++) { /* other kernels: a pass per tap (the same operations in the same order) */
            const float kj = k[j];
            const float *restrict sj = s + j * dw;
            PD_SIMD for (isz q = 0; q < n; q++) o[q] += kj * sj[q];
        }
    }
}

/* One output row of a 5x5 kernel without column dilation in one pass: o[q] = the sum, from 0, over the nr kernel rows
 * in range (ascending) of their 5 taps (ascending) k[r][j] * s[r][q + j]: dws_row's products in its order (the
 * same bits), the sum in a register instead of a zeroed row stored and reloaded once per kernel row (nr a constant
 * where inlined). At AVX-512 only (up to 25 weights and the sums in its 32 registers; AVX2's 16 spilled them: 10-20%
 * slower there). One Zen 5 core (loaded), PP-OCR cls's convs at AVX-512: 200ch on 2x96 18.4 -> 16.2 us, 88ch on
 * 3x96 15.4 -> 12.6, 104ch 5x5 / (2, 1) on 3x96 14.1 -> 10.8 */
PD_INLINE void dws_row5(float *restrict o, const float *const *sr, const float *const *kr, const int nr, isz n) {
    float k[5][5];
    const float *s[5];
    for (int r = 0; r < nr; r++) {
        s[r] = sr[r];
        for (int j = 0; j < 5; j++) k[r][j] = kr[r][j];
    }
    PD_SIMD for (isz q = 0; q < n; q++) {
        float v = 0.0f;
        for (int r = 0; r < nr; r++) {
            v += k[r][0] * s[r][q];
            v += k[r][1] * s[r][q + 1];
            v += k[r][2] * s[r][q + 2];
            v += k[r][3] * s[r][q + 3];
            v += k[r][4] * s[r][q + 4];
        }
        o[q] = v;
    }
}

PD_INLINE void dws_task_impl(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz H = a->H, W = a->W, OH = a->OH, OW = a->OW, KH = a->KH, KW = a->KW;
    const isz WP = OW + (KW - 1) * a->DW, mult = a->OC / a->C;
    /* input column ix lands at WP column ix + PL: the columns [0, cnt) of each row that some output reads */
    isz cnt = WP - a->PL < W ? WP - a->PL : W;
    if (cnt < 0) cnt = 0;
    float *rows = (float *)pd_scratch((size_t)(H * WP) * sizeof(float));
    if (!rows) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    memset(rows, 0, (size_t)(H * WP) * sizeof(float)); /* the margins stay zero: only [PL, PL + cnt) is copied */
    for (isz p = begin; p < end; p++) {
        const isz n = p / a->OC, oc = p % a->OC;
        const float *src = a->x + (n * a->C + oc / mult) * H * W, *k = a->w + oc * KH * KW;
        if (cnt > 0)
            for (isz iy = 0; iy < H; iy++) memcpy(rows + iy * WP + a->PL, src + iy * W, (size_t)cnt * sizeof(float));
        const float b = a->bias ? a->bias[oc] : 0.0f;
        for (isz oy = 0; oy < OH; oy++) {
            float *o = a->out + p * OH * OW + oy * OW;
            if (KW == 5 && a->DW == 1 && KH <= 5 && g_avx512) {
                const float *sr[5], *kr[5];
                int nr = 0;
                for (isz i = 0; i < KH; i++) {
                    const isz iy = oy * a->SH - a->PT + i * a->DH;
                    if (iy < 0 || iy >= H) continue;
                    sr[nr] = rows + iy * WP, kr[nr] = k + i * KW, nr++;
                }
                switch (nr) {
                case 1: dws_row5(o, sr, kr, 1, OW); break;
                case 2: dws_row5(o, sr, kr, 2, OW); break;
                case 3: dws_row5(o, sr, kr, 3, OW); break;
                case 4: dws_row5(o, sr, kr, 4, OW); break;
                case 5: dws_row5(o, sr, kr, 5, OW); break;
                default: memset(o, 0, (size_t)OW * sizeof(float)); break;
                }
            } else {
                memset(o, 0, (size_t)OW * sizeof(float));
                for (isz i = 0; i < KH; i++) {
                    const isz iy = oy * a->SH - a->PT + i * a->DH;
                    if (iy < 0 || iy >= H) continue; /* a kernel row in the padding: its taps add nothing */
                    dws_row(o, rows + iy * WP, k + i * KW, KW, a->DW, OW);
                }
            }
            bias_act_copy(o, o, OW, b, a->bias != NULL, &a->act);
        }
    }
    free(rows);
}

PD_VERSIONS(dws_task)

PD_HIDDEN void dws_run(void *vctx, isz begin, isz end) { dws_task(vctx, begin, end); }
