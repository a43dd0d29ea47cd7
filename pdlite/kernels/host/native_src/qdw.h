/* pdlite native host kernels: the int8 depthwise window form's shared parts (qdepthwise.c: one channel a plane;
 * qstem.c: few-channel convs, each output channel a sum of window planes over the input channels) */
#ifndef PD_NATIVE_QDW_H
#define PD_NATIVE_QDW_H
#include "qgemm.h"

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

/* qdwconv's and qstemconv's arguments (qdepthwise.c) */
PD_HIDDEN int qdw_parse(PyObject *args, int stem, qdw_args *d, q_bufs *bs, q_chain *chain, Py_buffer *chv);

/* whether the window form runs the strides and dilations of g (its windows: 4 taps u SW + t DW in one 64-byte load) */
PD_INLINE int qdw_win_applies(const conv_geo *g) {
    const isz G = (g->KW + 3) / 4;
    return g->SW + g->DW <= 5 && g->SW <= 4 && (G == 1 || (4 * g->DW) % g->SW == 0);
}

/* the window form's pitch P (OW + 4 (G - 1) DW / SW), rows per phase plane Kr and the padded rows' room for its loads */
PD_INLINE void qdw_win_geometry(qdw_args *d) {
    const conv_geo *g = &d->a.geo;
    const isz G = (g->KW + 3) / 4;
    d->P = g->OW + 4 * (G - 1) * g->DW / g->SW;
    d->Kr = (d->Hp + g->SH - 1) / g->SH + 2;
    const isz wr = (d->P + 15) / 16 * 16 * g->SW + 64; /* the window loads' bytes */
    if (d->Wp < wr) d->Wp = wr;
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

/* plane pl of the float input quantized (round type 0) into p as qdw_quantize_rt(d, pl, p, 0) writes it (bytes
 * q + 128, padding 128): 16 values at a time through qdw_codes16 (q_v16's codes), only the padding set besides */
PD_TARGET_VNNI static inline void qdw_quantize_vnni(const qdw_args *d, isz pl, uint8_t *p) {
    const conv_geo *g = &d->a.geo;
    const isz W = g->W, Wp = d->Wp, right = Wp - g->PL - W;
    const __m512 k = _mm512_set1_ps(d->a.qp.k);
    memset(p, 128, (size_t)(g->PT * Wp));
    if (d->Hp > g->PT + g->H) memset(p + (g->PT + g->H) * Wp, 128, (size_t)((d->Hp - g->PT - g->H) * Wp));
    const float *x = d->a.x + pl * g->H * W;
    for (isz y = 0; y < g->H; y++) {
        const float *r = x + y * W;
        uint8_t *o = p + (y + g->PT) * Wp;
        memset(o, 128, (size_t)g->PL);
        if (right > 0) memset(o + g->PL + W, 128, (size_t)right);
        o += g->PL;
        isz x0 = 0;
        for (; x0 + 16 <= W; x0 += 16)
            _mm_storeu_si128((__m128i *)(o + x0), qdw_codes16((pd_v16)_mm512_loadu_ps(r + x0), k));
        if (x0 < W) {
            const __mmask16 m = (__mmask16)((1u << (W - x0)) - 1);
            _mm_mask_storeu_epi8((void *)(o + x0), m, qdw_codes16((pd_v16)_mm512_maskz_loadu_ps(m, r + x0), k));
        }
    }
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
PD_TARGET_VNNI static inline void qdw_pack_rows(void *o, const void *s, isz OH, isz OW, isz P, isz es) {
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

/* the output form of the window sums: the values straight from the sums' registers where nothing follows the
 * activation (codes, codes after relu / relu6 by max / min, floats), else the int32 sums and q_epilogue */
PD_INLINE int qdw_mode(const q_args *a) {
    int mode = a->res || a->oq.on || a->chain || !act_in_regs(&a->act) || (a->codes && a->cq.rt != 0)
                   ? QDW_SUMS
                   : (a->codes ? QDW_CODES : QDW_FLOATS);
    if (mode == QDW_CODES && a->cq.k > 0.0f && a->cq.k <= FLT_MAX &&
        (a->act.kind == ACT_RELU || (a->act.kind == ACT_RELU6 && a->act.a0 > 0.0f)))
        mode = QDW_CODES_RELU;
    return mode;
}

/* the window loads of a codes row (nvw of them): from the row + lo[j], the bytes of lm[j]; and qdw_windows' dword
 * permute idx and byte shuffle sh */
PD_TARGET_VNNI static inline void qdw_win_setup(const conv_geo *g, isz nvw, isz *lo, __mmask64 *lm, __m512i *idx,
                                                __m512i *sh) {
    for (isz j = 0; j < nvw; j++) {
        const isz c0 = 16 * j * g->SW - g->PL; /* the load's first byte's input column */
        const isz b0 = c0 < 0 ? -c0 : 0, b1 = g->W - c0 < 64 ? g->W - c0 : 64;
        lo[j] = c0;
        lm[j] = b1 <= b0 ? 0 : (b1 - b0 == 64 ? ~(__mmask64)0 : (((__mmask64)1 << (b1 - b0)) - 1) << b0);
    }
    int32_t pi[16];
    int8_t si[64];
    for (int L4 = 0; L4 < 4; L4++)
        for (int u = 0; u < 4; u++) {
            pi[L4 * 4 + u] = (int32_t)(L4 * g->SW + u);
            for (int t = 0; t < 4; t++) si[L4 * 16 + u * 4 + t] = (int8_t)(u * g->SW + t * g->DW);
        }
    *idx = _mm512_loadu_si512((const void *)pi);
    *sh = _mm512_loadu_si512((const void *)si);
}

/* the windows' offsets of (kernel row i, group gg) at off[i G + gg] in phase planes of PS words, base added */
PD_INLINE void qdw_offsets(const conv_geo *g, isz G, isz P, isz PS, isz base, isz *off) {
    for (isz i = 0; i < g->KH; i++)
        for (isz gg = 0; gg < G; gg++)
            off[i * G + gg] = base + ((i * g->DH) % g->SH) * PS + ((i * g->DH) / g->SH) * P + 4 * gg * g->DW / g->SW;
}

/* the weight words of one filter plane w (KH x KW int8): (kernel row i, group gg) -> wv[i G + gg], the taps past KW
 * zero */
PD_INLINE void qdw_weight_words(const int8_t *w, isz KH, isz KW, isz G, int32_t *wv) {
    for (isz i = 0; i < KH; i++)
        for (isz gg = 0; gg < G; gg++) {
            const uint8_t *wt = (const uint8_t *)w + i * KW + 4 * gg;
            const isz n = KW - 4 * gg;
            uint32_t word = 0;
            if (n >= 4)
                memcpy(&word, wt, 4);
            else
                for (isz t = 0; t < n; t++) word |= (uint32_t)wt[t] << (8 * t);
            wv[i * G + gg] = (int32_t)word;
        }
}

/* output plane pl (channel c of image a->img; a->comp NULL) from the windows: the nt (window offset, weight word)
 * pairs' vpdpbusd over nout flat outputs of pitch P, as `mode` (qdw_mode): codes or floats straight to the output
 * (through acc where P > OW), or the sums into acc, then q_epilogue over the plane */
PD_TARGET_VNNI static inline __attribute__((always_inline)) void qdw_plane_out(const int mode, const q_args *a,
                                                                              int32_t comp, const int32_t *win,
                                                                              const isz *off, const int32_t *wv,
                                                                              isz nt, isz nout, isz P, int32_t *acc,
                                                                              isz c, isz pl) {
    const conv_geo *g = &a->geo;
    const isz OW = g->OW, L = g->OH * OW, es = mode == QDW_FLOATS || mode == QDW_SUMS ? 4 : 1;
    void *o = acc;
    isz lim = nout;
    if (mode != QDW_SUMS && P == OW) { /* no dropped columns: straight to the output */
        o = es == 1 ? (void *)(a->codes + pl * L) : (void *)(a->out + pl * L);
        lim = L;
    }
    isz o0 = 0;
#define QDW_SUMS_WIN(nv)                                                                                           \
    do {                                                                                                           \
        if (mode == QDW_CODES_RELU)                                                                                \
            qdw_sums_win(nv, QDW_CODES_RELU, win, off, wv, nt, o0, o, lim, a, c, comp);                            \
        else if (mode == QDW_CODES)                                                                                \
            qdw_sums_win(nv, QDW_CODES, win, off, wv, nt, o0, o, lim, a, c, comp);                                 \
        else if (mode == QDW_FLOATS)                                                                               \
            qdw_sums_win(nv, QDW_FLOATS, win, off, wv, nt, o0, o, lim, a, c, comp);                                \
        else                                                                                                       \
            qdw_sums_win(nv, QDW_SUMS, win, off, wv, nt, o0, o, lim, a, c, comp);                                  \
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
            qdw_pack_rows(es == 1 ? (void *)(a->codes + pl * L) : (void *)(a->out + pl * L), acc, g->OH, OW, P, es);
        return;
    }
    if (P != OW)
        for (isz oh = 1; oh < g->OH; oh++) memmove(acc + oh * OW, acc + oh * P, (size_t)OW * sizeof(int32_t));
    q_epilogue(a, acc, L, 1, c, 0, L);
}
#endif

#endif /* PD_NATIVE_QDW_H */
