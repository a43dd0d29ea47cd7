/* pdlite native host kernels: the int8 conv's shared internals (qgemm.c: columns form, fc, entries; qdirect.c: the
 * direct form): the call's arguments, the quantized words, the epilogues, the VNNI accumulator macros */
#ifndef PD_NATIVE_QGEMM_H
#define PD_NATIVE_QGEMM_H
#include "qquant.h"

#if defined(PD_X86_DISPATCH)
#define PD_TARGET_VNNI __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma")))
#define PD_TARGET_AVXVNNI __attribute__((target("avxvnni,avx2,fma")))
#endif

typedef struct {
    int mr, nrt, kg; /* rows per weight block, columns per tile, reduction steps per group (4: u8x4, 2: s16x2) */
    int u8;          /* columns stored + 128 as uint8 (the comp[m] correction applies) */
    const char *name;
} q_format;

typedef struct {
    const float *x; /* the image batch (N, C, H, W) */
    const void *wp; /* packed weights */
    const int32_t *comp;
    const float *mul, *bias, *res;
    float *out;
    void *xp; /* the packed columns of the current image */
    isz N, M, K, L, kgroups, tiles, mblocks, img;
    int pointwise, trans; /* columns = the image itself; out is (L, M) (fc) instead of (M, L) */
    int direct;           /* the direct form: columns read in place from the quantized padded image (qdirect.c) */
    int gemv;             /* one column (L = 1, pointwise) at vnni: q_gemv_vnni over the bytes of q_gemv_pack */
    isz span;             /* columns form: tiles per item, their sums kept for one epilogue over the span's columns */
    const isz *toff;      /* direct form: each tap's word offset (q_tap_off) */
    isz Hq, Wq, Pq, P, CG, Lg; /* direct form: phase planes' height, width, words; words per channel group; channel
                                 * groups; the grid's columns OH * Wq */
    conv_geo geo;
    q_param qp;
    q_out oq; /* the output's quantize -> dequantize (oq.on), Paddle's QDQ pair after the conv */
    const q_chain *chain; /* the pointwise ops after it (qchain.c), or NULL */
    const uint8_t *xc;    /* the input as codes (bytes q + 128, qp.k unused), or NULL: x */
    uint8_t *codes;       /* the output as codes quantized with cq (after act, oq and chain), or NULL: out */
    q_param cq;
    act_t act;
    q_format f;
    int fsum; /* the sums the epilogue reads are floats holding exact integers (qdwconv's float-sums form; no comp) */
} q_args;

typedef uint8_t q_v16b __attribute__((vector_size(16)));

/* the codes [q0, q0 + cnt) (cnt <= 16) of a row of bytes q + 128 as int32 q (NULL: zeros) */
PD_INLINE pd_v16i q_codes_v16(const uint8_t *row, isz q0, isz cnt) {
    q_v16b b = {0};
    if (!row) return (pd_v16i){0};
    if (cnt == 16)
        memcpy(&b, row + q0, sizeof b);
    else
        for (isz k = 0; k < cnt; k++) b[k] = row[q0 + k];
    return __builtin_convertvector(b, pd_v16i) - 128;
}

#ifdef PD_X86_DISPATCH
/* columns [q0, q0 + cnt) (cnt <= 16) of one row of codes as 16 bytes (NULL or past cnt: byte 128, code 0) */
PD_INLINE __m128i q_codes_row16(const void *rowp, isz q0, isz cnt) {
    const uint8_t *row = (const uint8_t *)rowp;
    if (row && cnt == 16) return _mm_loadu_si128((const __m128i *)(row + q0));
    uint8_t tmp[16];
    memset(tmp, 128, sizeof tmp);
    if (row) memcpy(tmp, row + q0, (size_t)cnt);
    return _mm_loadu_si128((const __m128i *)tmp);
}
#endif

/* the u8x4 words of columns [q0, q0 + cnt) of 4 rows of codes (NULL: code 0, byte 128): the bytes interleaved as they
 * are (x86: SSE2 unpacks) */
PD_INLINE q_v16u q_codes_words4(const void *const rows[4], isz q0, isz cnt) {
    q_v16u out = {0}; /* (every lane written below; gcc 12 on aarch64 cannot tell) */
#ifdef PD_X86_DISPATCH
    __m128i b[4];
    for (int t = 0; t < 4; t++) {
        b[t] = q_codes_row16(rows[t], q0, cnt);
    }
    const __m128i lo01 = _mm_unpacklo_epi8(b[0], b[1]), hi01 = _mm_unpackhi_epi8(b[0], b[1]);
    const __m128i lo23 = _mm_unpacklo_epi8(b[2], b[3]), hi23 = _mm_unpackhi_epi8(b[2], b[3]);
    const __m128i w[4] = {_mm_unpacklo_epi16(lo01, lo23), _mm_unpackhi_epi16(lo01, lo23),
                          _mm_unpacklo_epi16(hi01, hi23), _mm_unpackhi_epi16(hi01, hi23)};
    memcpy(&out, w, sizeof out);
#else
    for (int j = 0; j < 16; j++) {
        uint32_t word = 0;
        for (int t = 0; t < 4; t++) {
            const uint8_t *row = (const uint8_t *)rows[t];
            word |= (uint32_t)(row && j < cnt ? row[q0 + j] : 128) << (8 * t);
        }
        out[j] = word;
    }
#endif
    return out;
}

/* the s16x2 (avx2) words of columns [q0, q0 + cnt) of 2 rows of codes (NULL: 0): int16 pairs (b0 - 128, b1 - 128) */
PD_INLINE q_v16u q_codes_words2(const void *const rows[4], isz q0, isz cnt) {
    q_v16u out = {0}; /* (every lane written below; gcc 12 on aarch64 cannot tell) */
#ifdef PD_X86_DISPATCH
    __m128i b[2];
    for (int t = 0; t < 2; t++) {
        b[t] = q_codes_row16(rows[t], q0, cnt);
    }
    const __m128i z = _mm_setzero_si128(), c = _mm_set1_epi16(128);
    const __m128i l0 = _mm_sub_epi16(_mm_unpacklo_epi8(b[0], z), c), h0 = _mm_sub_epi16(_mm_unpackhi_epi8(b[0], z), c);
    const __m128i l1 = _mm_sub_epi16(_mm_unpacklo_epi8(b[1], z), c), h1 = _mm_sub_epi16(_mm_unpackhi_epi8(b[1], z), c);
    const __m128i w[4] = {_mm_unpacklo_epi16(l0, l1), _mm_unpackhi_epi16(l0, l1), _mm_unpacklo_epi16(h0, h1),
                          _mm_unpackhi_epi16(h0, h1)};
    memcpy(&out, w, sizeof out);
#else
    for (int j = 0; j < 16; j++) {
        uint32_t word = 0;
        for (int t = 0; t < 2; t++) {
            const uint8_t *row = (const uint8_t *)rows[t];
            const int q = row && j < cnt ? (int)row[q0 + j] - 128 : 0;
            word |= ((uint32_t)q & 0xffffu) << (16 * t);
        }
        out[j] = word;
    }
#endif
    return out;
}

/* the words of columns [q0, q0 + cnt) (cnt <= 16) of kg rows (NULL: zeros) quantized: kg 4: 4 x (q + 128) as uint8
 * (the vnni / baseline format), kg 2: 2 x int16 (avx2); rows of floats, or of codes for rt Q_RT_CODES */
PD_INLINE q_v16u q_words(const void *const rows[4], isz q0, isz cnt, int kg, const q_param *qp, const int rt) {
    if (rt == Q_RT_CODES && kg == 4) return q_codes_words4(rows, q0, cnt);
    if (rt == Q_RT_CODES && kg == 2) return q_codes_words2(rows, q0, cnt);
    pd_v16i q[4];
    for (int t = 0; t < kg; t++) {
        if (rt == Q_RT_CODES) {
            q[t] = q_codes_v16((const uint8_t *)rows[t], q0, cnt);
            continue;
        }
        const float *row = (const float *)rows[t];
        pd_v16 xv = {0};
        if (row && cnt == 16)
            memcpy(&xv, row + q0, sizeof xv);
        else if (row)
            for (isz k = 0; k < cnt; k++) xv[k] = row[q0 + k];
        q[t] = q_v16_rt(xv, qp, rt);
    }
    if (kg == 4) /* each byte + 128 (uint8) */
        return (((q_v16u)q[0] & 255u) | (((q_v16u)q[1] & 255u) << 8) | (((q_v16u)q[2] & 255u) << 16) |
                ((q_v16u)q[3] << 24)) ^ 0x80808080u;
    return ((q_v16u)q[0] & 0xffffu) | ((q_v16u)q[1] << 16);
}

#ifdef PD_X86_DISPATCH
/* the AVX2 register tile's step: 4 rows x 16 columns (x0, x1: 8 columns of int16 pairs each), wg the rows' pairs */
PD_TARGET_AVX2 static inline void q_avx2_madd4(__m256i acc[4][2], __m256i x0, __m256i x1, const int32_t *wg) {
    for (int m = 0; m < 4; m++) {
        const __m256i w = _mm256_set1_epi32(wg[m]);
        acc[m][0] = _mm256_add_epi32(acc[m][0], _mm256_madd_epi16(x0, w));
        acc[m][1] = _mm256_add_epi32(acc[m][1], _mm256_madd_epi16(x1, w));
    }
}

/* the tile's sums into out (row stride ld) */
PD_TARGET_AVX2 static inline void q_avx2_store4(int32_t *out, isz ld, __m256i acc[4][2]) {
    for (int m = 0; m < 4; m++) {
        _mm256_storeu_si256((__m256i *)(out + m * ld), acc[m][0]);
        _mm256_storeu_si256((__m256i *)(out + m * ld + 8), acc[m][1]);
    }
}

/* 8 floats quantized (round_type 0) as int32 lanes: cvtps2dq rounds half to even after the clamp, as q_v16 */
PD_TARGET_AVX2 static inline __m256i q_avx2_q8(const float *r, isz q0, isz cnt, __m256 k) {
    __m256 x = _mm256_setzero_ps();
    if (r && cnt == 8) {
        x = _mm256_loadu_ps(r + q0);
    } else if (r) {
        float t[8] = {0};
        for (isz i = 0; i < cnt; i++) t[i] = r[q0 + i];
        x = _mm256_loadu_ps(t);
    }
    __m256 y = _mm256_mul_ps(x, k);
    y = _mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q)); /* NaN -> 0 */
    y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(y);
}

/* the words of 8 columns of kg rows (NULL: zeros) quantized (round_type 0): kg 2 the s16x2 words (avx2), kg 4 the
 * u8x4 words, bytes q + 128 (avxvnni) */
PD_TARGET_AVX2 static inline __m256i q_avx2_words8(const void *const rows[4], int kg, isz q0, isz cnt, __m256 k) {
    if (kg == 2) {
        const __m256i lo = q_avx2_q8((const float *)rows[0], q0, cnt, k);
        const __m256i hi = q_avx2_q8((const float *)rows[1], q0, cnt, k);
        return _mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA);
    }
    const __m256i byte = _mm256_set1_epi32(255);
    __m256i w = _mm256_and_si256(q_avx2_q8((const float *)rows[0], q0, cnt, k), byte);
    for (int t = 1; t < 3; t++)
        w = _mm256_or_si256(
            w, _mm256_slli_epi32(_mm256_and_si256(q_avx2_q8((const float *)rows[t], q0, cnt, k), byte), 8 * t));
    w = _mm256_or_si256(w, _mm256_slli_epi32(q_avx2_q8((const float *)rows[3], q0, cnt, k), 24));
    return _mm256_xor_si256(w, _mm256_set1_epi32((int)0x80808080u));
}

#endif

/* --------------------------------------------------------------------------------------------------------------- */
/* epilogue: int32 accumulators -> float outputs                                                                   */
/* --------------------------------------------------------------------------------------------------------------- */

/* one output row's values (channel mm, sums s, residual r or NULL) into o: act(float(s - comp) * mul + bias (+ r)),
 * the output QDQ, the chain; 16-lane vectors (v16) or plain loops the compiler vectorises at the target's own width
 * (AVX2: 8 lanes; the 16-lane vector extensions spill there), the same operations in the same order */
PD_INLINE void q_row_values(const q_args *a, const int32_t *s, isz mm, float *o, const float *r, isz ncols,
                            const int v16, uint8_t *codes) {
    const int32_t cm = a->comp ? a->comp[mm] : 0;
    const float mul = a->mul[mm], b = a->bias ? a->bias[mm] : 0.0f;
    if (!v16 && a->fsum) {
        const float *sf = (const float *)s;
        if (r) {
            PD_SIMD for (isz j = 0; j < ncols; j++) o[j] = (sf[j] * mul + b) + r[j];
        } else {
            PD_SIMD for (isz j = 0; j < ncols; j++) o[j] = sf[j] * mul + b;
        }
    } else if (!v16) {
        if (r) {
            PD_SIMD for (isz j = 0; j < ncols; j++) o[j] = ((float)(s[j] - cm) * mul + b) + r[j];
        } else {
            PD_SIMD for (isz j = 0; j < ncols; j++) o[j] = (float)(s[j] - cm) * mul + b;
        }
    }
    if (!v16) {
        if (a->act.kind != ACT_NONE) bias_act_copy(o, o, ncols, 0.0f, 0, &a->act);
        if (a->oq.on) q_qdq_any(o, o, ncols, &a->oq);
        if (a->chain) q_chain_row(o, ncols, mm, a->chain);
        return;
    }
    const int regs = act_in_regs(&a->act); /* else: the activation and the QDQ over the stored row */
    const int qregs = a->oq.on && !(a->oq.recip && a->oq.qp.rt == 0); /* (else q_qdq_any's FMA form after) */
    for (isz j = 0; j < ncols; j += 16) {
        isz cnt = ncols - j < 16 ? ncols - j : 16;
        if (cnt < 16 && ncols >= 16) /* the row's last 16 instead of a partial vector: the overlap is recomputed, the
                                      * same values (o, codes are not the sums, r is read only) */
            j = ncols - 16, cnt = 16;
        pd_v16i iv;
        pd_v16 f;
        if (cnt == 16) {
            memcpy(&iv, s + j, sizeof iv);
        } else {
            int32_t t[16] = {0};
            for (isz k = 0; k < cnt; k++) t[k] = s[j + k];
            memcpy(&iv, t, sizeof iv);
        }
        if (a->fsum) /* (the same bits: the float sums are the integers) */
            f = (pd_v16)iv * mul + b;
        else
            f = __builtin_convertvector(iv - cm, pd_v16) * mul + b;
        if (r) {
            pd_v16 rv = {0};
            if (cnt == 16) {
                memcpy(&rv, r + j, sizeof rv);
            } else {
                float t[16] = {0};
                for (isz k = 0; k < cnt; k++) t[k] = r[j + k];
                memcpy(&rv, t, sizeof rv);
            }
            f += rv;
        }
        if (regs) {
            bias_act_v16(&f, 0.0f, 0, &a->act);
            if (qregs) f = q_qdq_v16(f, &a->oq);
        }
        if (codes) { /* (q_epilogue_rows: only where nothing follows in the row) */
            const q_v16b c = __builtin_convertvector(q_v16(f, &a->cq) + 128, q_v16b);
            if (cnt == 16)
                memcpy(codes + j, &c, sizeof c);
            else
                for (isz k = 0; k < cnt; k++) codes[j + k] = c[k];
        } else if (cnt == 16) {
            memcpy(o + j, &f, sizeof f);
        } else {
            float t[16];
            memcpy(t, &f, sizeof t);
            for (isz k = 0; k < cnt; k++) o[j + k] = t[k];
        }
    }
    if (!regs) {
        bias_act_copy(o, o, ncols, 0.0f, 0, &a->act);
        if (a->oq.on) q_qdq_row(o, o, ncols, &a->oq);
    } else if (a->oq.on && !qregs) {
        q_qdq_any(o, o, ncols, &a->oq);
    }
    if (a->chain) q_chain_row(o, ncols, mm, a->chain);
}

#ifdef PD_X86_DISPATCH
/* Codes straight from the sums (x86 intrinsics, a whole tile's rows): for outputs as codes (round_type 0) after
 * act none / relu / relu6, no QDQ, chain or float sums. The same codes as q_row_values then q_v16 with fewer
 * operations: relu as max(x, 0) (it gives +0 for -0 and 0 for NaN where x < 0 ? 0 : x keeps them: both are code 0),
 * relu6's bound as min; the NaN -> 0 step only without an activation (max(x, 0) leaves none); the clamps as max / min
 * (the same values on non-NaN); cvtps2dq's round half to even (the default MXCSR mode) for the 1.5 * 2^23 addition.
 * The multiply-add and the residual's add in q_row_values' order. */
PD_INLINE int q_codes_fast(const q_args *a) {
    return a->codes && !a->chain && !a->oq.on && !a->fsum && !a->trans && a->cq.rt == 0 && isfinite(a->cq.k) &&
           (a->act.kind == ACT_NONE || a->act.kind == ACT_RELU || a->act.kind == ACT_RELU6);
}

/* one output row's parameters for the codes-from-the-sums loops: its sums, comp, multiplier, bias, residual, codes */
typedef struct {
    const int32_t *s;
    int32_t cm;
    float mul, b;
    const float *r;
    uint8_t *o;
} q_row_of;

PD_INLINE q_row_of q_row_at(const q_args *a, const int32_t *acc, isz ld, isz m, isz m0, isz col0) {
    const isz mm = m0 + m, at = a->img * a->M * a->L + mm * a->L + col0;
    return (q_row_of){acc + m * ld, a->comp ? a->comp[mm] : 0, a->mul[mm], a->bias ? a->bias[mm] : 0.0f,
                      a->res ? a->res + at : NULL, a->codes + at};
}

PD_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 q_fast_v16(__m512 f, const int kind, __m512 top,
                                                                             __m512 k) {
    const __m512 zero = _mm512_setzero_ps();
    if (kind == ACT_NONE) {
        f = _mm512_mul_ps(f, k);
        f = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f); /* NaN -> 0 */
    } else {
        f = _mm512_max_ps(f, zero);
        if (kind == ACT_RELU6) f = _mm512_min_ps(f, top);
        f = _mm512_mul_ps(f, k);
    }
    return _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
}

/* (kind a constant: the byte stores may alias the arguments, so a kind read in the loop was reloaded each step) */
PD_TARGET_AVX512 static inline __attribute__((always_inline)) void q_rows_codes_avx512_k(const int kind,
                                                                                        const q_args *a,
                                                                                        const int32_t *acc, isz ld,
                                                                                        isz mrows, isz m0, isz col0,
                                                                                        isz ncols) {
    const __m512 k = _mm512_set1_ps(a->cq.k), top = _mm512_set1_ps(a->act.a0);
    const __m512i off = _mm512_set1_epi32(128);
    for (isz m = 0; m < mrows; m++) {
        const q_row_of row = q_row_at(a, acc, ld, m, m0, col0);
        const __m512i cm = _mm512_set1_epi32(row.cm);
        const __m512 mul = _mm512_set1_ps(row.mul), b = _mm512_set1_ps(row.b);
        for (isz j = 0; j < ncols; j += 16) {
            const __mmask16 mk = ncols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ncols - j)) - 1u);
            const __m512i iv = _mm512_maskz_loadu_epi32(mk, row.s + j);
            __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(iv, cm)), mul, b);
            if (row.r) f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(mk, row.r + j));
            f = q_fast_v16(f, kind, top, k);
            _mm_mask_storeu_epi8(row.o + j, mk, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), off)));
        }
    }
}

/* the same at AVX2, 8 at a time (the tails through padded copies) */
PD_TARGET_AVX2 static inline __attribute__((always_inline)) __m256 q_fast_v8(__m256 f, const int kind, __m256 top,
                                                                          __m256 k) {
    const __m256 zero = _mm256_setzero_ps();
    if (kind == ACT_NONE) {
        f = _mm256_mul_ps(f, k);
        f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q)); /* NaN -> 0 */
    } else {
        f = _mm256_max_ps(f, zero);
        if (kind == ACT_RELU6) f = _mm256_min_ps(f, top);
        f = _mm256_mul_ps(f, k);
    }
    return _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
}

PD_TARGET_AVX2 static inline __attribute__((always_inline)) void q_rows_codes_avx2_k(const int kind, const q_args *a,
                                                                                   const int32_t *acc, isz ld,
                                                                                   isz mrows, isz m0, isz col0,
                                                                                   isz ncols) {
    const __m256 k = _mm256_set1_ps(a->cq.k), top = _mm256_set1_ps(a->act.a0);
    const __m256i off = _mm256_set1_epi32(128);
    for (isz m = 0; m < mrows; m++) {
        const q_row_of row = q_row_at(a, acc, ld, m, m0, col0);
        const __m256i cm = _mm256_set1_epi32(row.cm);
        const __m256 mul = _mm256_set1_ps(row.mul), b = _mm256_set1_ps(row.b);
        for (isz j = 0; j < ncols; j += 8) {
            const isz cnt = ncols - j < 8 ? ncols - j : 8;
            __m256i iv;
            __m256 rv = _mm256_setzero_ps();
            if (cnt == 8) {
                iv = _mm256_loadu_si256((const __m256i *)(row.s + j));
                if (row.r) rv = _mm256_loadu_ps(row.r + j);
            } else {
                int32_t ti[8] = {0};
                float tr[8] = {0};
                for (isz t = 0; t < cnt; t++) ti[t] = row.s[j + t], tr[t] = row.r ? row.r[j + t] : 0.0f;
                iv = _mm256_loadu_si256((const __m256i *)ti);
                rv = _mm256_loadu_ps(tr);
            }
            __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(iv, cm)), mul, b);
            if (row.r) f = _mm256_add_ps(f, rv);
            f = q_fast_v8(f, kind, top, k);
            const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(f), off);
            const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            const __m128i bytes = _mm_packus_epi16(w, w);
            if (cnt == 8) {
                _mm_storel_epi64((__m128i *)(row.o + j), bytes);
            } else {
                uint8_t tb[16];
                _mm_storeu_si128((__m128i *)tb, bytes);
                for (isz t = 0; t < cnt; t++) row.o[j + t] = tb[t];
            }
        }
    }
}
#endif

#ifdef PD_X86_DISPATCH
PD_TARGET_AVX512 static void q_rows_codes_avx512(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0,
                                                 isz col0, isz ncols) {
    if (a->act.kind == ACT_NONE)
        q_rows_codes_avx512_k(ACT_NONE, a, acc, ld, mrows, m0, col0, ncols);
    else if (a->act.kind == ACT_RELU)
        q_rows_codes_avx512_k(ACT_RELU, a, acc, ld, mrows, m0, col0, ncols);
    else
        q_rows_codes_avx512_k(ACT_RELU6, a, acc, ld, mrows, m0, col0, ncols);
}

PD_TARGET_AVX2 static void q_rows_codes_avx2(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz col0,
                                             isz ncols) {
    if (a->act.kind == ACT_NONE)
        q_rows_codes_avx2_k(ACT_NONE, a, acc, ld, mrows, m0, col0, ncols);
    else if (a->act.kind == ACT_RELU)
        q_rows_codes_avx2_k(ACT_RELU, a, acc, ld, mrows, m0, col0, ncols);
    else
        q_rows_codes_avx2_k(ACT_RELU6, a, acc, ld, mrows, m0, col0, ncols);
}
#endif

#ifdef PD_X86_DISPATCH
/* bytes o[0 .. n) through a 256-byte table: two vpermi2b of 128 entries each, picked by the index's top bit */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static inline void q_lut_vbmi(uint8_t *o, isz n,
                                                                                    const uint8_t *lut) {
    const __m512i t0 = _mm512_loadu_si512((const void *)lut), t1 = _mm512_loadu_si512((const void *)(lut + 64));
    const __m512i t2 = _mm512_loadu_si512((const void *)(lut + 128)), t3 = _mm512_loadu_si512((const void *)(lut + 192));
    for (isz i = 0; i < n; i += 64) {
        const __mmask64 mk = n - i >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (n - i)) - 1;
        const __m512i idx = _mm512_maskz_loadu_epi8(mk, o + i);
        const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1), hi = _mm512_permutex2var_epi8(t2, idx, t3);
        _mm512_mask_storeu_epi8(o + i, mk, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
    }
}
#endif

/* a row's codes through its chain's table (q_chain_lut): the values (the chain run up to its lut_at step) quantized as
 * that QDQ step quantizes them, then each code looked up */
PD_INLINE void q_lut_codes(uint8_t *o, const float *x, isz n, const q_chain *c) {
    q_codes_row(o, x, n, &c->s[c->lut_at].oq.qp);
#ifdef PD_X86_DISPATCH
    if (g_qvbmi) {
        q_lut_vbmi(o, n, c->lut);
        return;
    }
#endif
    for (isz i = 0; i < n; i++) o[i] = c->lut[o[i]];
}

#define Q_CODES_CHUNK 512 /* a codes output's values are computed this many at a time on the stack, then quantized */

/* rows [m0, m0 + mrows) x columns [col0, col0 + ncols) of the output from the int32 sums acc (row stride ld): floats,
 * or codes (a->codes) */
PD_INLINE void q_epilogue_rows(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz col0, isz ncols,
                               const int v16) {
#ifdef PD_X86_DISPATCH
    if (q_codes_fast(a) && g_qisa == Q_VNNI) {
        q_rows_codes_avx512(a, acc, ld, mrows, m0, col0, ncols);
        return;
    }
    if (q_codes_fast(a) && Q_AVX2_CLASS) {
        q_rows_codes_avx2(a, acc, ld, mrows, m0, col0, ncols);
        return;
    }
#endif
    for (isz m = 0; m < mrows; m++) {
        const isz mm = m0 + m;
        const int32_t *s = acc + m * ld;
        if (a->trans) { /* fc: out (L, M) */
            const int32_t cm = a->comp ? a->comp[mm] : 0;
            const float mul = a->mul[mm], b = a->bias ? a->bias[mm] : 0.0f;
            float *o = a->out + col0 * a->M + mm;
            const float *r = a->res ? a->res + col0 * a->M + mm : NULL;
            for (isz j = 0; j < ncols; j++) {
                float v = (float)(s[j] - cm) * mul + b;
                if (r) v += r[j * a->M];
                bias_act_copy(&v, &v, 1, 0.0f, 0, &a->act);
                if (a->oq.on) q_qdq_row(&v, &v, 1, &a->oq);
                o[j * a->M] = v;
            }
            continue;
        }
        const isz off = a->img * a->M * a->L + mm * a->L + col0;
        const float *r = a->res ? a->res + off : NULL;
        if (!a->codes) {
            q_row_values(a, s, mm, a->out + off, r, ncols, v16, NULL);
            continue;
        }
        if (v16 && !a->chain && act_in_regs(&a->act) && !(a->oq.on && a->oq.recip && a->oq.qp.rt == 0)) {
            /* the codes straight from the registers */
            q_row_values(a, s, mm, NULL, r, ncols, 1, a->codes + off);
            continue;
        }
        for (isz j = 0; j < ncols; j += Q_CODES_CHUNK) {
            const isz cnt = ncols - j < Q_CODES_CHUNK ? ncols - j : Q_CODES_CHUNK;
            float t[Q_CODES_CHUNK];
            q_row_values(a, s + j, mm, t, r ? r + j : NULL, cnt, v16, NULL);
            if (a->chain && a->chain->lut_at >= 0)
                q_lut_codes(a->codes + off + j, t, cnt, a->chain);
            else
                q_codes_row(a->codes + off + j, t, cnt, &a->cq);
        }
    }
}

PD_INLINE void q_epilogue(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz col0, isz ncols) {
    q_epilogue_rows(a, acc, ld, mrows, m0, col0, ncols, 1);
}

/* the same epilogue as plain loops (fc's transposed output: q_epilogue's) */
PD_INLINE void q_epilogue_loops(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz col0, isz ncols) {
    q_epilogue_rows(a, acc, ld, mrows, m0, col0, ncols, a->trans ? 1 : 0);
}

#ifdef PD_X86_DISPATCH
#define Q_ACC_DECL(m) __m512i c##m##0 = _mm512_setzero_si512(), c##m##1 = c##m##0, c##m##2 = c##m##0
#define Q_ACC_STEP(m)                                                                                             \
    do {                                                                                                           \
        const __m512i w_ = _mm512_set1_epi32(wg[m]);                                                              \
        c##m##0 = _mm512_dpbusd_epi32(c##m##0, x0, w_);                                                           \
        if (nv > 1) c##m##1 = _mm512_dpbusd_epi32(c##m##1, x1, w_);                                               \
        if (nv > 2) c##m##2 = _mm512_dpbusd_epi32(c##m##2, x2, w_);                                               \
    } while (0)
/* (the sums of row m into sums + m * ld) */
#define Q_ACC_OUT(m)                                                                                              \
    do {                                                                                                           \
        _mm512_storeu_si512((void *)(sums + (m) * ld), c##m##0);                                                  \
        if (nv > 1) _mm512_storeu_si512((void *)(sums + (m) * ld + 16), c##m##1);                                 \
        if (nv > 2) _mm512_storeu_si512((void *)(sums + (m) * ld + 32), c##m##2);                                 \
    } while (0)
#endif

#ifdef PD_X86_DISPATCH
/* AVX-VNNI (the VEX vpdpbusd on 256 bits, CPUs without AVX-512): 6 rows x 16 columns, 12 ymm accumulators */
#define Q_AVXVNNI_DECL(m) __m256i d##m##0 = _mm256_setzero_si256(), d##m##1 = d##m##0
#define Q_AVXVNNI_STEP(m)                                                                                         \
    do {                                                                                                           \
        const __m256i w_ = _mm256_set1_epi32(wg[m]);                                                              \
        d##m##0 = _mm256_dpbusd_avx_epi32(d##m##0, x0, w_);                                                       \
        d##m##1 = _mm256_dpbusd_avx_epi32(d##m##1, x1, w_);                                                       \
    } while (0)
#define Q_AVXVNNI_OUT(m)                                                                                          \
    do {                                                                                                           \
        _mm256_storeu_si256((__m256i *)(sums + (m) * ld), d##m##0);                                               \
        _mm256_storeu_si256((__m256i *)(sums + (m) * ld + 8), d##m##1);                                           \
    } while (0)
#define Q_AVXVNNI_ALL(M) M(0); M(1); M(2); M(3); M(4); M(5)
#endif

/* the direct form (qdirect.c) */
PD_HIDDEN isz q_tap_off(const q_args *a, isz t);   /* tap t's word offset in the quantized image */
PD_HIDDEN void q_direct_pack_image(q_args *a);     /* the current image quantized into a->xp (parallel) */
PD_HIDDEN void q_direct_tile(const q_args *a, isz tile, isz mb); /* one item of the direct form */
PD_HIDDEN void q_direct_pick(int isa);

#ifdef PD_X86_DISPATCH
/* the one-column forms (qgemv.c) */
PD_HIDDEN void q_gemv_pack(const q_args *a);     /* vnni: the column's u8x4 words into a->xp */
PD_HIDDEN void q_gemv_pack_s16(const q_args *a); /* avx2: the column as int16 into a->xp */
PD_HIDDEN void q_gemv_vnni(const q_args *a, isz mb);
PD_HIDDEN void q_gemv_avx2(const q_args *a, isz mb);
#endif

#endif /* PD_NATIVE_QGEMM_H */
