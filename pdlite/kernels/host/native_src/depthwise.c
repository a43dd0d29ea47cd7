/* pdlite native host kernels: depthwise conv2d (see common.h) */
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* depthwise conv2d                                                                                 */
/* ------------------------------------------------------------------------------------------------ */

#include "depthwise.h" /* dw_args, the other forms (depthwise_rows.c, depthwise_blocked.c, depthwise_short.c) */

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


PD_VERSIONS(dw_task)
PD_VERSIONS(dw3_task)
PD_VERSIONS(dws2_task)

/* the form that runs the conv a (out of the five below) and its number of items */
static pd_task dw_pick(const dw_args *a, isz *items) {
    *items = a->N * a->OC;
    /* AVX-512: 5x5 stride-1 maps up to 16 wide go to the channel-blocked form where it applies (8 pixels' sums side
     * by side; the row-vector 5x5 loop runs 4 rows of one vector: one Zen 5 core, MobileNetV3-small's 240ch 5x5 on
     * 14x14 32 -> 26 us, 144ch 20 -> 17, 120ch 18 -> 15), the same products in the same order: the same bits */
    const int rows5_blocked = a->KH == 5 && a->KW == 5 && a->SH == 1 && a->OW <= 16 && dwb_applies(a);
    if ((dwr_applies(a) && !rows5_blocked) || dwr8_applies(a)) return g_avx512 ? dwr_task : dwr8_task;
    if (dws_applies(a)) return dws_run;
    if (dwb_applies(a)) {
        *items = a->N * ((a->OC + 15) / 16);
        return dwb_run;
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
