/* pdlite native host kernels: depthwise conv2d (see common.h) */
#include "common.h"
#include "avx2.h" /* x86-64: pd_v8 (the AVX2 forms below) */

/* ------------------------------------------------------------------------------------------------ */
/* depthwise conv2d                                                                                 */
/* ------------------------------------------------------------------------------------------------ */

#include "depthwise.h" /* dw_args, the short-map form (depthwise_short.c) */

#define PF_ROWS 8 /* input rows ahead to prefetch: at batch 4 MobileNet's 112x112 maps come from memory, not cache */
/* stride 2 x 2: the four phase planes (row phase pr, column phase pc) of the padded image in one pass over
 * the input rows, each row split into its even and odd columns: plane (pr, pc)[y][x] = image[2(y0 + y) + pr - pt][2x
 * + pc - pl] for the hq phase rows from y0 */
PD_INLINE void gather_phases_s2(float *restrict buf, const float *restrict src, isz h, isz w, isz y0, isz hq, isz wq,
                                isz pt, isz pl, isz plane) {
    /* columns x where both 2x - pl and 2x + 1 - pl are inside the row: [xa, xb) */
    isz xa = (pl + 1) / 2, xb = (w - 1 + pl) / 2; /* 2x - pl >= 0 and 2x + 1 - pl <= w - 1 */
    if (xb > wq) xb = wq;
    if (xa > xb) xa = xb;
    for (isz y = 0; y < hq; y++) /* input rows in order (the row above, then the row below): sequential reads */
        for (isz pr = 0; pr < 2; pr++) {
            float *e = buf + (pr * 2) * plane + y * wq, *o = buf + (pr * 2 + 1) * plane + y * wq;
            const isz iy = 2 * (y0 + y) + pr - pt;
            if (iy < 0 || iy >= h) {
                for (isz x = 0; x < wq; x++) e[x] = o[x] = 0.0f;
                continue;
            }
            const float *s = src + iy * w;
            if (iy + PF_ROWS < h)
                for (isz c = 0; c < w; c += 16) __builtin_prefetch(s + PF_ROWS * w + c, 0, 3);
            for (isz x = 0; x < xa; x++) {
                const isz ie = 2 * x - pl, io = ie + 1;
                e[x] = ie >= 0 && ie < w ? s[ie] : 0.0f;
                o[x] = io >= 0 && io < w ? s[io] : 0.0f;
            }
            const float *sp = s - pl;
            for (isz x = xa; x < xb; x++) {
                e[x] = sp[2 * x];
                o[x] = sp[2 * x + 1];
            }
            for (isz x = xb; x < wq; x++) {
                const isz ie = 2 * x - pl, io = ie + 1;
                e[x] = ie >= 0 && ie < w ? s[ie] : 0.0f;
                o[x] = io >= 0 && io < w ? s[io] : 0.0f;
            }
        }
}

#define DW_MAX_TAPS 32 /* taps per pass over an L1 block of the accumulator */
#define DW_BLOCK 512   /* outputs per block of the tap-by-tap path (stays in L1) */

/* acc[q] = sum_t k[t] * p[t][q] for q in [0, len): 9 taps in registers */
PD_INLINE void dw_flat9(float *restrict acc, const float *const *p, const float *restrict k, isz len) {
    const float *restrict p0 = p[0], *restrict p1 = p[1], *restrict p2 = p[2], *restrict p3 = p[3],
                          *restrict p4 = p[4], *restrict p5 = p[5], *restrict p6 = p[6], *restrict p7 = p[7],
                          *restrict p8 = p[8];
    const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
    PD_SIMD for (isz q = 0; q < len; q++)
        acc[q] = k0 * p0[q] + k1 * p1[q] + k2 * p2[q] + k3 * p3[q] + k4 * p4[q] + k5 * p5[q] + k6 * p6[q] +
                 k7 * p7[q] + k8 * p8[q];
}

/* a[q] (=|+=) sum of up to 4 taps k[u] * p[u][q] (one pass over a) */
PD_INLINE void dw_group(float *restrict a, const float *const *p, const float *restrict k, isz off, isz nt, isz n,
                        int init) {
    const float *restrict s0 = p[0] + off, *restrict s1 = nt > 1 ? p[1] + off : s0,
                          *restrict s2 = nt > 2 ? p[2] + off : s0, *restrict s3 = nt > 3 ? p[3] + off : s0;
    const float k0 = k[0], k1 = nt > 1 ? k[1] : 0.0f, k2 = nt > 2 ? k[2] : 0.0f, k3 = nt > 3 ? k[3] : 0.0f;
    if (init) {
        switch (nt) {
        case 1: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q]; break;
        case 2: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q] + k1 * s1[q]; break;
        case 3: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q] + k1 * s1[q] + k2 * s2[q]; break;
        default: PD_SIMD for (isz q = 0; q < n; q++) a[q] = k0 * s0[q] + k1 * s1[q] + k2 * s2[q] + k3 * s3[q];
        }
    } else {
        switch (nt) {
        case 1: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q]; break;
        case 2: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q] + k1 * s1[q]; break;
        case 3: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q] + k1 * s1[q] + k2 * s2[q]; break;
        default: PD_SIMD for (isz q = 0; q < n; q++) a[q] += k0 * s0[q] + k1 * s1[q] + k2 * s2[q] + k3 * s3[q];
        }
    }
}

/* acc[q] (=|+=) sum_t k[t] * p[t][q]: groups of 4 taps over L1-sized blocks of acc */
PD_INLINE void dw_flat_taps(float *restrict acc, const float *const *p, const float *restrict k, isz taps, isz len,
                            int init) {
    for (isz q0 = 0; q0 < len; q0 += DW_BLOCK) {
        isz n = len - q0 < DW_BLOCK ? len - q0 : DW_BLOCK;
        for (isz t = 0; t < taps; t += 4)
            dw_group(acc + q0, p + t, k + t, q0, taps - t < 4 ? taps - t : 4, n, init && t == 0);
    }
}

/* d[q] = sum over the kernel rows i in [i0, i1) and columns j of k[i*3 + j] * s[q + (i-1)*w + (j-1)]: one band
 * of a 3x3 "same" conv read straight from the image (rows i outside [i0, i1) fall in the padding) */
PD_INLINE void dw3_rows(float *restrict d, const float *restrict s, isz w, const float *restrict k, isz i0, isz i1,
                        isz n) {
    const float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8];
    /* the row above is formed only where it is read (on the first output row it would point before the image) */
    const float *restrict m = s - 1, *restrict l = s + w - 1;
    if (i0 == 0 && i1 == 3) {
        const float *restrict u = s - w - 1;
        PD_SIMD for (isz q = 0; q < n; q++)
            d[q] = k0 * u[q] + k1 * u[q + 1] + k2 * u[q + 2] + k3 * m[q] + k4 * m[q + 1] + k5 * m[q + 2] + k6 * l[q] +
                   k7 * l[q + 1] + k8 * l[q + 2];
    } else if (i0 == 1) {
        PD_SIMD for (isz q = 0; q < n; q++)
            d[q] = k3 * m[q] + k4 * m[q + 1] + k5 * m[q + 2] + k6 * l[q] + k7 * l[q + 1] + k8 * l[q + 2];
    } else {
        const float *restrict u = s - w - 1;
        PD_SIMD for (isz q = 0; q < n; q++)
            d[q] = k0 * u[q] + k1 * u[q + 1] + k2 * u[q + 2] + k3 * m[q] + k4 * m[q + 1] + k5 * m[q + 2];
    }
}

/* output (y, x) of a 3x3 stride-1 conv with one-pixel zero padding, taps outside the image skipped */
PD_INLINE float dw3_edge(const float *x, const float *k, isz h, isz w, isz y, isz xo) {
    float s = 0.0f;
    int first = 1;
    for (isz i = 0; i < 3; i++) {
        const isz iy = y + i - 1;
        if (iy < 0 || iy >= h) continue;
        for (isz j = 0; j < 3; j++) {
            const isz ix = xo + j - 1;
            if (ix < 0 || ix >= w) continue;
            s = first ? k[i * 3 + j] * x[iy * w + ix] : s + k[i * 3 + j] * x[iy * w + ix];
            first = 0;
        }
    }
    return s;
}

#define DW3_BAND 2048 /* outputs per band of the 3x3 "same" path: the band and its input rows stay in L1 */

/* One channel plane of a 3x3, stride-1, dilation-1 conv with one-pixel zero padding on every side (out: h x w),
 * straight from the unpadded image: with equal input and output widths, output flat index q reads input flat
 * index q + (i-1)*w + (j-1), so bands of rows are one flat 9-tap loop (6 taps on the first and last row). The
 * loop leaves out each band's first and last element (they would read outside the plane); those and the edge
 * columns it gets wrong (they wrap around to the neighbouring row) are redone with the padding, all in the L1
 * buffer acc (dw3_band_rows(w) * w floats), and bias and activation are applied while copying the band out.
 * Needs h, w >= 2. */
static inline isz dw3_band_rows(isz w) { return DW3_BAND / w > 1 ? DW3_BAND / w : 1; }

PD_INLINE void dw3_same_plane(float *restrict o, const float *restrict x, const float *restrict k, isz h, isz w,
                              float b, int has_bias, const act_t *act, float *restrict acc) {
    const isz rows = dw3_band_rows(w);
    for (isz r0 = 0; r0 < h;) {
        const int edge_row = r0 == 0 || r0 == h - 1; /* the first and last rows are bands of their own */
        const isz r1 = edge_row ? r0 + 1 : (r0 + rows < h - 1 ? r0 + rows : h - 1);
        const isz lo = r0 * w + 1, n = (r1 - r0) * w - 2;
        if (n > 0) /* rows 1, 2 of the kernel on the first output row, 0, 1 on the last (h >= 2) */
            dw3_rows(acc + 1, x + lo, w, k, r0 == 0 ? 1 : 0, r0 > 0 && r0 == h - 1 ? 2 : 3, n);
        for (isz y = r0; y < r1; y++) {
            acc[(y - r0) * w] = dw3_edge(x, k, h, w, y, 0);
            acc[(y - r0) * w + w - 1] = dw3_edge(x, k, h, w, y, w - 1);
        }
        bias_act_copy(o + r0 * w, acc, (r1 - r0) * w, b, has_bias, act);
        r0 = r1;
    }
}

/* the geometry dw3_task handles: 3x3, stride 1, dilation 1, one pixel of zero padding on every side */
static int dw3_applies(const dw_args *a) {
    return a->KH == 3 && a->KW == 3 && a->SH == 1 && a->SW == 1 && a->DH == 1 && a->DW == 1 && a->PT == 1 &&
           a->PL == 1 && a->OH == a->H && a->OW == a->W && a->H >= 2 && a->W >= 2;
}

/* planes [begin, end) of a conv dw3_applies to, by dw3_same_plane (no padded copy). A task of its own: as a
 * branch inside dw_task_impl, GCC laid it out as cold code and left its loops scalar (3-10x slower). */
PD_INLINE void dw3_task_impl(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz mult = a->OC / a->C, plane = a->H * a->W;
    /* the flat loop stores from acc + 1: that address is 64-byte aligned (no cache-line-split stores) */
    char *mem = (char *)pd_scratch((size_t)(dw3_band_rows(a->W) * a->W + 16) * sizeof(float) + 64);
    if (!mem) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    float *acc = (float *)(mem + (64 - (uintptr_t)mem % 64)) + 15;
    for (isz p = begin; p < end; p++) {
        const isz n = p / a->OC, oc = p % a->OC;
        dw3_same_plane(a->out + p * plane, a->x + (n * a->C + oc / mult) * plane, a->w + oc * 9, a->H, a->W,
                       a->bias ? a->bias[oc] : 0.0f, a->bias != NULL, &a->act, acc);
    }
    free(mem);
}

PD_INLINE void dw_task_impl(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz SH = a->SH, SW = a->SW, OH = a->OH, OW = a->OW;
    const isz taps = a->KH * a->KW;
    /* polyphase layout: tap (i, j) reads phase plane ((i*DH) % SH, (j*DW) % SW) at flat offset
     * ((i*DH) / SH) * WQ + (j*DW) / SW; output (oy, ox) sits at flat index oy*WQ + ox */
    isz qr_max = ((a->KH - 1) * a->DH) / SH, qc_max = ((a->KW - 1) * a->DW) / SW;
    const isz WQ = OW + qc_max, HQ = OH + qr_max, plane = HQ * WQ, len = (OH - 1) * WQ + OW;
    /* the flat loops run over a multiple of 16 outputs (no scalar remainder); the extra ones read the
     * slack after the planes and are never copied out */
    const isz len_r = (len + 15) / 16 * 16;
    const isz nph = SH * SW;
    float *buf = (float *)pd_scratch((size_t)(plane * nph + 16 + len_r) * sizeof(float));
    if (!buf) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    float *acc = buf + plane * nph + 16;
    memset(buf + plane * nph, 0, 16 * sizeof(float));
    const isz mult = a->OC / a->C;
    /* per tap: its flat slice in buf; per phase plane: whether some tap reads it */
    const float **ptr = (const float **)pd_scratch((size_t)taps * sizeof(float *));
    unsigned char *used = (unsigned char *)pd_scratch((size_t)nph);
    if (used) memset(used, 0, (size_t)nph);
    if (!ptr || !used) {
        free(buf), free(ptr), free(used);
        return;
    }
    for (isz i = 0, t = 0; i < a->KH; i++)
        for (isz j = 0; j < a->KW; j++, t++) {
            isz r = i * a->DH, c = j * a->DW, ph = (r % SH) * SW + (c % SW);
            ptr[t] = buf + ph * plane + (r / SH) * WQ + c / SW;
            used[ph] = 1;
        }
    int all_used = 1;
    for (isz ph = 0; ph < nph; ph++) all_used &= used[ph];
    isz last_src = -1;
    isz n = begin / a->OC, oc = begin % a->OC;
    for (isz p = begin; p < end; p++, oc++) {
        if (oc == a->OC) oc = 0, n++;
        const isz src_plane = n * a->C + oc / mult;
        const float *k = a->w + oc * taps;
        if (src_plane != last_src) {
            const float *src = a->x + src_plane * a->H * a->W;
            if (SH == 2 && SW == 2 && all_used)
                gather_phases_s2(buf, src, a->H, a->W, 0, HQ, WQ, a->PT, a->PL, plane);
            else
                for (isz ph = 0; ph < nph; ph++)
                    if (used[ph])
                        gather_plane(buf + ph * plane, src, a->H, a->W, HQ, WQ, ph / SW - a->PT, ph % SW - a->PL, SH,
                                     SW);
            last_src = src_plane;
        }
        float *o = a->out + p * OH * OW;
        if (taps == 9) {
            dw_flat9(acc, ptr, k, len_r);
        } else {
            for (isz t0 = 0; t0 < taps; t0 += DW_MAX_TAPS) /* tap blocks keep acc's blocks in L1 */
                dw_flat_taps(acc, ptr + t0, k + t0, taps - t0 < DW_MAX_TAPS ? taps - t0 : DW_MAX_TAPS, len_r,
                             t0 == 0);
        }
        const float b = a->bias ? a->bias[oc] : 0.0f;
        if (OW >= 32) { /* bias + activation while copying the rows out */
            for (isz oy = 0; oy < OH; oy++) bias_act_copy(o + oy * OW, acc + oy * WQ, OW, b, a->bias != NULL, &a->act);
        } else { /* short rows: one pass over the whole accumulator, then plain row copies */
            bias_act_copy(acc, acc, len_r, b, a->bias != NULL, &a->act);
            for (isz oy = 0; oy < OH; oy++) {
                float *orow = o + oy * OW;
                const float *arow = acc + oy * WQ;
                for (isz ox = 0; ox < OW; ox++) orow[ox] = arow[ox];
            }
        }
    }
    free(buf), free(ptr), free(used);
}


/* the geometry dws2_task handles: 3x3, stride 2, dilation 1 (every tap's phase plane is read) */
static int dws2_applies(const dw_args *a) {
    return a->KH == 3 && a->KW == 3 && a->SH == 2 && a->SW == 2 && a->DH == 1 && a->DW == 1;
}

#define DWS2_BAND_FLOATS 4096 /* floats per phase plane of a band: the band's four planes stay in L1 */

/* planes [begin, end) of a conv dws2_applies to: dw_task's polyphase form in bands of output rows, so that the
 * gathered phase planes of a band (rows oy0 .. oy1 of each) are still in L1 when its taps read them (whole
 * planes of a 112x112 image are 52 KiB: gathering them took most of the time) */
PD_INLINE void dws2_task_impl(void *vctx, isz begin, isz end) {
    const dw_args *a = (const dw_args *)vctx;
    const isz OH = a->OH, OW = a->OW, WQ = OW + 1;
    isz rows = DWS2_BAND_FLOATS / WQ - 1; /* output rows per band */
    if (rows < 1) rows = 1;
    if (rows > OH) rows = OH;
    const isz bplane = (rows + 1) * WQ, lenmax = (rows - 1) * WQ + OW, lenmax_r = (lenmax + 15) / 16 * 16;
    /* 4 phase planes, zero slack after them (the flat loop's extra outputs read a little past the planes), acc */
    float *buf = (float *)pd_scratch((size_t)(4 * bplane + 32 + lenmax_r) * sizeof(float));
    if (!buf) return; /* out of memory: counted by pd_scratch, the call raises MemoryError */
    memset(buf + 4 * bplane, 0, 32 * sizeof(float));
    float *acc = buf + 4 * bplane + 32;
    const float *ptr[9];
    for (isz i = 0; i < 3; i++)
        for (isz j = 0; j < 3; j++) ptr[i * 3 + j] = buf + ((i % 2) * 2 + j % 2) * bplane + (i / 2) * WQ + j / 2;
    const isz mult = a->OC / a->C;
    for (isz p = begin; p < end; p++) {
        const isz n = p / a->OC, oc = p % a->OC;
        const float *src = a->x + (n * a->C + oc / mult) * a->H * a->W, *k = a->w + oc * 9;
        const float b = a->bias ? a->bias[oc] : 0.0f;
        float *o = a->out + p * OH * OW;
        for (isz oy0 = 0; oy0 < OH; oy0 += rows) {
            const isz nr = OH - oy0 < rows ? OH - oy0 : rows;
            /* phase rows oy0 .. oy0 + nr (one more than the band: the taps of kernel row 2) */
            gather_phases_s2(buf, src, a->H, a->W, oy0, nr + 1, WQ, a->PT, a->PL, bplane);
            const isz len_r = ((nr - 1) * WQ + OW + 15) / 16 * 16;
            dw_flat9(acc, ptr, k, len_r);
            for (isz oy = 0; oy < nr; oy++)
                bias_act_copy(o + (oy0 + oy) * OW, acc + oy * WQ, OW, b, a->bias != NULL, &a->act);
        }
    }
    free(buf);
}

/* Small output maps (dwb_applies): 16 output channels at a time, vectorised along the channels. The planar forms
 * above spend most of a 7x7 or 14x14 plane on its edges and on per-plane and per-row work; here the 16 channels'
 * input planes are laid out pixel-major in a zero-padded buffer [HP][WP][16] (the padding needs no edge cases), each
 * output pixel is one vector of 16 channels (one vector FMA per tap), and the [OH*OW][16] result is written back
 * to the 16 output planes, with bias and activation applied per plane while it is in L1. */
#define DWB_MAX_OUT 1024       /* output pixels per plane up to which this form is used (28x28 and below) */
#define DWB_MAX_FLOATS 65536   /* the padded input block's floats (256 KiB) */
/* AVX2 (no 16x16 transposes: the pixel-major copies lane by lane), up to 8x8 outputs. One Zen 5 core, against the
 * planar forms: 960ch 3x3 on 7x7 0.075 -> 0.043 ms, 576ch 5x5 on 7x7 0.072 -> 0.060, 576ch 5x5 / 2 to 7x7 0.099 ->
 * 0.083; slower on 14x14 outputs (240ch 5x5 0.071 -> 0.089, 96ch 5x5 / 2 0.039 -> 0.053). With dwb_row_v8's rows of
 * 8 sums in registers (one Zen 4 core, loaded): 14x14 still no faster than planar (240ch 5x5 65 against 67 us, 96ch
 * 5x5 / 2 43 against 38), so 8x8 stays the limit */
#define DWB8_MAX_OUT 64

static int dwb_applies(const dw_args *a) {
    const isz hp = (a->OH - 1) * a->SH + (a->KH - 1) * a->DH + 1, wp = (a->OW - 1) * a->SW + (a->KW - 1) * a->DW + 1;
    return (g_shuffles16 || (g_avx2_tiles && a->OH * a->OW <= DWB8_MAX_OUT)) && a->OH * a->OW <= DWB_MAX_OUT && hp * wp * 16 <= DWB_MAX_FLOATS && a->KH * a->KW <= 64;
}

#ifdef PD_X86_DISPATCH
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
     * once per output: 576ch 5x5 on 7x7 62.7 -> 44.4 us, one Zen 4 core) */
    for (isz ox0 = 0; ox0 < OW; ox0 += 8) {
        const isz n = OW - ox0 < 8 ? OW - ox0 : 8;
        pd_v8 s[8];
        for (int q = 0; q < 8; q++) s[q] = (pd_v8){0};
        for (isz i = 0; i < KH; i++)
            for (isz j = 0; j < KW; j++) {
                const pd_v8 k = pd_load8(wt + (i * KW + j) * 16 + h * 8);
                const float *x = xin + ((oy * SH + i * DH) * WP + ox0 * SW + j * DW) * 16 + h * 8;
#pragma GCC unroll 8
                for (int q = 0; q < 8; q++)
                    if (q < n) s[q] += k * pd_load8(x + q * SW * 16);
            }
        for (isz q = 0; q < n; q++) memcpy(o + (ox0 + q) * 16 + h * 8, &s[q], sizeof(pd_v8));
    }
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
        for (; q < npix; q++)
            for (isz l = 0; l < lanes; l++) dst[l][q] = acc[q * 16 + l];
        if (a->bias || a->act.kind != ACT_NONE)
            for (isz l = 0; l < lanes; l++)
                bias_act_copy(dst[l], dst[l], npix, a->bias ? a->bias[oc0 + l] : 0.0f, a->bias != NULL, &a->act);
    }
    free(mem);
}

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

static int dwr_applies(const dw_args *a) {
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

/* the stride-2 forms' prefetch: the two input rows output row oy + 8 starts on (at batch 4 MobileNet's 112x112 maps come
 * from memory) */
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

PD_TARGET_AVX512 static void dwr_task(void *vctx, isz begin, isz end) {
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
static int dwr8_applies(const dw_args *a) {
    return g_avx2_tiles && g_dwr_on && a->OW > 8 && a->OW <= DWR_MAX_W &&
           ((a->SH == 1 && a->SW == 1 && a->DH == 1 && dwr3_applies(a)) || dwr_s2_applies(a));
}

PD_TARGET_AVX2 static void dwr8_task(void *vctx, isz begin, isz end) {
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
static int dwr_applies(const dw_args *a) { (void)a; return 0; }
static int dwr8_applies(const dw_args *a) { (void)a; return 0; }
static void dwr_task(void *vctx, isz begin, isz end) { (void)vctx, (void)begin, (void)end; } /* never called */
static void dwr8_task(void *vctx, isz begin, isz end) { (void)vctx, (void)begin, (void)end; } /* never called */
#endif

PD_VERSIONS(dw_task)
PD_VERSIONS(dw3_task)
PD_VERSIONS(dws2_task)
PD_VERSIONS(dwb_task)

/* the form that runs the conv a (out of the five below) and its number of items */
static pd_task dw_pick(const dw_args *a, isz *items) {
    *items = a->N * a->OC;
    if (dwr_applies(a) || dwr8_applies(a)) return g_avx512 ? dwr_task : dwr8_task;
    if (dws_applies(a)) return dws_run;
    if (dwb_applies(a)) {
        *items = a->N * ((a->OC + 15) / 16);
        return dwb_task;
    }
    return dw3_applies(a) ? dw3_task : (dws2_applies(a) ? dws2_task : dw_task);
}

PD_HIDDEN void dw_run_serial(const dw_args *a) {
    isz items;
    const pd_task task = dw_pick(a, &items);
    if (a->OH > 0 && a->OW > 0) task((void *)a, 0, items);
}

PD_HIDDEN PyObject *py_depthwise_conv2d(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *wo, *bo, *oo, *ap;
    dw_args a;
    int act;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO(nnnnnnnnnnnnnnn)iO", &xo, &wo, &bo, &oo, &a.N, &a.C, &a.H, &a.W, &a.OC, &a.OH,
                          &a.OW, &a.KH, &a.KW, &a.SH, &a.SW, &a.DH, &a.DW, &a.PT, &a.PL, &act, &ap))
        return NULL;
    if (a.N < 0 || a.C <= 0 || a.OC % a.C != 0 || a.H < 0 || a.W < 0 || a.OH < 0 || a.OW < 0 || a.KH <= 0 ||
        a.KW <= 0 || a.SH <= 0 || a.SW <= 0 || a.DH <= 0 || a.DW <= 0) {
        PyErr_SetString(PyExc_ValueError, "depthwise_conv2d: bad geometry");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.N * a.C * a.H * a.W, "depthwise_conv2d input");
    a.w = bufs_take(&bs, wo, 0, a.OC * a.KH * a.KW, "depthwise_conv2d filter");
    a.bias = bo == Py_None ? NULL : bufs_take(&bs, bo, 0, a.OC, "depthwise_conv2d bias");
    a.out = bufs_take(&bs, oo, 1, a.N * a.OC * a.OH * a.OW, "depthwise_conv2d output");
    if (bs.failed) return NULL;
    if (a.OH > 0 && a.OW > 0) {
        Py_BEGIN_ALLOW_THREADS;
        isz items;
        const pd_task task = dw_pick(&a, &items);
        parallel_for(task, &a, items, grain_for(items, 4));
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
