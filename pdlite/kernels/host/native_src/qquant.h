/* pdlite native host kernels: Paddle's quantize_linear (and quantize -> dequantize) of float vectors, inlined by the
 * int8 kernels (qgemm.c) and the pointwise chains (qchain.c); compiled for each target that inlines them */
#ifndef PD_NATIVE_QQUANT_H
#define PD_NATIVE_QQUANT_H
#include "qint8.h"
#if defined(PD_X86_DISPATCH)
#include <immintrin.h>
#endif

enum { Q_BASE = 0, Q_AVX2 = 1, Q_VNNI = 2, Q_AVXVNNI = 3 };
extern PD_HIDDEN int g_qisa; /* the int8 format in use (qgemm.c's q_pick) */
extern PD_HIDDEN int g_qvbmi; /* vnni on a CPU with AVX512-VBMI (byte permutes: q_lut_codes) */
/* whether the int8 kernels run at AVX2's width (avx2, or avxvnni: AVX-VNNI's 256-bit vpdpbusd): the 8-lane helpers */
#define Q_AVX2_CLASS (g_qisa == Q_AVX2 || g_qisa == Q_AVXVNNI)

/* --------------------------------------------------------------------------------------------------------------- */
/* quantization of 16 floats (vector extensions: compiled for each target that inlines it)                       */
/* --------------------------------------------------------------------------------------------------------------- */

/* q(x) as int32 lanes, Paddle's quantize_linear (qp->rt 0) or the fake ops' rounding (rt 1); NaN reads as 0 */
PD_INLINE pd_v16i q_v16_rt(pd_v16 x, const q_param *qp, const int rt) {
    const pd_v16 lo = (pd_v16){0} - 128.0f, hi = (pd_v16){0} + 127.0f;
    if (rt == 0) {
        pd_v16 y = x * qp->k;
        y = (pd_v16)((pd_v16i)y & (y == y)); /* NaN -> 0 */
        y = (pd_v16)(((pd_v16i)y & ~(y < lo)) | ((pd_v16i)lo & (y < lo)));
        y = (pd_v16)(((pd_v16i)y & ~(y > hi)) | ((pd_v16i)hi & (y > hi)));
        y = (y + 12582912.0f) - 12582912.0f; /* round half to even (|y| <= 128) */
        return __builtin_convertvector(y, pd_v16i);
    }
    /* round_type 1: round_half_away(k * clip(x, -s, s)), computed exactly in double as pdlite's NumPy kernel */
    float t[16];
    int32_t r[16];
    memcpy(t, &x, sizeof t);
    for (int i = 0; i < 16; i++) {
        float v = t[i] != t[i] ? 0.0f : t[i];
        v = v < -qp->s ? -qp->s : (v > qp->s ? qp->s : v);
        const float y = qp->k * v;
        double a = floor(fabs((double)y) + 0.5);
        a = a > 128.0 ? 128.0 : a;
        int q = (int)(y < 0.0f ? -a : a);
        r[i] = q > 127 ? 127 : q;
    }
    pd_v16i out;
    memcpy(&out, r, sizeof out);
    return out;
}

/* q_v16_rt with the round type read at run time (the packing loops take it as a constant: q_pack_impl) */
PD_INLINE pd_v16i q_v16(pd_v16 x, const q_param *qp) { return qp->rt == 0 ? q_v16_rt(x, qp, 0) : q_v16_rt(x, qp, 1); }

/* o[0 .. n) = (q(x) * s) / qmax (o may be x), in this order: dequantize_linear's float32 bits (a multiply by s / qmax
 * rounds differently for most scales) */
PD_INLINE pd_v16 q_qdq_v16(pd_v16 x, const q_out *oq) {
    const pd_v16 q = __builtin_convertvector(q_v16(x, &oq->qp), pd_v16);
    return (q * oq->qp.s) / oq->qmax;
}

PD_INLINE void q_qdq_row(float *o, const float *x, isz n, const q_out *oq) {
    isz i = 0;
    for (; i + 16 <= n; i += 16) {
        pd_v16 xv;
        memcpy(&xv, x + i, sizeof xv);
        xv = q_qdq_v16(xv, oq);
        memcpy(o + i, &xv, sizeof xv);
    }
    if (i < n) {
        float t[16] = {0};
        for (isz j = 0; j < n - i; j++) t[j] = x[i + j];
        pd_v16 xv;
        memcpy(&xv, t, sizeof xv);
        xv = q_qdq_v16(xv, oq);
        memcpy(t, &xv, sizeof xv);
        for (isz j = 0; j < n - i; j++) o[i + j] = t[j];
    }
}

/* o[0 .. n) = (q(x) * s) / qmax for round_type 0 as a plain loop (clamp, then round half to even by the 1.5 * 2^23
 * addition): the compiler vectorises it at the target's own width (the 16-lane form spills with AVX2); o may be x */
PD_INLINE void q_qdq_loop(float *o, const float *x, isz n, const q_out *oq) {
    const float k = oq->qp.k, sc = oq->qp.s, qmax = oq->qmax;
    PD_SIMD for (isz j = 0; j < n; j++) {
        float y = k * x[j];
        y = y != y ? 0.0f : y;
        y = y < -128.0f ? -128.0f : (y > 127.0f ? 127.0f : y);
        y = (y + 12582912.0f) - 12582912.0f;
        o[j] = (y * sc) / qmax;
    }
}

#ifdef PD_X86_DISPATCH
/* q_codes_row for round_type 0 with AVX2 intrinsics, 8 at a time (the 16-lane vectors spill at AVX2): the clamp,
 * cvtps2dq (half to even, as the 1.5 * 2^23 addition), + 128, packed to bytes; the tail through a padded copy */
PD_TARGET_AVX2 static void q_codes_avx2(uint8_t *o, const float *x, isz n, const q_param *qp) {
    const __m256 k = _mm256_set1_ps(qp->k), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i off = _mm256_set1_epi32(128);
    for (isz i = 0; i < n; i += 8) {
        const isz cnt = n - i < 8 ? n - i : 8;
        __m256 y;
        if (cnt == 8) {
            y = _mm256_loadu_ps(x + i);
        } else {
            float t[8] = {0};
            for (isz j = 0; j < cnt; j++) t[j] = x[i + j];
            y = _mm256_loadu_ps(t);
        }
        y = _mm256_mul_ps(y, k);
        y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q)); /* NaN -> 0 */
        y = _mm256_min_ps(_mm256_max_ps(y, lo), hi);
        const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(y), off);
        const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        const __m128i b = _mm_packus_epi16(w, w);
        if (cnt == 8) {
            _mm_storel_epi64((__m128i *)(o + i), b);
        } else {
            uint8_t t[16];
            _mm_storeu_si128((__m128i *)t, b);
            for (isz j = 0; j < cnt; j++) o[i + j] = t[j];
        }
    }
}
#endif

#ifdef PD_X86_DISPATCH
/* the same with AVX-512, 16 at a time, masked tails (the int8 vnni format: after a chain, the codes of each row) */
PD_TARGET_AVX512 static inline void q_codes_avx512(uint8_t *o, const float *x, isz n, const q_param *qp) {
    const __m512 k = _mm512_set1_ps(qp->k), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
    const __m512i off = _mm512_set1_epi32(128);
    for (isz i = 0; i < n; i += 16) {
        const __mmask16 mk = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), k);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y); /* NaN -> 0 */
        y = _mm512_min_ps(_mm512_max_ps(y, lo), hi);
        _mm_mask_storeu_epi8(o + i, mk, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(y), off)));
    }
}
#endif

/* o[0 .. n) = the codes of x as bytes q + 128 (q = quantize_linear(x), qp): what an int8 op reading them would compute
 * from the floats; 16 at a time with q_v16 (a plain loop converting to bytes stayed scalar), AVX2: q_codes_avx2,
 * AVX-512 (vnni): q_codes_avx512 */
PD_INLINE void q_codes_row(uint8_t *o, const float *x, isz n, const q_param *qp) {
#ifdef PD_X86_DISPATCH
    if (Q_AVX2_CLASS && qp->rt == 0) {
        q_codes_avx2(o, x, n, qp);
        return;
    }
    if (g_qisa == Q_VNNI && qp->rt == 0) {
        q_codes_avx512(o, x, n, qp);
        return;
    }
#endif
    typedef uint8_t v16b __attribute__((vector_size(16)));
    for (isz i = 0; i < n; i += 16) {
        const isz cnt = n - i < 16 ? n - i : 16;
        pd_v16 xv = {0};
        if (cnt == 16)
            memcpy(&xv, x + i, sizeof xv);
        else
            for (isz j = 0; j < cnt; j++) xv[j] = x[i + j];
        const v16b b = __builtin_convertvector(q_v16(xv, qp) + 128, v16b);
        if (cnt == 16)
            memcpy(o + i, &b, sizeof b);
        else
            for (isz j = 0; j < cnt; j++) o[i + j] = b[j];
    }
}

#ifdef PD_X86_DISPATCH
/* q_qdq_loop with AVX2 intrinsics (GCC ran that loop's scalar version at the AVX2 target): the clamp, vroundps to
 * nearest even (as the 1.5 * 2^23 addition for |y| <= 128), (y * s) / qmax; the tail by q_qdq_loop */
PD_TARGET_AVX2 static void q_qdq_avx2(float *o, const float *x, isz n, const q_out *oq) {
    const __m256 k = _mm256_set1_ps(oq->qp.k), sc = _mm256_set1_ps(oq->qp.s), qm = _mm256_set1_ps(oq->qmax);
    const __m256 lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    isz i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), k);
        y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q));
        y = _mm256_min_ps(_mm256_max_ps(y, lo), hi);
        y = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(o + i, _mm256_div_ps(_mm256_mul_ps(y, sc), qm));
    }
    q_qdq_loop(o + i, x + i, n - i, oq);
}
#endif

#ifdef PD_X86_DISPATCH
/* the QDQ with the division as two FMAs (q_out_init checked them on every code), round_type 0: AVX-512 (the division
 * bounds a QDQ step of a chain in cache: vdivps) */
PD_TARGET_AVX512 static void q_qdq_recip_avx512(float *o, const float *x, isz n, const q_out *oq) {
    const __m512 k = _mm512_set1_ps(oq->qp.k), sc = _mm512_set1_ps(oq->qp.s), qm = _mm512_set1_ps(oq->qmax);
    const __m512 r = _mm512_set1_ps(oq->r), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
    isz i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 y = _mm512_mul_ps(_mm512_loadu_ps(x + i), k);
        y = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, y, _CMP_ORD_Q), y); /* NaN -> 0 */
        y = _mm512_min_ps(_mm512_max_ps(y, lo), hi);
        y = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512 p = _mm512_mul_ps(y, sc), y1 = _mm512_mul_ps(p, r);
        _mm512_storeu_ps(o + i, _mm512_fmadd_ps(_mm512_fnmadd_ps(y1, qm, p), r, y1));
    }
    q_qdq_loop(o + i, x + i, n - i, oq);
}

/* the same with AVX2 + FMA, 8 at a time */
PD_TARGET_AVX2 static void q_qdq_recip_avx2(float *o, const float *x, isz n, const q_out *oq) {
    const __m256 k = _mm256_set1_ps(oq->qp.k), sc = _mm256_set1_ps(oq->qp.s), qm = _mm256_set1_ps(oq->qmax);
    const __m256 r = _mm256_set1_ps(oq->r), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    isz i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), k);
        y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q));
        y = _mm256_min_ps(_mm256_max_ps(y, lo), hi);
        y = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256 p = _mm256_mul_ps(y, sc), y1 = _mm256_mul_ps(p, r);
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_fnmadd_ps(y1, qm, p), r, y1));
    }
    q_qdq_loop(o + i, x + i, n - i, oq);
}
#endif

/* the output QDQ by the fastest exact form for this ISA and round type */
PD_INLINE void q_qdq_any(float *o, const float *x, isz n, const q_out *oq) {
#ifdef PD_X86_DISPATCH
    if (oq->recip && oq->qp.rt == 0 && g_qisa == Q_VNNI) {
        q_qdq_recip_avx512(o, x, n, oq);
        return;
    }
    if (oq->recip && oq->qp.rt == 0 && Q_AVX2_CLASS) {
        q_qdq_recip_avx2(o, x, n, oq);
        return;
    }
    if (Q_AVX2_CLASS && oq->qp.rt == 0) {
        q_qdq_avx2(o, x, n, oq);
        return;
    }
#endif
    if (oq->qp.rt == 0)
        q_qdq_loop(o, x, n, oq);
    else
        q_qdq_row(o, x, n, oq);
}


#endif /* PD_NATIVE_QQUANT_H */
