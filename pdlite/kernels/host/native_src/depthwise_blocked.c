/* pdlite native host kernels: the depthwise conv's channel-blocked form for small maps (see depthwise.h; picked by
 * depthwise.c) */
#include "depthwise.h"
#include "avx2.h" /* x86-64: pd_v8 (the AVX2 rows) */

/* Small output maps (dwb_applies): 16 output channels at a time, vectorised along the channels. The planar forms
 * above spend most of a 7x7 or 14x14 plane on its edges and on per-plane and per-row work; here the 16 channels'
 * input planes are laid out pixel-major in a zero-padded buffer [HP][WP][16] (the padding needs no edge cases), each
 * output pixel is one vector of 16 channels (one vector FMA per tap), and the [OH*OW][16] result is written back
 * to the 16 output planes, with bias and activation applied per plane while it is in L1. */
#define DWB_MAX_OUT 1024       /* output pixels per plane up to which this form is used (28x28 and below) */
#define DWB_MAX_FLOATS 65536   /* the padded input block's floats (256 KiB) */
/* AVX2: up to 16x16 outputs, the pixel-major copies by 8x8 transposes (dwb_in_v8, dwb_out_v8; lane by lane before, and
 * 8x8 outputs the limit: 14x14 was no faster than the planar form then). One Zen 5 core (loaded, thread CPU time),
 * MobileNetV3-small's layers, against the planar form / the blocked one with lane-by-lane copies: 240ch 5x5 on
 * 14x14 69 -> 50 us, 144ch 41 -> 31, 120ch 35 -> 27, 96ch 5x5 / 2 to 14x14 38 -> 30; 7x7 outputs 44 -> 34 (576ch
 * 5x5), 34 -> 24 (288ch 5x5 / 2). AVX-512 on the same: 30, 20, 17, 15, 20, 14 */
#define DWB8_MAX_OUT 256

PD_HIDDEN int dwb_applies(const dw_args *a) {
    const isz hp = (a->OH - 1) * a->SH + (a->KH - 1) * a->DH + 1, wp = (a->OW - 1) * a->SW + (a->KW - 1) * a->DW + 1;
    return (g_shuffles16 || (g_avx2_tiles && a->OH * a->OW <= DWB8_MAX_OUT)) && a->OH * a->OW <= DWB_MAX_OUT &&
           hp * wp * 16 <= DWB_MAX_FLOATS && a->KH * a->KW <= 64;
}

#ifdef PD_X86_DISPATCH
/* dwb_row_v8's sums of output pixels ox .. ox + nb - 1 (nb a constant where inlined, up to 8), lanes 8h .. 8h + 7:
 * each from 0, one FMA per tap, taps in row-major order (dwb_pixels' order) */
PD_INLINE void dwb_pixels_v8(const dw_args *a, const float *xin, const float *wt, float *o, isz oy, isz ox, isz WP,
                             int h, const int nb) {
    const isz SH = a->SH, SW = a->SW, DH = a->DH, DW = a->DW, KH = a->KH, KW = a->KW;
    pd_v8 s[8];
    for (int q = 0; q < nb; q++) s[q] = (pd_v8){0};
    for (isz i = 0; i < KH; i++)
        for (isz j = 0; j < KW; j++) {
            const pd_v8 k = pd_load8(wt + (i * KW + j) * 16 + h * 8);
            const float *x = xin + ((oy * SH + i * DH) * WP + ox * SW + j * DW) * 16 + h * 8;
#pragma GCC unroll 8
            for (int q = 0; q < nb; q++) s[q] += k * pd_load8(x + q * SW * 16);
        }
    for (int q = 0; q < nb; q++) memcpy(o + (ox + q) * 16 + h * 8, &s[q], sizeof(pd_v8));
}

/* dwb's output row oy on AVX2 (g_avx2_tiles), lanes 8h .. 8h + 7 of the block: its sums as dwb_task_impl writes them
 * (the same expressions on 8-float vectors: the same bits), each sum in a register (GCC keeps a 16-float vector in
 * memory in the AVX2 clones where a loop runs over it: the taps' loop of 5x5 windows ran 5-12x slower) */
PD_INLINE void dwb_row_v8(const dw_args *a, const float *xin, const float *wt, float *o, isz oy, isz WP, int h) {
    const isz OW = a->OW, SH = a->SH, SW = a->SW, DH = a->DH, DW = a->DW, KH = a->KH, KW = a->KW;
    if (KH == 3 && KW == 3) {
        pd_v8 k[9];
        for (int t = 0; t < 9; t++) k[t] = pd_load8(wt + t * 16 + h * 8);
        const float *r0 = xin + oy * SH * WP * 16 + h * 8, *r1 = r0 + DH * WP * 16, *r2 = r1 + DH * WP * 16;
        for (isz ox = 0; ox < OW; ox++) {
            const isz c0 = ox * SW * 16, c1 = c0 + DW * 16, c2 = c1 + DW * 16;
            const pd_v8 s = k[0] * pd_load8(r0 + c0) + k[1] * pd_load8(r0 + c1) + k[2] * pd_load8(r0 + c2) +
                            k[3] * pd_load8(r1 + c0) + k[4] * pd_load8(r1 + c1) + k[5] * pd_load8(r1 + c2) +
                            k[6] * pd_load8(r2 + c0) + k[7] * pd_load8(r2 + c1) + k[8] * pd_load8(r2 + c2);
            memcpy(o + ox * 16 + h * 8, &s, sizeof(s));
        }
        return;
    }
    /* up to 8 outputs at a time, taps outer, their sums in registers (each weight loaded once per 8 outputs, not
     * once per output: 576ch 5x5 on 7x7 62.7 -> 44.4 us, one Zen 4 core); the count a constant in each call
     * (dwb_pixels_v8: a runtime count left a compare and branch beside every FMA) */
    isz ox = 0;
    for (; ox + 8 <= OW; ox += 8) dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 8);
    switch (OW - ox) {
    case 7: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 7); break;
    case 6: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 6); break;
    case 5: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 5); break;
    case 4: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 4); break;
    case 3: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 3); break;
    case 2: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 2); break;
    case 1: dwb_pixels_v8(a, xin, wt, o, oy, ox, WP, h, 1); break;
    default: break;
    }
}

/* r[i][j] -> r[j][i] for an 8x8 block in 8 vectors (AVX2: unpacks, in-lane shuffles, then 128-bit halves swapped) */
#define PD_T8_UNLO 0, 8, 1, 9, 4, 12, 5, 13
#define PD_T8_UNHI 2, 10, 3, 11, 6, 14, 7, 15
#define PD_T8_LO2 0, 1, 8, 9, 4, 5, 12, 13
#define PD_T8_HI2 2, 3, 10, 11, 6, 7, 14, 15
#define PD_T8_LO4 0, 1, 2, 3, 8, 9, 10, 11
#define PD_T8_HI4 4, 5, 6, 7, 12, 13, 14, 15
PD_INLINE void pd_transpose8(pd_v8 r[8]) {
    pd_v8 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = PD_SHUFFLE8(r[i], r[i + 1], PD_T8_UNLO);
        t[i + 1] = PD_SHUFFLE8(r[i], r[i + 1], PD_T8_UNHI);
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; j++) { /* u[i + 2j]: columns 2j and 2j + 4 of rows i .. i + 3, u[i + 2j + 1]: the next */
            u[i + 2 * j] = PD_SHUFFLE8(t[i + j], t[i + j + 2], PD_T8_LO2);
            u[i + 2 * j + 1] = PD_SHUFFLE8(t[i + j], t[i + j + 2], PD_T8_HI2);
        }
    for (int c = 0; c < 4; c++) {
        r[c] = PD_SHUFFLE8(u[c], u[c + 4], PD_T8_LO4);
        r[c + 4] = PD_SHUFFLE8(u[c], u[c + 4], PD_T8_HI4);
    }
}

/* dwb's pixel-major copy at AVX2, and at AVX-512 for a last block of 8 channels (every input pixel inside the buffer;
 * lanes a multiple of 8): 8 pixels of 8 planes transposed at a time; returns the pixels copied (the caller copies the
 * rest one by one). AVX-512, one loaded Zen 5 core, against the lane-by-lane copy of such a block: PP-OCR cls's 24ch
 * 3x3 / (2, 1) on 12x96 10.7 -> 7.9 us, MobileNetV3-small's 120ch 5x5 on 14x14 14.9 -> 13.6 */
PD_INLINE isz dwb_in_v8(const dw_args *a, const float *const src[16], float *xin, isz WP, isz lanes) {
    const isz plane = a->H * a->W;
    isz q = 0, y = 0, x = 0;
    for (; q + 8 <= plane; q += 8) {
        isz off[8];
        for (int k = 0; k < 8; k++) {
            off[k] = ((y + a->PT) * WP + x + a->PL) * 16;
            if (++x == a->W) x = 0, y++;
        }
        for (isz h = 0; h < lanes / 8; h++) {
            pd_v8 r[8];
            for (int l = 0; l < 8; l++) r[l] = pd_load8(src[8 * h + l] + q);
            pd_transpose8(r);
            for (int k = 0; k < 8; k++) memcpy(xin + off[k] + 8 * h, &r[k], sizeof(pd_v8));
        }
    }
    return q;
}

/* dwb's copy back to the output planes (where dwb_in_v8 copies in; lanes a multiple of 8): 8 pixels of 8 planes
 * transposed at a time; returns the pixels copied */
PD_INLINE isz dwb_out_v8(const float *acc, float *const dst[16], isz npix, isz lanes) {
    isz q = 0;
    for (; q + 8 <= npix; q += 8)
        for (isz h = 0; h < lanes / 8; h++) {
            pd_v8 r[8];
            for (int k = 0; k < 8; k++) r[k] = pd_load8(acc + (q + k) * 16 + 8 * h);
            pd_transpose8(r);
            for (int l = 0; l < 8; l++) memcpy(dst[8 * h + l] + q, &r[l], sizeof(pd_v8));
        }
    return q;
}
#endif

/* dwb's sums of output pixels ox .. ox + nb - 1 of row oy (nb a constant where inlined, up to 8): each pixel's sum
 * from 0, one FMA per tap, taps in row-major order (the order of dwb_row_v8 and of a one-pixel loop: the same bits);
 * nb independent sums, so the taps' FMAs overlap instead of waiting on one another (one sum a pixel: one Zen 5
 * core, MobileNetV3-small's 576ch 5x5 on 7x7 31.6 us, OpenVINO 18) */
PD_INLINE void dwb_pixels(const dw_args *a, const float *xin, const float *wt, float *o, isz oy, isz ox, isz WP,
                          const int nb) {
    const isz SH = a->SH, SW = a->SW, DH = a->DH, DW = a->DW, KH = a->KH, KW = a->KW;
    pd_v16 s[8];
    for (int b = 0; b < nb; b++) s[b] = (pd_v16){0};
    for (isz i = 0; i < KH; i++)
        for (isz j = 0; j < KW; j++) {
            pd_v16 kv;
            memcpy(&kv, wt + (i * KW + j) * 16, 64);
            const float *xp = xin + ((oy * SH + i * DH) * WP + ox * SW + j * DW) * 16;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
            for (int b = 0; b < nb; b++) {
                pd_v16 xv;
                memcpy(&xv, xp + b * SW * 16, 64);
                s[b] += kv * xv;
            }
        }
    for (int b = 0; b < nb; b++) memcpy(o + (ox + b) * 16, &s[b], 64);
}

PD_INLINE void dwb_task_impl(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz OH = a->OH, OW = a->OW, SH = a->SH, SW = a->SW, DH = a->DH, DW = a->DW, KH = a->KH, KW = a->KW;
    const isz HP = (OH - 1) * SH + (KH - 1) * DH + 1, WP = (OW - 1) * SW + (KW - 1) * DW + 1, taps = KH * KW;
    const isz npix = OH * OW, blocks = (a->OC + 15) / 16, mult = a->OC / a->C, plane = a->H * a->W;
    float *mem = (float *)pd_scratch((size_t)(HP * WP * 16 + npix * 16 + taps * 16) * sizeof(float));
    if (!mem) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    float *xin = mem, *acc = xin + HP * WP * 16, *wt = acc + npix * 16;
    /* the image's rows [y0, y1) and columns [x0, x1) land inside the padded buffer (the rest reads zeros) */
    const isz y0 = a->PT > 0 ? 0 : -a->PT, x0 = a->PL > 0 ? 0 : -a->PL;
    isz y1 = HP - a->PT < a->H ? HP - a->PT : a->H, x1 = WP - a->PL < a->W ? WP - a->PL : a->W;
    if (y1 < y0) y1 = y0;
    if (x1 < x0) x1 = x0;
    const int whole = y0 == 0 && x0 == 0 && y1 == a->H && x1 == a->W; /* every input pixel lands in the buffer */
    memset(xin, 0, (size_t)(HP * WP * 16) * sizeof(float));
    const float *src[16];
    for (isz item = begin; item < end; item++) {
        const isz n = item / blocks, oc0 = (item % blocks) * 16, lanes = a->OC - oc0 < 16 ? a->OC - oc0 : 16;
        for (isz t = 0; t < taps; t++)
            for (isz l = 0; l < 16; l++) wt[t * 16 + l] = l < lanes ? a->w[(oc0 + l) * taps + t] : 0.0f;
        for (isz l = 0; l < lanes; l++) src[l] = a->x + (n * a->C + (oc0 + l) / mult) * plane;
        /* pixel-major copy: 16 pixels of the 16 planes transposed at a time, the rest one by one (in a last,
         * partial block the lanes past `lanes` hold zeros or an earlier block's pixels: their weights are 0 and
         * they are never written out) */
        isz q = 0;
        if (lanes == 16 && whole && g_shuffles16) { /* (AVX2: the loop below; GCC's 16-float shuffles spill) */
            isz y = 0, x = 0;
            for (; q + 16 <= plane; q += 16) {
                pd_v16 r[16];
                for (int l = 0; l < 16; l++) memcpy(&r[l], src[l] + q, 64);
                pd_transpose16(r);
                for (int k = 0; k < 16; k++) {
                    memcpy(xin + ((y + a->PT) * WP + x + a->PL) * 16, &r[k], 64);
                    if (++x == a->W) x = 0, y++;
                }
            }
        }
#ifdef PD_X86_DISPATCH
        else if (lanes % 8 == 0 && whole && (g_avx2_tiles || g_shuffles16)) /* (AVX-512: a last block of 8) */
            q = dwb_in_v8(a, src, xin, WP, lanes);
#endif
        for (; q < plane; q++) {
            const isz y = q / a->W, x = q % a->W;
            if (y < y0 || y >= y1 || x < x0 || x >= x1) continue;
            float *d = xin + ((y + a->PT) * WP + x + a->PL) * 16;
            for (isz l = 0; l < lanes; l++) d[l] = src[l][q];
        }
        for (isz oy = 0; oy < OH; oy++) {
            float *o = acc + oy * OW * 16;
#ifdef PD_X86_DISPATCH
            if (g_avx2_tiles) {
                dwb_row_v8(a, xin, wt, o, oy, WP, 0);
                dwb_row_v8(a, xin, wt, o, oy, WP, 1);
                continue;
            }
#endif
            if (KH == 3 && KW == 3) {
                pd_v16 k[9];
                for (int t = 0; t < 9; t++) memcpy(&k[t], wt + t * 16, sizeof(pd_v16));
                const float *r0 = xin + oy * SH * WP * 16, *r1 = r0 + DH * WP * 16, *r2 = r1 + DH * WP * 16;
                for (isz ox = 0; ox < OW; ox++) {
                    const isz c0 = ox * SW * 16, c1 = c0 + DW * 16, c2 = c1 + DW * 16;
                    pd_v16 v[9], s;
                    memcpy(&v[0], r0 + c0, 64), memcpy(&v[1], r0 + c1, 64), memcpy(&v[2], r0 + c2, 64);
                    memcpy(&v[3], r1 + c0, 64), memcpy(&v[4], r1 + c1, 64), memcpy(&v[5], r1 + c2, 64);
                    memcpy(&v[6], r2 + c0, 64), memcpy(&v[7], r2 + c1, 64), memcpy(&v[8], r2 + c2, 64);
                    s = k[0] * v[0] + k[1] * v[1] + k[2] * v[2] + k[3] * v[3] + k[4] * v[4] + k[5] * v[5] +
                        k[6] * v[6] + k[7] * v[7] + k[8] * v[8];
                    memcpy(o + ox * 16, &s, 64);
                }
            } else { /* up to 8 output pixels at a time (dwb_pixels): independent sums, each in dwb_pixels' order */
                isz ox = 0;
                for (; ox + 8 <= OW; ox += 8) dwb_pixels(a, xin, wt, o, oy, ox, WP, 8);
                switch (OW - ox) {
                case 7: dwb_pixels(a, xin, wt, o, oy, ox, WP, 7); break;
                case 6: dwb_pixels(a, xin, wt, o, oy, ox, WP, 6); break;
                case 5: dwb_pixels(a, xin, wt, o, oy, ox, WP, 5); break;
                case 4: dwb_pixels(a, xin, wt, o, oy, ox, WP, 4); break;
                case 3: dwb_pixels(a, xin, wt, o, oy, ox, WP, 3); break;
                case 2: dwb_pixels(a, xin, wt, o, oy, ox, WP, 2); break;
                case 1: dwb_pixels(a, xin, wt, o, oy, ox, WP, 1); break;
                default: break;
                }
            }
        }
        /* back to the 16 output planes, 16 pixels transposed at a time, then bias and activation per plane */
        float *dst[16];
        for (isz l = 0; l < lanes; l++) dst[l] = a->out + (n * a->OC + oc0 + l) * npix;
        q = 0;
        if (lanes == 16 && g_shuffles16)
            for (; q + 16 <= npix; q += 16) {
                pd_v16 r[16];
                memcpy(r, acc + q * 16, sizeof(r));
                pd_transpose16(r);
                for (int l = 0; l < 16; l++) memcpy(dst[l] + q, &r[l], 64);
            }
#ifdef PD_X86_DISPATCH
        else if (lanes % 8 == 0 && (g_avx2_tiles || g_shuffles16))
            q = dwb_out_v8(acc, dst, npix, lanes);
#endif
        for (; q < npix; q++)
            for (isz l = 0; l < lanes; l++) dst[l][q] = acc[q * 16 + l];
        if (a->bias || a->act.kind != ACT_NONE)
            for (isz l = 0; l < lanes; l++)
                bias_act_copy(dst[l], dst[l], npix, a->bias ? a->bias[oc0 + l] : 0.0f, a->bias != NULL, &a->act);
    }
    free(mem);
}

PD_VERSIONS(dwb_task)

PD_HIDDEN void dwb_run(void *vctx, isz begin, isz end) { dwb_task(vctx, begin, end); }
