/* pdlite native host kernels: the int8 conv's one-column forms (a 1x1 conv of a 1x1 map, an fc of one row; qgemm.c
 * runs them for L = 1 at vnni and avx2): the column quantized once into a->xp (q_gemv_pack, q_gemv_pack_s16), then
 * each block of rows summed over the whole reduction (q_gemv_vnni, q_gemv_avx2) and its epilogue run across the rows
 */
#include "qgemm.h"

#ifdef PD_X86_DISPATCH
/* the epilogue of one column's rows [m0, m0 + mrows) (sums in acc): the outputs are consecutive ((M, 1), or fc's
 * (1, M)): q_epilogue's operations per value, in its order, across the rows */
PD_INLINE void q_gemv_epilogue(const q_args *a, const int32_t *out, isz m0, isz mrows) {
    const isz off = a->img * a->M + m0;
    float *o = a->codes ? NULL : a->out + off;
    pd_v16 f = {0}, mul = {0}, b = {0}, r = {0};
    pd_v16i iv = {0};
    for (isz m = 0; m < mrows; m++) {
        iv[m] = out[m] - (a->comp ? a->comp[m0 + m] : 0);
        mul[m] = a->mul[m0 + m];
        b[m] = a->bias ? a->bias[m0 + m] : 0.0f;
        r[m] = a->res ? a->res[off + m] : 0.0f;
    }
    f = __builtin_convertvector(iv, pd_v16) * mul + b;
    if (a->res) f += r;
    const int regs = act_in_regs(&a->act);
    if (regs) {
        bias_act_v16(&f, 0.0f, 0, &a->act);
        if (a->oq.on) f = q_qdq_v16(f, &a->oq);
    }
    float t[16];
    memcpy(t, &f, sizeof t);
    if (!regs) {
        bias_act_copy(t, t, mrows, 0.0f, 0, &a->act);
        if (a->oq.on) q_qdq_row(t, t, mrows, &a->oq);
    }
    if (a->chain)
        for (isz m = 0; m < mrows; m++) q_chain_row(t + m, 1, m0 + m, a->chain);
    if (a->codes && a->chain && a->chain->lut_at >= 0)
        q_lut_codes(a->codes + off, t, mrows, a->chain);
    else if (a->codes)
        q_codes_row(a->codes + off, t, mrows, &a->cq);
    else
        memcpy(o, t, (size_t)mrows * sizeof(float));
}

/* one column (L = 1: convs of 1x1 maps, fc of one row): the lanes run over the block's 8 rows and two reduction
 * groups instead of 48 columns (the register tile would compute 47 columns for nothing). A 64-byte load of the packed
 * weights holds groups g and g + 1 of the block ([g][8 rows][4]), read against [x word g] x 8, [x word g + 1] x 8;
 * the two halves are added at the end. The same int32 sums. */
PD_HIDDEN PD_TARGET_VNNI void q_gemv_vnni(const q_args *a, isz mb) {
    const isz ng = a->kgroups;
    const uint32_t *xp = (const uint32_t *)a->xp; /* group g's word: xp[g] (q_gemv_pack) */
    const int32_t *wb = (const int32_t *)a->wp + mb * ng * 8;
    const __m512i lo = _mm512_setzero_si512();
    __m512i c0 = lo, c1 = lo, c2 = lo, c3 = lo;
    isz g = 0;
#define QG_STEP(c, gg)                                                                                            \
    c = _mm512_dpbusd_epi32(c,                                                                                     \
                            _mm512_inserti64x4(_mm512_set1_epi32((int)xp[gg]),                                     \
                                               _mm256_set1_epi32((int)xp[(gg) + 1]), 1),                            \
                            _mm512_loadu_si512((const void *)(wb + (gg) * 8)))
    for (; g + 8 <= ng; g += 8) {
        QG_STEP(c0, g);
        QG_STEP(c1, g + 2);
        QG_STEP(c2, g + 4);
        QG_STEP(c3, g + 6);
    }
    for (; g + 2 <= ng; g += 2) QG_STEP(c0, g);
#undef QG_STEP
    if (g < ng) /* the last group alone (lanes 8..15 read nothing) */
        c1 = _mm512_dpbusd_epi32(c1, _mm512_set1_epi32((int)xp[g]),
                                 _mm512_maskz_loadu_epi32(0x00ff, (const void *)(wb + g * 8)));
    const __m512i c = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3));
    int32_t out[8];
    _mm256_storeu_si256((__m256i *)out,
                        _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1)));
    const isz m0 = mb * 8, mrows = a->M - m0 < 8 ? a->M - m0 : 8;
    q_gemv_epilogue(a, out, m0, mrows);
}

/* x[k0, k0 + 16) of a column of K floats quantized (past K: zeros' codes), for the one-column packs below */
PD_INLINE pd_v16i q_gemv_col16(const float *x, isz K, isz k0, const q_param *qp) {
    const isz cnt = K - k0 < 16 ? (K > k0 ? K - k0 : 0) : 16;
    pd_v16 xv = {0};
    if (cnt == 16)
        memcpy(&xv, x + k0, sizeof xv);
    else
        for (isz k = 0; k < cnt; k++) xv[k] = x[k0 + k];
    return q_v16(xv, qp);
}

/* the one column of the current image (K floats) quantized into a->xp as bytes q + 128: the words of 4 consecutive
 * reduction steps are the bytes in place (past K: 128, read against zero weights) */
PD_HIDDEN PD_TARGET_VNNI void q_gemv_pack(const q_args *a) {
    uint8_t *o = (uint8_t *)a->xp;
    if (a->xc) { /* codes: the bytes as they are */
        memcpy(o, a->xc + a->img * a->K, (size_t)a->K);
        memset(o + a->K, 128, (size_t)(a->kgroups * 4 - a->K));
        return;
    }
    const float *x = a->x + a->img * a->K;
    for (isz k0 = 0; k0 < a->kgroups * 4; k0 += 16) {
        const pd_v16i q = q_gemv_col16(x, a->K, k0, &a->qp);
        uint8_t b[16] __attribute__((aligned(16)));
        _mm_store_si128((__m128i *)b, _mm512_cvtepi32_epi8(_mm512_add_epi32((__m512i)q, _mm512_set1_epi32(128))));
        const isz n = a->kgroups * 4 - k0 < 16 ? a->kgroups * 4 - k0 : 16;
        memcpy(o + k0, b, (size_t)n);
    }
}

/* the AVX2 form of one column: the packed weights' groups g and g + 1 of a block of 4 rows ([g][4 rows][2 int16]) in
 * one ymm against [x pair g] x 4, [x pair g + 1] x 4 (vpmaddwd), the halves added at the end */
PD_HIDDEN PD_TARGET_AVX2 void q_gemv_avx2(const q_args *a, isz mb) {
    const isz ng = a->kgroups;
    const int32_t *xp = (const int32_t *)a->xp; /* group g's int16 pair: xp[g] (q_gemv_pack_s16) */
    const int32_t *wb = (const int32_t *)a->wp + mb * ng * 4;
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
    isz g = 0;
#define QG2_STEP(c, gg)                                                                                           \
    c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi32(xp[gg])), \
                                                                       _mm_set1_epi32(xp[(gg) + 1]), 1),          \
                                               _mm256_loadu_si256((const __m256i *)(wb + (gg) * 4))))
    for (; g + 8 <= ng; g += 8) {
        QG2_STEP(c0, g);
        QG2_STEP(c1, g + 2);
        QG2_STEP(c2, g + 4);
        QG2_STEP(c3, g + 6);
    }
    for (; g + 2 <= ng; g += 2) QG2_STEP(c0, g);
#undef QG2_STEP
    const __m256i c = _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    if (g < ng) /* the last group alone */
        s4 = _mm_add_epi32(s4, _mm_madd_epi16(_mm_set1_epi32(xp[g]), _mm_loadu_si128((const __m128i *)(wb + g * 4))));
    int32_t out[4];
    _mm_storeu_si128((__m128i *)out, s4);
    const isz m0 = mb * 4, mrows = a->M - m0 < 4 ? a->M - m0 : 4;
    q_gemv_epilogue(a, out, m0, mrows);
}

/* the AVX2 form's column: q as int16 (pairs of consecutive reduction steps are the words; past K: 0) */
PD_HIDDEN PD_TARGET_AVX2 void q_gemv_pack_s16(const q_args *a) {
    int16_t *o = (int16_t *)a->xp;
    for (isz k0 = 0; k0 < a->kgroups * 2; k0 += 16) {
        const isz left = a->K - k0 < 16 ? (a->K > k0 ? a->K - k0 : 0) : 16;
        const pd_v16i q = a->xc ? q_codes_v16(a->xc + a->img * a->K, k0, left)
                                : q_gemv_col16(a->x + a->img * a->K, a->K, k0, &a->qp);
        const isz n = a->kgroups * 2 - k0 < 16 ? a->kgroups * 2 - k0 : 16;
        for (isz k = 0; k < n; k++) o[k0 + k] = (int16_t)q[k];
    }
}
#endif
