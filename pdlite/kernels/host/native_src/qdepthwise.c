/* pdlite native host kernels: the int8 depthwise conv (see qint8.h, docs/quantization.md)
 *
 * out[n, c] = act(float(sum_t q(x)[n, c, tap t] * W8[c, t]) * mul[c] + bias[c] (+ res)), then the optional output
 * QDQ and pointwise chain: the epilogue of qgemm.c (q_epilogue). One channel per output channel (groups = C = M).
 * The sums are exact integers (|sum| <= taps 255 128 < 2^31 for taps < 2^16), the same on every form:
 *
 *   window   (AVX512-VNNI; strides and dilations with SW + DW <= 5, SW <= 4, and 4 DW a multiple of SW where KW > 4;
 *            not where 2 P > 3 OW, a third of the columns dropped, and fsum can run: fsum is faster there)
 *            per (image, channel) plane: each padded input row's windows of 4 taps (bytes q + 128 of columns
 *            u SW + t DW, t = 0..3, one dword per output column u, the padding byte 128) built once, 16 at a time
 *            (one 64-byte load - masked where it reads the codes input directly -, a dword permute, an in-lane byte
 *            shuffle), into SH phase planes of pitch P = OW + 4 (G - 1) DW / SW (G = ceil(KW / 4) groups of taps a
 *            kernel row); output (oh, ow) at flat index oh P + ow reads the window of kernel row i, group g at the
 *            fixed offset ((i DH) / SH) P + 4 g DW / SW in phase (i DH) % SH, so the whole plane is one vpdpbusd per
 *            (kernel row, group) on each vector of 16 contiguous outputs, 4 vectors in flight (the columns ow >= OW
 *            computed and dropped); the sums start at -comp[c] (comp = 128 sum_t W8[c, t] takes the + 128 back).
 *            Codes or floats out where nothing follows the activation: straight from the registers (qdw_values16,
 *            qdw_codes16: q_row_values' and q_v16's operations, the same bits); else q_epilogue over the plane.
 *   fsum     (every other ISA and shape, taps <= QDW_FSUM_TAPS): the codes q of a chunk of channels as floats, the
 *            fp32 depthwise conv's own kernel (depthwise.c, whichever form it picks for the shape) run on them with
 *            the weights W8 as floats, no bias, no activation: every product q W8 and every partial sum is an integer
 *            below 2^24 (|sum| <= taps 128 127), so the float sums ARE the integer sums, in any order, with or
 *            without FMA; then the same epilogue (native._set_qdw_integer(0) runs it at vnni too: the tests
 *            compare the two forms' bits).
 *   loops    (larger kernels off vnni) plain loops over each output row per tap.
 */
#include "qgemm.h"
#include "depthwise.h"

#define QDW_FSUM_TAPS 1000 /* taps * 128 * 127 < 2^24 */
#define QDW_CHUNK_FLOATS 32768 /* a chunk's input (or output) plane floats: its scratch stays in L2 */

static int g_qdw_int = 1; /* the window form where it applies and pays (tests' hook: _set_qdw_integer) */

/* tests: _set_qdw_integer(n): 0 runs the float-sums form (or the plain loops) where the window form would run, 1 (the
 * default) the window form where it applies and pays, 2 wherever it applies; returns the old setting */
PD_HIDDEN PyObject *py_set_qdw_integer(PyObject *self, PyObject *arg) {
    (void)self;
    const long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > 2) {
        PyErr_SetString(PyExc_ValueError, "_set_qdw_integer: 0, 1 or 2");
        return NULL;
    }
    const int before = g_qdw_int;
    g_qdw_int = (int)n;
    return PyLong_FromLong(before);
}

typedef struct {
    q_args a; /* M = C, L = OH OW; mul, bias, comp, res, out, act, oq, chain as qconv's; x the input */
    const int8_t *w; /* (C, KH KW) */
    isz Hp, Wp;      /* the padded plane's rows and row bytes */
    isz P, Kr;       /* the window form: windows per row (OW + 4 (G - 1) DW / SW), rows per phase plane */
    const float *wf; /* the float-sums form: W8 as floats (C, KH KW) */
    isz chunk, chunks; /* ... channels per item, items per image */
} qdw_args;

/* one plane (image n, channel c) quantized into p (Hp x Wp bytes, + 128, padding 128); plane pl of codes: copied */
PD_INLINE void qdw_quantize_rt(const qdw_args *d, isz pl, uint8_t *p, const int rt) {
    const conv_geo *g = &d->a.geo;
    memset(p, 128, (size_t)(d->Hp * d->Wp));
    if (rt == Q_RT_CODES) {
        const uint8_t *x = d->a.xc + pl * g->H * g->W;
        for (isz y = 0; y < g->H; y++) memcpy(p + (y + g->PT) * d->Wp + g->PL, x + y * g->W, (size_t)g->W);
        return;
    }
    const float *x = d->a.x + pl * g->H * g->W;
    for (isz y = 0; y < g->H; y++) {
        const float *r = x + y * g->W;
        uint8_t *o = p + (y + g->PT) * d->Wp + g->PL;
        for (isz x0 = 0; x0 < g->W; x0 += 16) {
            const isz cnt = g->W - x0 < 16 ? g->W - x0 : 16;
            pd_v16 xv = {0};
            if (cnt == 16)
                memcpy(&xv, r + x0, sizeof xv);
            else
                for (isz k = 0; k < cnt; k++) xv[k] = r[x0 + k];
            const q_v16b b = __builtin_convertvector(q_v16_rt(xv, &d->a.qp, rt) + 128, q_v16b);
            if (cnt == 16)
                memcpy(o + x0, &b, sizeof b);
            else
                for (isz k = 0; k < cnt; k++) o[x0 + k] = b[k];
        }
    }
}

/* the sums of output row oh of one plane, plain loops */
PD_INLINE void qdw_row_loops(const qdw_args *d, const uint8_t *p, const int8_t *w, isz oh, int32_t *acc) {
    const conv_geo *g = &d->a.geo;
    const isz OW = g->OW, SW = g->SW;
    memset(acc, 0, (size_t)OW * sizeof(int32_t));
    for (isz i = 0; i < g->KH; i++) {
        const uint8_t *row = p + (oh * g->SH + i * g->DH) * d->Wp;
        for (isz j = 0; j < g->KW; j++) {
            const int32_t wt = w[i * g->KW + j];
            const uint8_t *r = row + j * g->DW;
            if (SW == 1) {
                PD_SIMD for (isz o = 0; o < OW; o++) acc[o] += (int32_t)r[o] * wt;
            } else {
                for (isz o = 0; o < OW; o++) acc[o] += (int32_t)r[o * SW] * wt;
            }
        }
    }
}

#ifdef PD_X86_DISPATCH
/* the windows of the padded rows y = ph, ph + SH, ... of one plane into the phase plane dst (pitch P): window u = the
 * bytes of columns u SW + t DW (t = 0..3) as one dword; 16 at a time: one 64-byte load, a dword permute and an in-lane
 * byte shuffle, stored whole (the 16 - P % 16 past a row's end are overwritten by the next row, built after it; the
 * last row's go to the gap after the phase plane). The rows: p (the padded plane of bytes, Wp a row) or codes xc (the
 * plane's input rows, H x W at padded (PT, PL): the bytes of load j those of lm[j], from the row's lo[j], the rest
 * and the padding rows padding) */
PD_TARGET_VNNI static inline __attribute__((always_inline)) void qdw_windows(const qdw_args *d, const uint8_t *p,
                                                                            const uint8_t *xc, isz ph,
                                                                            const __mmask64 *lm, const isz *lo,
                                                                            __m512i idx, __m512i sh, int32_t *dst) {
    const conv_geo *g = &d->a.geo;
    const isz P = d->P, SW = g->SW, SH = g->SH;
    const __m512i pad = _mm512_set1_epi8((char)0x80); /* (a window of padding: its bytes) */
    isz y = ph;
    if (p) {
        for (; y < d->Hp; y += SH, dst += P) {
            const uint8_t *r = p + y * d->Wp;
            for (isz u0 = 0; u0 < P; u0 += 16)
                _mm512_storeu_si512((void *)(dst + u0),
                                    _mm512_shuffle_epi8(_mm512_permutexvar_epi32(
                                                            idx, _mm512_loadu_si512((const void *)(r + u0 * SW))),
                                                        sh));
        }
        return;
    }
    for (; y < d->Hp && y < g->PT; y += SH, dst += P) /* the top padding rows */
        for (isz u0 = 0; u0 < P; u0 += 16) _mm512_storeu_si512((void *)(dst + u0), pad);
    const isz yend = g->PT + g->H < d->Hp ? g->PT + g->H : d->Hp;
    const uintptr_t step = (uintptr_t)(SH * g->W);
    uintptr_t r = (uintptr_t)(xc + (y - g->PT) * g->W);
    if (P <= 16) { /* one load a row (small maps): its mask and offset in registers */
        const __mmask64 m0 = lm[0];
        r += (uintptr_t)lo[0];
        for (; y < yend; y += SH, dst += P, r += step)
            _mm512_storeu_si512((void *)dst, _mm512_shuffle_epi8(_mm512_permutexvar_epi32(
                                                                     idx, _mm512_mask_loadu_epi8(pad, m0, (const void *)r)),
                                                                 sh));
    } else {
        for (; y < yend; y += SH, dst += P, r += step)
            for (isz u0 = 0, j = 0; u0 < P; u0 += 16, j++) {
                const __m512i v = _mm512_mask_loadu_epi8(pad, lm[j], (const void *)(r + (uintptr_t)lo[j]));
                _mm512_storeu_si512((void *)(dst + u0), _mm512_shuffle_epi8(_mm512_permutexvar_epi32(idx, v), sh));
            }
    }
    for (; y < d->Hp; y += SH, dst += P) /* the bottom padding rows */
        for (isz u0 = 0; u0 < P; u0 += 16) _mm512_storeu_si512((void *)(dst + u0), pad);
}

/* the outputs of the window form's sums (the comp already taken: the sums started at -comp[c]) */
enum { QDW_SUMS = 0, QDW_CODES = 1, QDW_FLOATS = 2, QDW_CODES_RELU = 3 };

/* 16 values of channel c from their sums s - comp: act(float(s - comp) * mul + bias) as q_row_values computes them
 * (the same operations on the same values: the same bits) */
PD_TARGET_VNNI static inline __attribute__((always_inline)) pd_v16 qdw_values16(__m512i s, __m512 mul, __m512 b,
                                                                               const act_t *act) {
    pd_v16 f = (pd_v16)_mm512_fmadd_ps(_mm512_cvtepi32_ps(s), mul, b);
    bias_act_v16(&f, 0.0f, 0, act);
    return f;
}

/* 16 codes (bytes q + 128) of values f quantized with k (round type 0) as q_v16 does (the same bits): NaN -> 0, then
 * min(y, 127) and the rounding conversion (half to even) with the saturating narrowing for the clip at -128 */
PD_TARGET_VNNI static inline __attribute__((always_inline)) __m128i qdw_codes16(pd_v16 f, __m512 k) {
    __m512 y = _mm512_mul_ps((__m512)f, k);
    y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y);
    y = _mm512_min_ps(y, _mm512_set1_ps(127.0f));
    const __m512i q = _mm512_cvt_roundps_epi32(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm_xor_si128(_mm512_cvtsepi32_epi8(q), _mm_set1_epi8((char)0x80));
}

/* 16 codes as qdw_codes16(qdw_values16(s, ...)) with relu (relu6: top > 0 its threshold, else +inf), k finite and
 * > 0: the values' max(f, 0) (and min(f, top)) in place of the activation's selects, and no NaN step: they differ
 * from q_row_values' values only where those are -0 or NaN (max gives +0), both code 0, so the same codes (f >= 0 or
 * +inf, y = f k never NaN) */
PD_TARGET_VNNI static inline __attribute__((always_inline)) __m128i qdw_codes16_relu(__m512i s, __m512 mul, __m512 b,
                                                                                    __m512 top, __m512 k) {
    __m512 f = _mm512_max_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(s), mul, b), _mm512_setzero_ps());
    f = _mm512_min_ps(f, top);
    const __m512 y = _mm512_min_ps(_mm512_mul_ps(f, k), _mm512_set1_ps(127.0f));
    const __m512i q = _mm512_cvt_roundps_epi32(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm_xor_si128(_mm512_cvtsepi32_epi8(q), _mm_set1_epi8((char)0x80));
}

/* nv (1..4) vectors of 16 outputs of channel c from flat output o0 (the window form: each (kernel row, group of 4
 * taps) one vpdpbusd of its weight word on the windows at offset off[t] from the output index), as `mode`: the int32
 * sums - comp into the int32s at o, or the codes (qdw_codes16) or floats (qdw_values16) into the bytes or floats at o;
 * vectors past lim not stored, the one across it only below it */
PD_TARGET_VNNI static inline __attribute__((always_inline)) void qdw_sums_win(const int nv, const int mode,
                                                                             const int32_t *win, const isz *off,
                                                                             const int32_t *wv, isz nt, isz o0,
                                                                             void *o, isz lim, const q_args *a,
                                                                             isz c, int32_t comp) {
    const __m512i c0 = _mm512_set1_epi32(-comp);
    __m512i cs[4] = {c0, c0, c0, c0};
    for (isz t = 0; t < nt; t++) {
        const int32_t *r = win + off[t] + o0;
        const __m512i wq = _mm512_set1_epi32(wv[t]);
        for (int v = 0; v < nv; v++)
            cs[v] = _mm512_dpbusd_epi32(cs[v], _mm512_loadu_si512((const void *)(r + 16 * v)), wq);
    }
    if (mode == QDW_SUMS) {
        for (int v = 0; v < nv; v++) _mm512_storeu_si512((void *)((int32_t *)o + o0 + 16 * v), cs[v]);
        return;
    }
    const __m512 mul = _mm512_set1_ps(a->mul[c]), b = _mm512_set1_ps(a->bias ? a->bias[c] : 0.0f);
    const __m512 k = _mm512_set1_ps(a->cq.k);
    const __m512 top = _mm512_set1_ps(a->act.kind == ACT_RELU6 ? a->act.a0 : __builtin_inff());
    for (int v = 0; v < nv; v++) {
        const isz j = o0 + 16 * v;
        if (j >= lim) break;
        const __mmask16 m = j + 16 <= lim ? (__mmask16)0xffff : (__mmask16)((1u << (lim - j)) - 1);
        if (mode == QDW_CODES_RELU) {
            _mm_mask_storeu_epi8((void *)((uint8_t *)o + j), m, qdw_codes16_relu(cs[v], mul, b, top, k));
            continue;
        }
        const pd_v16 f = qdw_values16(cs[v], mul, b, &a->act);
        if (mode == QDW_CODES)
            _mm_mask_storeu_epi8((void *)((uint8_t *)o + j), m, qdw_codes16(f, k));
        else
            _mm512_mask_storeu_ps((void *)((float *)o + j), m, (__m512)f);
    }
}

/* the OH rows of OW values (es bytes each) at pitch P in s packed into o (16 values at a time; s has room past each
 * row) */
PD_TARGET_VNNI static void qdw_pack_rows(void *o, const void *s, isz OH, isz OW, isz P, isz es) {
    for (isz oh = 0; oh < OH; oh++) {
        uint8_t *d = (uint8_t *)o + oh * OW * es;
        const uint8_t *r = (const uint8_t *)s + oh * P * es;
        isz j = 0;
        for (; j + 16 <= OW; j += 16) {
            if (es == 1)
                _mm_storeu_si128((__m128i *)(d + j), _mm_loadu_si128((const __m128i *)(r + j)));
            else
                _mm512_storeu_si512((void *)(d + 4 * j), _mm512_loadu_si512((const void *)(r + 4 * j)));
        }
        if (j < OW) {
            const __mmask16 m = (__mmask16)((1u << (OW - j)) - 1);
            if (es == 1)
                _mm_mask_storeu_epi8((void *)(d + j), m, _mm_loadu_si128((const __m128i *)(r + j)));
            else
                _mm512_mask_storeu_epi32((void *)(d + 4 * j), m, _mm512_loadu_si512((const void *)(r + 4 * j)));
        }
    }
}

/* planes [begin, end) in the window form (vnni): the padded plane's rows as windows of 4 taps (qdw_windows) in SH
 * phase planes of pitch P (phase y % SH, row y / SH); output (oh, ow) at flat index oh P + ow then reads the window
 * of kernel row i, group gg at a fixed offset ((i DH) / SH) P + 4 gg DW / SW in phase (i DH) % SH: the sums of a
 * whole plane are vpdpbusd over contiguous vectors (the columns ow >= OW computed and dropped). Codes out without a
 * residual, output QDQ or chain: the codes straight from the sums' registers (qdw_codes16); else the sums packed to
 * OH x OW and q_epilogue once over the plane */
PD_TARGET_VNNI static void qdw_task_win(void *ctx, isz begin, isz end) {
    const qdw_args *d = (const qdw_args *)ctx;
    const conv_geo *g = &d->a.geo;
    const isz G = (g->KW + 3) / 4, OW = g->OW, P = d->P, Kr = d->Kr, nt = g->KH * G, L = g->OH * OW;
    const isz nout = (g->OH * P + 15) / 16 * 16;
    /* the values straight from the sums' registers where nothing follows the activation */
    int mode = d->a.res || d->a.oq.on || d->a.chain || !act_in_regs(&d->a.act) || (d->a.codes && d->a.cq.rt != 0)
                   ? QDW_SUMS
                   : (d->a.codes ? QDW_CODES : QDW_FLOATS);
    if (mode == QDW_CODES && d->a.cq.k > 0.0f && d->a.cq.k <= FLT_MAX &&
        (d->a.act.kind == ACT_RELU || (d->a.act.kind == ACT_RELU6 && d->a.act.a0 > 0.0f)))
        mode = QDW_CODES_RELU;
    const isz es = mode == QDW_FLOATS || mode == QDW_SUMS ? 4 : 1; /* bytes a value */
    uint8_t *p = d->a.xc ? NULL : (uint8_t *)pd_scratch((size_t)(d->Hp * d->Wp + 256));
    const isz PS = Kr * P + 16; /* a phase plane and its gap */
    int32_t *win = (int32_t *)pd_scratch((size_t)(g->SH * PS + 64) * sizeof(int32_t));
    int32_t *acc = (int32_t *)pd_scratch((size_t)(nout + 64) * (size_t)es);
    int32_t *wv = (int32_t *)pd_scratch((size_t)nt * sizeof(int32_t));
    const isz nvw = (P + 15) / 16; /* window loads a row */
    isz *off = (isz *)pd_scratch((size_t)(nt + nvw) * sizeof(isz) + (size_t)nvw * sizeof(__mmask64));
    if ((p || d->a.xc) && win && acc && wv && off) {
        isz *lo = off + nt; /* the codes rows' loads: from src + lo[j], the bytes of lm[j] */
        __mmask64 *lm = (__mmask64 *)(lo + nvw);
        for (isz j = 0; j < nvw; j++) {
            const isz c0 = 16 * j * g->SW - g->PL; /* the load's first byte's input column */
            const isz b0 = c0 < 0 ? -c0 : 0, b1 = g->W - c0 < 64 ? g->W - c0 : 64;
            lo[j] = c0;
            lm[j] = b1 <= b0 ? 0 : (b1 - b0 == 64 ? ~(__mmask64)0 : (((__mmask64)1 << (b1 - b0)) - 1) << b0);
        }
        memset(win, 0, (size_t)(g->SH * PS + 64) * sizeof(int32_t)); /* (rows only dropped columns read) */
        int32_t pi[16];
        int8_t si[64];
        for (int L4 = 0; L4 < 4; L4++)
            for (int u = 0; u < 4; u++) {
                pi[L4 * 4 + u] = (int32_t)(L4 * g->SW + u);
                for (int t = 0; t < 4; t++) si[L4 * 16 + u * 4 + t] = (int8_t)(u * g->SW + t * g->DW);
            }
        const __m512i idx = _mm512_loadu_si512((const void *)pi), sh = _mm512_loadu_si512((const void *)si);
        for (isz i = 0; i < g->KH; i++)
            for (isz gg = 0; gg < G; gg++)
                off[i * G + gg] = ((i * g->DH) % g->SH) * PS + ((i * g->DH) / g->SH) * P + 4 * gg * g->DW / g->SW;
        q_args a = d->a;
        a.comp = NULL; /* (the sums start at -comp[c]) */
        for (isz pl = begin; pl < end; pl++) {
            const isz c = pl % g->C;
            a.img = pl / g->C;
            const int8_t *w = d->w + c * g->KH * g->KW;
            for (isz i = 0; i < g->KH; i++)
                for (isz gg = 0; gg < G; gg++) {
                    const uint8_t *wt = (const uint8_t *)w + i * g->KW + 4 * gg;
                    const isz n = g->KW - 4 * gg;
                    uint32_t word = 0;
                    if (n >= 4)
                        memcpy(&word, wt, 4);
                    else
                        for (isz t = 0; t < n; t++) word |= (uint32_t)wt[t] << (8 * t);
                    wv[i * G + gg] = (int32_t)word;
                }
            if (p) {
                if (a.qp.rt == 0)
                    qdw_quantize_rt(d, pl, p, 0);
                else
                    qdw_quantize_rt(d, pl, p, 1);
            }
            const uint8_t *xc = a.xc ? a.xc + pl * g->H * g->W : NULL;
            for (isz ph = 0; ph < g->SH; ph++) qdw_windows(d, p, xc, ph, lm, lo, idx, sh, win + ph * PS);
            /* where the rows have no dropped columns, codes and floats go straight to the output */
            void *o = acc;
            isz lim = nout;
            if (mode != QDW_SUMS && P == OW) {
                o = es == 1 ? (void *)(a.codes + pl * L) : (void *)(a.out + pl * L);
                lim = L;
            }
            isz o0 = 0;
#define QDW_SUMS_WIN(nv)                                                                                           \
    do {                                                                                                           \
        if (mode == QDW_CODES_RELU)                                                                                \
            qdw_sums_win(nv, QDW_CODES_RELU, win, off, wv, nt, o0, o, lim, &a, c, d->a.comp[c]);                   \
        else if (mode == QDW_CODES)                                                                                \
            qdw_sums_win(nv, QDW_CODES, win, off, wv, nt, o0, o, lim, &a, c, d->a.comp[c]);                        \
        else if (mode == QDW_FLOATS)                                                                               \
            qdw_sums_win(nv, QDW_FLOATS, win, off, wv, nt, o0, o, lim, &a, c, d->a.comp[c]);                       \
        else                                                                                                       \
            qdw_sums_win(nv, QDW_SUMS, win, off, wv, nt, o0, o, lim, &a, c, d->a.comp[c]);                         \
    } while (0)
            for (; o0 + 64 <= nout; o0 += 64) QDW_SUMS_WIN(4);
            const isz left = nout - o0;
            if (left == 48)
                QDW_SUMS_WIN(3);
            else if (left == 32)
                QDW_SUMS_WIN(2);
            else if (left == 16)
                QDW_SUMS_WIN(1);
#undef QDW_SUMS_WIN
            if (mode != QDW_SUMS) {
                if (o == (void *)acc)
                    qdw_pack_rows(es == 1 ? (void *)(a.codes + pl * L) : (void *)(a.out + pl * L), acc,
                                  g->OH, OW, P, es);
                continue;
            }
            if (P != OW)
                for (isz oh = 1; oh < g->OH; oh++) memmove(acc + oh * OW, acc + oh * P, (size_t)OW * sizeof(int32_t));
            q_epilogue(&a, acc, L, 1, c, 0, L);
        }
    }
    free(p);
    free(win);
    free(acc);
    free(wv);
    free(off);
}
#endif

/* planes [begin, end) in plain loops */
PD_INLINE void qdw_task_impl(void *ctx, isz begin, isz end) {
    const qdw_args *d = (const qdw_args *)ctx;
    const conv_geo *g = &d->a.geo;
    uint8_t *p = (uint8_t *)pd_scratch((size_t)(d->Hp * d->Wp + 256));
    int32_t *acc = (int32_t *)pd_scratch((size_t)g->OW * sizeof(int32_t));
    if (p && acc) {
        q_args a = d->a;
        for (isz pl = begin; pl < end; pl++) {
            const isz c = pl % g->C;
            a.img = pl / g->C;
            if (a.xc)
                qdw_quantize_rt(d, pl, p, Q_RT_CODES);
            else if (a.qp.rt == 0)
                qdw_quantize_rt(d, pl, p, 0);
            else
                qdw_quantize_rt(d, pl, p, 1);
            for (isz oh = 0; oh < g->OH; oh++) {
                qdw_row_loops(d, p, d->w + c * g->KH * g->KW, oh, acc);
                q_epilogue_loops(&a, acc, g->OW, 1, c, oh * g->OW, g->OW);
            }
        }
    }
    free(p);
    free(acc);
}
PD_VERSIONS(qdw_task)

#ifdef PD_X86_DISPATCH
/* xf[0 .. n) = float(q(x)), round_type 0, 8 at a time (q_avx2_q8: the 16-lane vectors spill at AVX2) */
PD_TARGET_AVX2 static void qdwf_quantize_avx2(float *xf, const float *x, isz n, float k) {
    const __m256 kv = _mm256_set1_ps(k);
    for (isz i = 0; i < n; i += 8) {
        const isz cnt = n - i < 8 ? n - i : 8;
        const __m256 q = _mm256_cvtepi32_ps(q_avx2_q8(x, i, cnt, kv));
        if (cnt == 8) {
            _mm256_storeu_ps(xf + i, q);
        } else {
            float t[8];
            _mm256_storeu_ps(t, q);
            for (isz j = 0; j < cnt; j++) xf[i + j] = t[j];
        }
    }
}
#endif

/* items [begin, end) = (image, chunk of channels) of the float-sums form */
PD_INLINE void qdwf_task_impl(void *ctx, isz begin, isz end) {
    const qdw_args *d = (const qdw_args *)ctx;
    const conv_geo *g = &d->a.geo;
    const isz HW = g->H * g->W, L = g->OH * g->OW, taps = g->KH * g->KW;
    float *xf = (float *)pd_scratch((size_t)(d->chunk * HW) * sizeof(float));
    float *sf = (float *)pd_scratch((size_t)(d->chunk * L) * sizeof(float));
    if (xf && sf) {
        q_args a = d->a;
        a.comp = NULL; /* the float q has no + 128 */
        a.fsum = 1;    /* the epilogue reads the float sums as they are */
        for (isz it = begin; it < end; it++) {
            const isz n = it / d->chunks, c0 = (it % d->chunks) * d->chunk;
            const isz cc = g->C - c0 < d->chunk ? g->C - c0 : d->chunk, off = (n * g->C + c0) * HW, cnt = cc * HW;
            if (a.xc) {
                const uint8_t *xc = a.xc + off;
                PD_SIMD for (isz i = 0; i < cnt; i++) xf[i] = (float)((int32_t)xc[i] - 128);
            } else {
                const float *x = a.x + off;
#ifdef PD_X86_DISPATCH
                if (Q_AVX2_CLASS && a.qp.rt == 0) {
                    qdwf_quantize_avx2(xf, x, cnt, a.qp.k);
                    goto quantized;
                }
#endif
                for (isz i = 0; i < cnt; i += 16) {
                    const isz k = cnt - i < 16 ? cnt - i : 16;
                    pd_v16 xv = {0};
                    if (k == 16)
                        memcpy(&xv, x + i, sizeof xv);
                    else
                        for (isz j = 0; j < k; j++) xv[j] = x[i + j];
                    const pd_v16 qf = __builtin_convertvector(q_v16(xv, &a.qp), pd_v16);
                    if (k == 16)
                        memcpy(xf + i, &qf, sizeof qf);
                    else
                        for (isz j = 0; j < k; j++) xf[i + j] = qf[j];
                }
            }
#ifdef PD_X86_DISPATCH
        quantized:
#endif
            ;
            dw_args w;
            memset(&w, 0, sizeof w);
            w.x = xf, w.w = d->wf + c0 * taps, w.out = sf;
            w.N = 1, w.C = w.OC = cc, w.H = g->H, w.W = g->W, w.OH = g->OH, w.OW = g->OW, w.KH = g->KH, w.KW = g->KW;
            w.SH = g->SH, w.SW = g->SW, w.DH = g->DH, w.DW = g->DW, w.PT = g->PT, w.PL = g->PL;
            w.act.kind = ACT_NONE;
            dw_run_serial(&w);
            const int32_t *si = (const int32_t *)sf; /* (read as floats: a.fsum) */
            a.img = n;
            if (g_qisa == Q_VNNI)
                q_epilogue(&a, si, L, cc, c0, 0, L);
            else
                q_epilogue_loops(&a, si, L, cc, c0, 0, L);
        }
    }
    free(xf);
    free(sf);
}
PD_VERSIONS(qdwf_task)

PD_HIDDEN void q_dw_pick(int isa) {
    qdw_task_pick(isa);
    qdwf_task_pick(isa);
}

/* qdwconv(x, w int8 (C, KH KW), comp int32 (C), mul, bias|None, out|None, (N,C,H,W,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL),
 *         (k, s, rt), act, (a0,a1,a2), res|None, ((k,s,rt), qmax)|None, chain|None, xcodes, codes_out|None,
 *         (k, s, rt)|None): codes in and out as qconv's */
PD_HIDDEN PyObject *py_qdwconv(PyObject *self, PyObject *args) {
    (void)self;
    const unsigned fail0 = pd_failures();
    PyObject *xo, *wo, *co, *mo, *bo, *oo, *ap, *ro = Py_None, *qo = Py_None, *cho = Py_None, *cdo = Py_None;
    PyObject *cqo = Py_None;
    qdw_args d;
    memset(&d, 0, sizeof d);
    q_args *a = &d.a;
    conv_geo *g = &a->geo;
    int act, xcodes = 0;
    if (!PyArg_ParseTuple(args, "OOOOOO(nnnnnnnnnnnnnn)(ffi)iO|OOOpOO", &xo, &wo, &co, &mo, &bo, &oo, &a->N, &g->C,
                          &g->H, &g->W, &g->OH, &g->OW, &g->KH, &g->KW, &g->SH, &g->SW, &g->DH, &g->DW, &g->PT,
                          &g->PL, &a->qp.k, &a->qp.s, &a->qp.rt, &act, &ap, &ro, &qo, &cho, &xcodes, &cdo, &cqo))
        return NULL;
    if (cdo != Py_None && q_parse_codes_out(cqo, &a->cq) < 0) return NULL;
    if (cdo == Py_None && oo == Py_None) {
        PyErr_SetString(PyExc_ValueError, "qdwconv: no output (out or codes_out)");
        return NULL;
    }
    if (qo != Py_None) {
        if (!PyArg_ParseTuple(qo, "(ffi)f", &a->oq.qp.k, &a->oq.qp.s, &a->oq.qp.rt, &a->oq.qmax)) return NULL;
        q_out_init(&a->oq);
    }
    if (a->N < 0 || g->C <= 0 || g->H <= 0 || g->W <= 0 || g->OH <= 0 || g->OW <= 0 || g->KH <= 0 || g->KW <= 0 ||
        g->SH <= 0 || g->SW <= 0 || g->DH <= 0 || g->DW <= 0 || g->PT < 0 || g->PL < 0 ||
        g->KH * g->KW >= (isz)1 << 16) {
        PyErr_SetString(PyExc_ValueError, "qdwconv: bad geometry");
        return NULL;
    }
    if (parse_act(act, ap, &a->act) < 0) return NULL;
    a->M = g->C;
    a->L = g->OH * g->OW;
    {
        const isz hn = (g->OH - 1) * g->SH + (g->KH - 1) * g->DH + 1, wn = (g->OW - 1) * g->SW + (g->KW - 1) * g->DW + 1;
        d.Hp = hn > g->H + g->PT ? hn : g->H + g->PT;
        d.Wp = wn > g->W + g->PL ? wn : g->W + g->PL;
        /* the vnni tiles read 64 bytes from each tile's first column: room for the last tile past the row */
        d.Wp += 16 * g->SW + 4 * g->DW;
    }
    const isz G = (g->KW + 3) / 4;
    /* the window form where it applies, except where its dropped columns would be over a third of those computed
     * (a 5x5 on 7x7 maps: P = 11 for OW = 7) and the float-sums form can run: the fp32 kernel's channel-blocked form
     * is faster there (MobileNetV3-small's 576 x 7x7 5x5: 0.034 -> 0.029 ms, 1 thread, noisy) */
    const isz P = g->OW + 4 * (G - 1) * g->DW / g->SW;
    const int win = g_qisa == Q_VNNI && g_qdw_int && g->SW + g->DW <= 5 && g->SW <= 4 &&
                    (G == 1 || (4 * g->DW) % g->SW == 0) && (2 * P <= 3 * g->OW || g->KH * g->KW > QDW_FSUM_TAPS || g_qdw_int == 2);
    if (win) {
        d.P = P;
        d.Kr = (d.Hp + g->SH - 1) / g->SH + 2;
        const isz wr = (d.P + 15) / 16 * 16 * g->SW + 64; /* the window loads' bytes */
        if (d.Wp < wr) d.Wp = wr;
    }
    q_bufs bs = {0};
    const isz xn = a->N * g->C * g->H * g->W;
    if (xcodes)
        a->xc = (const uint8_t *)qbufs_take(&bs, xo, 0, xn, "qdwconv input codes");
    else
        a->x = (const float *)qbufs_take(&bs, xo, 0, xn * 4, "qdwconv input");
    d.w = (const int8_t *)qbufs_take(&bs, wo, 0, g->C * g->KH * g->KW, "qdwconv int8 weights");
    a->comp = (const int32_t *)qbufs_take(&bs, co, 0, g->C * 4, "qdwconv comp");
    a->mul = (const float *)qbufs_take(&bs, mo, 0, g->C * 4, "qdwconv multipliers");
    a->bias = bo == Py_None ? NULL : (const float *)qbufs_take(&bs, bo, 0, g->C * 4, "qdwconv bias");
    if (cdo != Py_None)
        a->codes = (uint8_t *)qbufs_take(&bs, cdo, 1, a->N * a->M * a->L, "qdwconv output codes");
    else
        a->out = (float *)qbufs_take(&bs, oo, 1, a->N * a->M * a->L * 4, "qdwconv output");
    a->res = ro == Py_None ? NULL : (const float *)qbufs_take(&bs, ro, 0, a->N * a->M * a->L * 4, "qdwconv residual");
    if (bs.failed) return NULL;
    q_chain chain;
    Py_buffer chv = {0};
    if (cho != Py_None) {
        if (PyObject_GetBuffer(cho, &chv, PyBUF_SIMPLE) != 0) {
            qbufs_release(&bs);
            return NULL;
        }
        if (chv.len % 4 != 0 || q_chain_parse((const float *)chv.buf, chv.len / 4, a->M, &chain) < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "qdwconv: the chain must be float32");
            PyBuffer_Release(&chv);
            qbufs_release(&bs);
            return NULL;
        }
        a->chain = &chain;
    }
    isz items = a->N * g->C;
    pd_task task = qdw_task;
#ifdef PD_X86_DISPATCH
    if (win) task = qdw_task_win;
#endif
    float *wf = NULL;
    const isz taps = g->KH * g->KW;
    if (!win && taps <= QDW_FSUM_TAPS && (wf = (float *)malloc((size_t)(g->C * taps) * sizeof(float)))) {
        for (isz i = 0; i < g->C * taps; i++) wf[i] = (float)d.w[i];
        const isz hw = g->H * g->W > a->L ? g->H * g->W : a->L;
        isz chunk = QDW_CHUNK_FLOATS / (hw > 0 ? hw : 1);
        chunk = chunk < 1 ? 1 : (chunk >= 16 ? chunk / 16 * 16 : chunk);
        const isz quarter = (g->C / 4 + 15) / 16 * 16; /* at least 4 items where that keeps 16 channels each */
        if (quarter >= 16 && chunk > quarter) chunk = quarter;
        d.wf = wf, d.chunk = chunk < g->C ? chunk : g->C, d.chunks = (g->C + d.chunk - 1) / d.chunk;
        items = a->N * d.chunks;
        task = qdwf_task;
    }
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(task, &d, items, a->N * a->M * a->L < PD_ONE_THREAD_FLOATS ? items : grain_for(items, 4));
    Py_END_ALLOW_THREADS;
    free(wf);
    qbufs_release(&bs);
    if (a->chain) PyBuffer_Release(&chv);
    return pd_done(fail0);
}
