/* pdlite native host kernels: int8 convolutions and fc with integer sums (see qint8.h, docs/quantization.md)
 *
 * out[n] (M, L) = act(float(sum_k q(x)[k, l] * W8[m, k]) * mul[m] + bias[m] (+ res)), q(x) the columns (im2col, or
 * the image itself for a 1x1 stride-1 conv) of the float input quantized as Paddle's quantize_linear does
 * (q = clip(round_half_even((qmax * inverse(s)) * x), -128, 127), or round_type 1: round_half_away((qmax * inverse(s))
 * * clip(x, -s, s))), W8 the int8 weights (per output channel scales folded into mul[m] = s / qmax * w_scale[m]).
 * The sums are exact int32 (no saturation anywhere: |sum| <= K * 128 * 128 < 2^31 for K < 2^17; the pass refuses
 * larger K), so every instruction set gives the same int32 accumulators, bit for bit; only the epilogue's float
 * multiply-add rounds.
 *
 * Formats (chosen once at import, qisa()):
 *   vnni     AVX512-VNNI vpdpbusd: u8 x s8 -> s32 in groups of 4. Columns quantized to int8 and stored + 128 as uint8
 *            ([tile][K/4][48 columns][4]); the + 128 is taken back by comp[m] = 128 * sum_k W8[m, k]. Weights
 *            [block of 8 rows][K/4][8][4]. Register tile 8 rows x 48 columns (24 zmm accumulators).
 *   avx2     vpmaddwd: s16 x s16 -> s32 in pairs (vpmaddubsw's s16 saturation is never used). Columns as int16
 *            ([tile][K/2][16 columns][2]), weights [block of 4 rows][K/2][4][2]; tile 4 rows x 16 columns.
 *   baseline the vnni format with tiles of 16 columns, plain C.
 * Per image: the columns are quantized and packed tile by tile (parallel over tiles), then every (tile, block of
 * rows) item runs one register tile over the whole reduction and writes its outputs (parallel over items; which
 * thread runs an item never changes its result).
 */
#include "qquant.h"

#if defined(PD_X86_DISPATCH)
#define PD_TARGET_VNNI __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma")))
#endif

PD_HIDDEN int g_qisa = Q_BASE;

typedef struct {
    int mr, nrt, kg; /* rows per weight block, columns per tile, reduction steps per group (4: u8x4, 2: s16x2) */
    int u8;          /* columns stored + 128 as uint8 (the comp[m] correction applies) */
    const char *name;
} q_format;

static const q_format Q_FORMATS[3] = {
    {8, 16, 4, 1, "baseline"},
    {4, 16, 2, 0, "avx2"},
    {8, 48, 4, 1, "vnni"},
};

PD_HIDDEN void q_pick(int isa) {
    g_qisa = Q_BASE;
#ifdef PD_X86_DISPATCH
    if (isa == PD_ISA_AVX512 && __builtin_cpu_supports("avx512vnni")) g_qisa = Q_VNNI;
    else if (isa >= PD_ISA_AVX2) g_qisa = Q_AVX2;
#else
    (void)isa;
#endif
}

PD_HIDDEN const char *q_isa_name(void) { return Q_FORMATS[g_qisa].name; }

/* --------------------------------------------------------------------------------------------------------------- */
/* packing the quantized columns of one tile                                                                      */
/* --------------------------------------------------------------------------------------------------------------- */

typedef struct {
    const float *x; /* the image batch (N, C, H, W) */
    const void *wp; /* packed weights */
    const int32_t *comp;
    const float *mul, *bias, *res;
    float *out;
    void *xp; /* the packed columns of the current image */
    isz N, M, K, L, kgroups, tiles, mblocks, img;
    int pointwise, trans; /* columns = the image itself; out is (L, M) (fc) instead of (M, L) */
    int direct;           /* stride 1: columns read in place from the quantized padded image (q_direct_*) */
    const isz *toff;      /* direct form: each tap's word offset (q_tap_off) */
    isz Hq, Wq, Pq, P, CG, Lg; /* direct form: phase planes' height, width, words; words per channel group; channel
                                 * groups; the grid's columns OH * Wq */
    conv_geo geo;
    q_param qp;
    q_out oq; /* the output's quantize -> dequantize (oq.on), Paddle's QDQ pair after the conv */
    const q_chain *chain; /* the pointwise ops after it (qchain.c), or NULL */
    act_t act;
    q_format f;
} q_args;

#ifdef PD_X86_DISPATCH
/* the s16x2 (AVX2) format's group `grp` from its two rows (NULL: zeros) with 8-lane intrinsics, round_type 0 (the
 * 16-lane vector extensions compile to spills with AVX2): cvtps2dq rounds half to even after the clamp, as q_v16 */
PD_TARGET_AVX2 static void q_pack_s16_avx2(const void *args, const float *r0, const float *r1, isz grp);
#endif

/* the words of columns [q0, q0 + cnt) (cnt <= 16) of kg rows (NULL: zeros) quantized: kg 4: 4 x (q + 128) as uint8
 * (the vnni / baseline format), kg 2: 2 x int16 (avx2) */
PD_INLINE q_v16u q_words(const float *const rows[4], isz q0, isz cnt, int kg, const q_param *qp, const int rt) {
    pd_v16i q[4];
    for (int t = 0; t < kg; t++) {
        pd_v16 xv = {0};
        if (rows[t] && cnt == 16)
            memcpy(&xv, rows[t] + q0, sizeof xv);
        else if (rows[t])
            for (isz k = 0; k < cnt; k++) xv[k] = rows[t][q0 + k];
        q[t] = q_v16_rt(xv, qp, rt);
    }
    if (kg == 4) /* each byte + 128 (uint8) */
        return (((q_v16u)q[0] & 255u) | (((q_v16u)q[1] & 255u) << 8) | (((q_v16u)q[2] & 255u) << 16) |
                ((q_v16u)q[3] << 24)) ^ 0x80808080u;
    return ((q_v16u)q[0] & 0xffffu) | ((q_v16u)q[1] << 16);
}

/* one reduction group (item) of the current image into a->xp, every tile: its kg rows of columns gathered over the
 * whole map at once (the image's own rows for a 1x1 stride-1 conv), then quantized 16 columns at a time and stored
 * interleaved ([tile][group][nrt][kg]) */
PD_INLINE void q_pack_rt(void *ctx, isz begin, isz end, const int rt) {
    const q_args *a = (const q_args *)ctx;
    const int kg = a->f.kg, nrt = a->f.nrt;
    const isz L = a->L;
    const float *x = a->x + a->img * a->geo.C * a->geo.H * a->geo.W;
    float *buf = a->pointwise ? NULL : (float *)pd_scratch((size_t)(kg * L) * sizeof(float));
    if (!a->pointwise && !buf) return;
    for (isz grp = begin; grp < end; grp++) {
        const float *rows[4];
        for (int t = 0; t < kg; t++) {
            const isz r = grp * kg + t;
            if (r >= a->K) {
                rows[t] = NULL;
            } else if (a->pointwise) {
                rows[t] = x + r * L;
            } else {
                im2col_block(&a->geo, x, r, r + 1, 0, L, buf + t * L, L);
                rows[t] = buf + t * L;
            }
        }
#ifdef PD_X86_DISPATCH
        if (kg == 2 && rt == 0 && g_qisa == Q_AVX2) {
            q_pack_s16_avx2(a, rows[0], rows[1], grp);
            continue;
        }
#endif
        for (isz q0 = 0; q0 < L; q0 += 16) {
            const isz cnt = L - q0 < 16 ? L - q0 : 16;
            const q_v16u word = q_words(rows, q0, cnt, kg, &a->qp, rt);
            const isz tile = q0 / nrt, v = (q0 % nrt) / 16;
            char *dst = (char *)a->xp + ((tile * a->kgroups + grp) * nrt + v * 16) * 4;
            memcpy(dst, &word, sizeof word);
        }
    }
    free(buf);
}

PD_INLINE void q_pack_impl(void *ctx, isz begin, isz end) {
    if (((const q_args *)ctx)->qp.rt == 0)
        q_pack_rt(ctx, begin, end, 0);
    else
        q_pack_rt(ctx, begin, end, 1);
}
PD_VERSIONS(q_pack)

#ifdef PD_X86_DISPATCH
PD_TARGET_AVX2 static __m256i q_avx2_q8(const float *r, isz q0, isz cnt, __m256 k) {
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

PD_TARGET_AVX2 static void q_pack_s16_avx2(const void *args, const float *r0, const float *r1, isz grp) {
    const q_args *a = (const q_args *)args;
    const __m256 k = _mm256_set1_ps(a->qp.k);
    for (isz q0 = 0; q0 < a->L; q0 += 8) {
        const isz cnt = a->L - q0 < 8 ? a->L - q0 : 8;
        const __m256i lo = q_avx2_q8(r0, q0, cnt, k), hi = q_avx2_q8(r1, q0, cnt, k);
        const __m256i word = _mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA);
        char *dst = (char *)a->xp + (((q0 / 16) * a->kgroups + grp) * 16 + (q0 % 16)) * 4;
        _mm256_store_si256((__m256i *)dst, word);
    }
}
#endif

/* --------------------------------------------------------------------------------------------------------------- */
/* epilogue: int32 accumulators -> float outputs                                                                   */
/* --------------------------------------------------------------------------------------------------------------- */

PD_INLINE void q_epilogue(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz col0, isz ncols) {
    for (isz m = 0; m < mrows; m++) {
        const isz mm = m0 + m;
        const int32_t cm = a->comp ? a->comp[mm] : 0;
        const float mul = a->mul[mm], b = a->bias ? a->bias[mm] : 0.0f;
        const int32_t *s = acc + m * ld;
        if (a->trans) { /* fc: out (L, M) */
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
        float *o = a->out + off;
        const float *r = a->res ? a->res + off : NULL;
        const int regs = act_in_regs(&a->act); /* else: the activation and the QDQ over the stored row */
        for (isz j = 0; j < ncols; j += 16) {
            const isz cnt = ncols - j < 16 ? ncols - j : 16;
            pd_v16i iv;
            pd_v16 f;
            if (cnt == 16) {
                memcpy(&iv, s + j, sizeof iv);
            } else {
                int32_t t[16] = {0};
                for (isz k = 0; k < cnt; k++) t[k] = s[j + k];
                memcpy(&iv, t, sizeof iv);
            }
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
                if (a->oq.on) f = q_qdq_v16(f, &a->oq);
            }
            if (cnt == 16) {
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
        }
        if (a->chain) q_chain_row(o, ncols, mm, a->chain);
    }
}

/* the same epilogue as plain loops the compiler vectorises at the target's own width (AVX2: 8 lanes; the 16-lane
 * vector extensions of q_epilogue spill there), same operations in the same order (fc's transposed output: q_epilogue)
 */
PD_INLINE void q_epilogue_loops(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz col0, isz ncols) {
    if (a->trans) {
        q_epilogue(a, acc, ld, mrows, m0, col0, ncols);
        return;
    }
    for (isz m = 0; m < mrows; m++) {
        const isz mm = m0 + m;
        const int32_t cm = a->comp ? a->comp[mm] : 0;
        const float mul = a->mul[mm], b = a->bias ? a->bias[mm] : 0.0f;
        const int32_t *s = acc + m * ld;
        const isz off = a->img * a->M * a->L + mm * a->L + col0;
        float *o = a->out + off;
        if (a->res) {
            const float *r = a->res + off;
            PD_SIMD for (isz j = 0; j < ncols; j++) o[j] = ((float)(s[j] - cm) * mul + b) + r[j];
        } else {
            PD_SIMD for (isz j = 0; j < ncols; j++) o[j] = (float)(s[j] - cm) * mul + b;
        }
        if (a->act.kind != ACT_NONE) bias_act_copy(o, o, ncols, 0.0f, 0, &a->act);
        if (a->oq.on) q_qdq_any(o, o, ncols, &a->oq);
        if (a->chain) q_chain_row(o, ncols, mm, a->chain);
    }
}

/* --------------------------------------------------------------------------------------------------------------- */
/* register tiles                                                                                                 */
/* --------------------------------------------------------------------------------------------------------------- */

/* item = tile * mblocks + block: rows [8 block, +8) x the tile's columns, u8x4 format, plain C */
static void q_tile_base(const q_args *a, isz tile, isz mb) {
    const isz nrt = 16, q0 = tile * nrt, nt = a->L - q0 < nrt ? a->L - q0 : nrt;
    const uint8_t *xp = (const uint8_t *)a->xp + tile * a->kgroups * nrt * 4;
    const int8_t *wb = (const int8_t *)a->wp + mb * a->kgroups * 8 * 4;
    int32_t acc[8][16];
    memset(acc, 0, sizeof acc);
    for (isz g = 0; g < a->kgroups; g++) {
        const uint8_t *xg = xp + g * nrt * 4;
        const int8_t *wg = wb + g * 32;
        for (int m = 0; m < 8; m++) {
            const int32_t w0 = wg[m * 4], w1 = wg[m * 4 + 1], w2 = wg[m * 4 + 2], w3 = wg[m * 4 + 3];
            for (int j = 0; j < 16; j++)
                acc[m][j] += xg[j * 4] * w0 + xg[j * 4 + 1] * w1 + xg[j * 4 + 2] * w2 + xg[j * 4 + 3] * w3;
        }
    }
    const isz m0 = mb * 8, mrows = a->M - m0 < 8 ? a->M - m0 : 8;
    q_epilogue_loops(a, &acc[0][0], 16, mrows, m0, q0, nt);
}

#ifdef PD_X86_DISPATCH
/* the same tile with AVX2's vpmaddwd (s16x2 format): 4 rows x 16 columns, 8 ymm accumulators */
PD_TARGET_AVX2 static void q_tile_avx2(const q_args *a, isz tile, isz mb) {
    const isz nrt = 16, q0 = tile * nrt, nt = a->L - q0 < nrt ? a->L - q0 : nrt;
    const int16_t *xp = (const int16_t *)a->xp + tile * a->kgroups * nrt * 2;
    const int32_t *wb = (const int32_t *)a->wp + mb * a->kgroups * 4;
    __m256i acc[4][2];
    for (int m = 0; m < 4; m++) acc[m][0] = acc[m][1] = _mm256_setzero_si256();
    for (isz g = 0; g < a->kgroups; g++) {
        const __m256i x0 = _mm256_load_si256((const __m256i *)(xp + g * 32));
        const __m256i x1 = _mm256_load_si256((const __m256i *)(xp + g * 32 + 16));
        const int32_t *wg = wb + g * 4;
        for (int m = 0; m < 4; m++) {
            const __m256i w = _mm256_set1_epi32(wg[m]);
            acc[m][0] = _mm256_add_epi32(acc[m][0], _mm256_madd_epi16(x0, w));
            acc[m][1] = _mm256_add_epi32(acc[m][1], _mm256_madd_epi16(x1, w));
        }
    }
    int32_t out[4][16];
    for (int m = 0; m < 4; m++) {
        _mm256_storeu_si256((__m256i *)&out[m][0], acc[m][0]);
        _mm256_storeu_si256((__m256i *)&out[m][8], acc[m][1]);
    }
    const isz m0 = mb * 4, mrows = a->M - m0 < 4 ? a->M - m0 : 4;
    q_epilogue_loops(a, &out[0][0], 16, mrows, m0, q0, nt);
}

/* VNNI: 8 rows x (16 nv) columns, nv <= 3 vectors, 8 nv zmm accumulators (named variables: GCC kept an array of
 * them in memory) */
#define Q_ACC_DECL(m) __m512i c##m##0 = _mm512_setzero_si512(), c##m##1 = c##m##0, c##m##2 = c##m##0
#define Q_ACC_STEP(m)                                                                                             \
    do {                                                                                                           \
        const __m512i w_ = _mm512_set1_epi32(wg[m]);                                                              \
        c##m##0 = _mm512_dpbusd_epi32(c##m##0, x0, w_);                                                           \
        if (nv > 1) c##m##1 = _mm512_dpbusd_epi32(c##m##1, x1, w_);                                               \
        if (nv > 2) c##m##2 = _mm512_dpbusd_epi32(c##m##2, x2, w_);                                               \
    } while (0)
#define Q_ACC_OUT(m)                                                                                              \
    do {                                                                                                           \
        _mm512_storeu_si512((void *)&out[m][0], c##m##0);                                                         \
        if (nv > 1) _mm512_storeu_si512((void *)&out[m][16], c##m##1);                                            \
        if (nv > 2) _mm512_storeu_si512((void *)&out[m][32], c##m##2);                                            \
    } while (0)
PD_TARGET_VNNI static inline __attribute__((always_inline)) void q_tile_vnni_nv(const int nv, const q_args *a,
                                                                                 isz tile, isz mb) {
    const isz nrt = 48, q0 = tile * nrt, nt = a->L - q0 < nrt ? a->L - q0 : nrt;
    const uint8_t *xp = (const uint8_t *)a->xp + tile * a->kgroups * nrt * 4;
    const int32_t *wb = (const int32_t *)a->wp + mb * a->kgroups * 8;
    Q_ACC_DECL(0); Q_ACC_DECL(1); Q_ACC_DECL(2); Q_ACC_DECL(3);
    Q_ACC_DECL(4); Q_ACC_DECL(5); Q_ACC_DECL(6); Q_ACC_DECL(7);
    const isz ng = a->kgroups;
    for (isz g = 0; g < ng; g++) {
        const uint8_t *xg = xp + g * nrt * 4;
        const __m512i x0 = _mm512_load_si512((const void *)xg);
        const __m512i x1 = nv > 1 ? _mm512_load_si512((const void *)(xg + 64)) : x0;
        const __m512i x2 = nv > 2 ? _mm512_load_si512((const void *)(xg + 128)) : x0;
        const int32_t *wg = wb + g * 8;
        Q_ACC_STEP(0); Q_ACC_STEP(1); Q_ACC_STEP(2); Q_ACC_STEP(3);
        Q_ACC_STEP(4); Q_ACC_STEP(5); Q_ACC_STEP(6); Q_ACC_STEP(7);
    }
    int32_t out[8][48];
    Q_ACC_OUT(0); Q_ACC_OUT(1); Q_ACC_OUT(2); Q_ACC_OUT(3);
    Q_ACC_OUT(4); Q_ACC_OUT(5); Q_ACC_OUT(6); Q_ACC_OUT(7);
    const isz m0 = mb * 8, mrows = a->M - m0 < 8 ? a->M - m0 : 8;
    q_epilogue(a, &out[0][0], 48, mrows, m0, q0, nt);
}

PD_TARGET_VNNI static void q_tile_vnni(const q_args *a, isz tile, isz mb) {
    const isz left = a->L - tile * 48;
    if (left > 32)
        q_tile_vnni_nv(3, a, tile, mb);
    else if (left > 16)
        q_tile_vnni_nv(2, a, tile, mb);
    else
        q_tile_vnni_nv(1, a, tile, mb);
}
#endif

/* --------------------------------------------------------------------------------------------------------------- */
/* direct form (every conv but 1x1 stride 1): no columns matrix                                                   */
/* --------------------------------------------------------------------------------------------------------------- */

/* The image is quantized once into a padded copy of 4-byte words (a word holds kg channels in the columns' format:
 * 4 x (q + 128) as uint8, or 2 x int16), split by stride phase: padded pixel (py, px) goes to phase plane
 * (py % SH, px % SW) at (py / SH, px / SW); planes of Hq x Wq words (Hq = OH + (KH-1) DH / SH, Wq = OW + (KW-1) DW /
 * SW), [channel group][phase][Hq][Wq]. The outputs are computed on the Wq-wide grid l = oh * Wq + ow: the column of
 * output l for the tap (i, j) and channel group cg is the word at cg * P + q_tap_off(i, j) + l (the tap's phase plane,
 * shifted by (i DH / SH) Wq + j DW / SW), so a tile of consecutive l reads consecutive words. The grid's columns
 * ow >= OW are computed and never stored. Weights: K ordered (i, j, channel) with the channels padded to a multiple
 * of kg (quant_native.pack_weights(conv=...)). Sums are the same integers as the columns form. */
#ifdef PD_X86_DISPATCH
/* one image row of the s16x2 format's words, round_type 0, with 8-lane intrinsics (q_avx2_q8) */
PD_TARGET_AVX2 static void q_direct_row_avx2(const q_args *a, const float *r0, const float *r1, isz x0, isz x1,
                                             uint32_t *dst) {
    const __m256 k = _mm256_set1_ps(a->qp.k);
    for (isz q0 = x0; q0 < x1; q0 += 8) {
        const isz cnt = x1 - q0 < 8 ? x1 - q0 : 8;
        const __m256i lo = q_avx2_q8(r0, q0, cnt, k), hi = q_avx2_q8(r1, q0, cnt, k);
        const __m256i word = _mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA);
        if (cnt == 8) {
            _mm256_storeu_si256((__m256i *)(dst + q0), word);
        } else {
            uint32_t t[8];
            _mm256_storeu_si256((__m256i *)t, word);
            for (isz i = 0; i < cnt; i++) dst[q0 + i] = t[i];
        }
    }
}
#endif

PD_INLINE void q_direct_pack_rt(void *ctx, isz begin, isz end, const int rt) {
    const q_args *a = (const q_args *)ctx;
    const conv_geo *g = &a->geo;
    const int kg = a->f.kg;
    const uint32_t pad = a->f.u8 ? 0x80808080u : 0u;
    const float *x = a->x + a->img * g->C * g->H * g->W;
    uint32_t *rowbuf = g->SW > 1 ? (uint32_t *)pd_scratch((size_t)(g->W + 16) * 4) : NULL;
    if (g->SW > 1 && !rowbuf) return;
    for (isz cg = begin; cg < end; cg++) {
        uint32_t *plane = (uint32_t *)a->xp + cg * a->P;
        const isz last = cg == a->CG - 1 ? a->P + a->f.nrt + a->Wq + (g->KW - 1) * g->DW + 16 : a->P; /* + the tail */
        for (isz i = 0; i < last; i++) plane[i] = pad;
        for (isz y = 0; y < g->H; y++) {
            const isz py = y + g->PT;
            if (py / g->SH >= a->Hq) continue;
            const float *rows[4];
            for (int t = 0; t < kg; t++) {
                const isz c = cg * kg + t;
                rows[t] = c < g->C ? x + (c * g->H + y) * g->W : NULL;
            }
            /* the row's pixels that land in a plane: px = x + PL with px / SW < Wq */
            const isz x1 = g->W + g->PL > a->Wq * g->SW ? a->Wq * g->SW - g->PL : g->W, x0 = 0;
            uint32_t *row_plane = plane + (py % g->SH) * g->SW * a->Pq + (py / g->SH) * a->Wq;
            uint32_t *dst = g->SW > 1 ? rowbuf : row_plane + g->PL; /* dst[x] */
#ifdef PD_X86_DISPATCH
            if (kg == 2 && rt == 0 && g_qisa == Q_AVX2) {
                q_direct_row_avx2(a, rows[0], rows[1], x0, x1, dst);
                goto scatter;
            }
#endif
            for (isz q0 = x0; q0 < x1; q0 += 16) {
                const isz cnt = x1 - q0 < 16 ? x1 - q0 : 16;
                const q_v16u word = q_words(rows, q0, cnt, kg, &a->qp, rt);
                if (cnt == 16) {
                    memcpy(dst + q0, &word, sizeof word);
                } else {
                    uint32_t t[16];
                    memcpy(t, &word, sizeof t);
                    for (isz k = 0; k < cnt; k++) dst[q0 + k] = t[k];
                }
            }
#ifdef PD_X86_DISPATCH
        scatter:
#endif
            if (g->SW > 1) /* pixel xx (px = xx + PL) to phase px % SW at px / SW, one phase at a time */
                for (isz pw = 0; pw < g->SW; pw++) {
                    uint32_t *dp = row_plane + pw * a->Pq;
                    const isz xa = ((pw - g->PL) % g->SW + g->SW) % g->SW;
                    for (isz xx = xa, qx = (xa + g->PL) / g->SW; xx < x1; xx += g->SW, qx++) dp[qx] = rowbuf[xx];
                }
        }
    }
    free(rowbuf);
}

PD_INLINE void q_direct_pack_impl(void *ctx, isz begin, isz end) {
    if (((const q_args *)ctx)->qp.rt == 0)
        q_direct_pack_rt(ctx, begin, end, 0);
    else
        q_direct_pack_rt(ctx, begin, end, 1);
}
PD_VERSIONS(q_direct_pack)

/* the epilogue of grid columns [l0, l0 + n): each output row's part (ow < OW) at its output columns (v16: the
 * 16-lane q_epilogue, else q_epilogue_loops; inlined into each target's tile) */
PD_INLINE void q_direct_epilogue(const q_args *a, const int32_t *acc, isz ld, isz mrows, isz m0, isz l0, isz n,
                                 const int v16) {
    const isz Wp = a->Wq, OW = a->geo.OW;
    for (isz l = l0; l < l0 + n;) {
        const isz oh = l / Wp, ow = l - oh * Wp, row_end = (oh + 1) * Wp < l0 + n ? (oh + 1) * Wp : l0 + n;
        if (ow < OW) {
            const isz stop = oh * Wp + OW < row_end ? oh * Wp + OW : row_end;
            if (v16)
                q_epilogue(a, acc + (l - l0), ld, mrows, m0, oh * OW + ow, stop - l);
            else
                q_epilogue_loops(a, acc + (l - l0), ld, mrows, m0, oh * OW + ow, stop - l);
        }
        l = row_end;
    }
}

/* the word offset of tap t (i, j) in the padded image (a->toff holds them) */
static isz q_tap_off(const q_args *a, isz t) {
    const conv_geo *g = &a->geo;
    const isz ri = (t / g->KW) * g->DH, rj = (t % g->KW) * g->DW;
    return ((ri % g->SH) * g->SW + rj % g->SW) * a->Pq + (ri / g->SH) * a->Wq + rj / g->SW;
}

static void q_direct_base(const q_args *a, isz tile, isz mb) {
    const isz l0 = tile * 16, nt = a->Lg - l0 < 16 ? a->Lg - l0 : 16, taps = a->geo.KH * a->geo.KW;
    const int8_t *wg = (const int8_t *)a->wp + mb * a->kgroups * 8 * 4;
    int32_t acc[8][16];
    memset(acc, 0, sizeof acc);
    for (isz t = 0; t < taps; t++) {
        const uint8_t *xt = (const uint8_t *)a->xp + (l0 + a->toff[t]) * 4;
        for (isz cg = 0; cg < a->CG; cg++, wg += 32) {
            const uint8_t *xg = xt + cg * a->P * 4;
            for (int m = 0; m < 8; m++) {
                const int32_t w0 = wg[m * 4], w1 = wg[m * 4 + 1], w2 = wg[m * 4 + 2], w3 = wg[m * 4 + 3];
                for (int j = 0; j < 16; j++)
                    acc[m][j] += xg[j * 4] * w0 + xg[j * 4 + 1] * w1 + xg[j * 4 + 2] * w2 + xg[j * 4 + 3] * w3;
            }
        }
    }
    const isz m0 = mb * 8, mrows = a->M - m0 < 8 ? a->M - m0 : 8;
    q_direct_epilogue(a, &acc[0][0], 16, mrows, m0, l0, nt, 0);
}

#ifdef PD_X86_DISPATCH
PD_TARGET_AVX2 static void q_direct_avx2(const q_args *a, isz tile, isz mb) {
    const isz l0 = tile * 16, nt = a->Lg - l0 < 16 ? a->Lg - l0 : 16, taps = a->geo.KH * a->geo.KW;
    const int32_t *wg = (const int32_t *)a->wp + mb * a->kgroups * 4;
    __m256i acc[4][2];
    for (int m = 0; m < 4; m++) acc[m][0] = acc[m][1] = _mm256_setzero_si256();
    for (isz t = 0; t < taps; t++) {
        const int32_t *xt = (const int32_t *)a->xp + l0 + a->toff[t];
        for (isz cg = 0; cg < a->CG; cg++, wg += 4) {
            const int32_t *xg = xt + cg * a->P;
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)xg);
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xg + 8));
            for (int m = 0; m < 4; m++) {
                const __m256i w = _mm256_set1_epi32(wg[m]);
                acc[m][0] = _mm256_add_epi32(acc[m][0], _mm256_madd_epi16(x0, w));
                acc[m][1] = _mm256_add_epi32(acc[m][1], _mm256_madd_epi16(x1, w));
            }
        }
    }
    int32_t out[4][16];
    for (int m = 0; m < 4; m++) {
        _mm256_storeu_si256((__m256i *)&out[m][0], acc[m][0]);
        _mm256_storeu_si256((__m256i *)&out[m][8], acc[m][1]);
    }
    const isz m0 = mb * 4, mrows = a->M - m0 < 4 ? a->M - m0 : 4;
    q_direct_epilogue(a, &out[0][0], 16, mrows, m0, l0, nt, 0);
}

PD_TARGET_VNNI static inline __attribute__((always_inline)) void q_direct_vnni_nv(const int nv, const q_args *a,
                                                                                   isz tile, isz mb) {
    const isz l0 = tile * 48, nt = a->Lg - l0 < 48 ? a->Lg - l0 : 48, taps = a->geo.KH * a->geo.KW;
    const int32_t *wg = (const int32_t *)a->wp + mb * a->kgroups * 8;
    Q_ACC_DECL(0); Q_ACC_DECL(1); Q_ACC_DECL(2); Q_ACC_DECL(3);
    Q_ACC_DECL(4); Q_ACC_DECL(5); Q_ACC_DECL(6); Q_ACC_DECL(7);
    const isz P = a->P, CG = a->CG;
    for (isz t = 0; t < taps; t++) {
        const int32_t *xg = (const int32_t *)a->xp + l0 + a->toff[t];
        for (isz cg = 0; cg < CG; cg++, wg += 8, xg += P) {
            const __m512i x0 = _mm512_loadu_si512((const void *)xg);
            const __m512i x1 = nv > 1 ? _mm512_loadu_si512((const void *)(xg + 16)) : x0;
            const __m512i x2 = nv > 2 ? _mm512_loadu_si512((const void *)(xg + 32)) : x0;
            Q_ACC_STEP(0); Q_ACC_STEP(1); Q_ACC_STEP(2); Q_ACC_STEP(3);
            Q_ACC_STEP(4); Q_ACC_STEP(5); Q_ACC_STEP(6); Q_ACC_STEP(7);
        }
    }
    int32_t out[8][48];
    Q_ACC_OUT(0); Q_ACC_OUT(1); Q_ACC_OUT(2); Q_ACC_OUT(3);
    Q_ACC_OUT(4); Q_ACC_OUT(5); Q_ACC_OUT(6); Q_ACC_OUT(7);
    const isz m0 = mb * 8, mrows = a->M - m0 < 8 ? a->M - m0 : 8;
    q_direct_epilogue(a, &out[0][0], 48, mrows, m0, l0, nt, 1);
}

PD_TARGET_VNNI static void q_direct_vnni(const q_args *a, isz tile, isz mb) {
    const isz left = a->Lg - tile * 48;
    if (left > 32)
        q_direct_vnni_nv(3, a, tile, mb);
    else if (left > 16)
        q_direct_vnni_nv(2, a, tile, mb);
    else
        q_direct_vnni_nv(1, a, tile, mb);
}
#endif

static void q_gemm_task(void *ctx, isz begin, isz end) {
    const q_args *a = (const q_args *)ctx;
    for (isz it = begin; it < end; it++) {
        const isz tile = it / a->mblocks, mb = it % a->mblocks;
        if (a->direct) {
#ifdef PD_X86_DISPATCH
            if (g_qisa == Q_VNNI)
                q_direct_vnni(a, tile, mb);
            else if (g_qisa == Q_AVX2)
                q_direct_avx2(a, tile, mb);
            else
#endif
                q_direct_base(a, tile, mb);
            continue;
        }
#ifdef PD_X86_DISPATCH
        if (g_qisa == Q_VNNI) {
            q_tile_vnni(a, tile, mb);
            continue;
        }
        if (g_qisa == Q_AVX2) {
            q_tile_avx2(a, tile, mb);
            continue;
        }
#endif
        q_tile_base(a, tile, mb);
    }
}

/* --------------------------------------------------------------------------------------------------------------- */
/* weights                                                                                                        */
/* --------------------------------------------------------------------------------------------------------------- */

PD_HIDDEN isz q_packed_bytes(isz M, isz K) {
    const q_format *f = &Q_FORMATS[g_qisa];
    const isz blocks = (M + f->mr - 1) / f->mr, groups = (K + f->kg - 1) / f->kg;
    return blocks * groups * f->mr * 4; /* 4 bytes per (row, group): 4 int8 or 2 int16 */
}

/* w (M, K) int8 -> the current format: [block][group][mr][kg] (int8 for kg 4, int16 for kg 2), zeros past M, K */
static void q_pack_weights(const int8_t *w, isz M, isz K, void *out) {
    const q_format *f = &Q_FORMATS[g_qisa];
    const isz blocks = (M + f->mr - 1) / f->mr, groups = (K + f->kg - 1) / f->kg;
    for (isz b = 0; b < blocks; b++)
        for (isz g = 0; g < groups; g++)
            for (int m = 0; m < f->mr; m++)
                for (int t = 0; t < f->kg; t++) {
                    const isz row = b * f->mr + m, k = g * f->kg + t;
                    const int v = row < M && k < K ? w[row * K + k] : 0;
                    const isz at = ((b * groups + g) * f->mr + m) * f->kg + t;
                    if (f->kg == 4)
                        ((int8_t *)out)[at] = (int8_t)v;
                    else
                        ((int16_t *)out)[at] = (int16_t)v;
                }
}

/* --------------------------------------------------------------------------------------------------------------- */
/* Python entries                                                                                                 */
/* --------------------------------------------------------------------------------------------------------------- */

PD_HIDDEN PyObject *py_qgemm_info(PyObject *self, PyObject *args) {
    (void)self;
    isz M = 0, K = 0;
    if (!PyArg_ParseTuple(args, "|nn", &M, &K)) return NULL;
    const q_format *f = &Q_FORMATS[g_qisa];
    return Py_BuildValue("(siin)", f->name, f->u8, f->mr, M > 0 && K > 0 ? q_packed_bytes(M, K) : (isz)0);
}

PD_HIDDEN PyObject *py_qpack_weights(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *wo, *oo;
    isz M, K;
    if (!PyArg_ParseTuple(args, "OO(nn)", &wo, &oo, &M, &K)) return NULL;
    if (M <= 0 || K <= 0) {
        PyErr_SetString(PyExc_ValueError, "qpack_weights: bad shape");
        return NULL;
    }
    q_bufs bs = {0};
    const int8_t *w = (const int8_t *)qbufs_take(&bs, wo, 0, M * K, "qpack_weights int8 weights");
    void *out = qbufs_take(&bs, oo, 1, q_packed_bytes(M, K), "qpack_weights output");
    if (bs.failed) return NULL;
    q_pack_weights(w, M, K, out);
    qbufs_release(&bs);
    Py_RETURN_NONE;
}

/* qconv(x, wp, comp|None, mul, bias|None, out, (N,C,H,W,M,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), (k, s, rt), act,
 *       (a0,a1,a2), res|None, trans) */
PD_HIDDEN PyObject *py_qconv(PyObject *self, PyObject *args) {
    (void)self;
    const unsigned fail0 = pd_failures();
    PyObject *xo, *wo, *co, *mo, *bo, *oo, *ap, *ro = Py_None, *qo = Py_None;
    q_args a;
    memset(&a, 0, sizeof a);
    conv_geo *g = &a.geo;
    PyObject *cho = Py_None;
    int act, trans = 0, direct = 0;
    if (!PyArg_ParseTuple(args, "OOOOOO(nnnnnnnnnnnnnnn)(ffi)iO|OpOpO", &xo, &wo, &co, &mo, &bo, &oo, &a.N, &g->C, &g->H,
                          &g->W, &a.M, &g->OH, &g->OW, &g->KH, &g->KW, &g->SH, &g->SW, &g->DH, &g->DW, &g->PT, &g->PL,
                          &a.qp.k, &a.qp.s, &a.qp.rt, &act, &ap, &ro, &trans, &qo, &direct, &cho))
        return NULL;
    if (qo != Py_None) {
        if (!PyArg_ParseTuple(qo, "(ffi)f", &a.oq.qp.k, &a.oq.qp.s, &a.oq.qp.rt, &a.oq.qmax)) return NULL;
        a.oq.on = 1;
    }
    if (a.N < 0 || g->C <= 0 || g->H <= 0 || g->W <= 0 || a.M <= 0 || g->OH <= 0 || g->OW <= 0 || g->KH <= 0 ||
        g->KW <= 0 || g->SH <= 0 || g->SW <= 0 || g->DH <= 0 || g->DW <= 0 || g->PT < 0 || g->PL < 0) {
        PyErr_SetString(PyExc_ValueError, "qconv: bad geometry");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    a.f = Q_FORMATS[g_qisa];
    a.trans = trans;
    a.K = g->C * g->KH * g->KW;
    if (a.K >= (isz)1 << 17) {
        PyErr_SetString(PyExc_ValueError, "qconv: reduction too deep for int32 sums (K >= 2^17)");
        return NULL;
    }
    a.L = g->OH * g->OW;
    a.pointwise = g->KH == 1 && g->KW == 1 && g->SH == 1 && g->SW == 1 && g->PT == 0 && g->PL == 0 &&
                  g->OH == g->H && g->OW == g->W;
    if (direct) {
        if (trans) {
            PyErr_SetString(PyExc_ValueError, "qconv: the direct form is a conv's (weights packed with conv=)");
            return NULL;
        }
        a.direct = 1;
        a.CG = (g->C + a.f.kg - 1) / a.f.kg;
        a.K = g->KH * g->KW * a.CG * a.f.kg; /* (i, j, channel) with the channels padded */
        a.Hq = g->OH + (g->KH - 1) * g->DH / g->SH;
        a.Wq = g->OW + (g->KW - 1) * g->DW / g->SW;
        a.Pq = a.Hq * a.Wq;
        a.P = g->SH * g->SW * a.Pq;
        a.Lg = g->OH * a.Wq;
    }
    a.kgroups = (a.K + a.f.kg - 1) / a.f.kg;
    a.tiles = ((a.direct ? a.Lg : a.L) + a.f.nrt - 1) / a.f.nrt;
    a.mblocks = (a.M + a.f.mr - 1) / a.f.mr;
    q_bufs bs = {0};
    a.x = (const float *)qbufs_take(&bs, xo, 0, a.N * g->C * g->H * g->W * 4, "qconv input");
    a.wp = qbufs_take(&bs, wo, 0, q_packed_bytes(a.M, a.K), "qconv packed weights");
    a.comp = a.f.u8 ? (const int32_t *)qbufs_take(&bs, co, 0, a.M * 4, "qconv comp") : NULL;
    a.mul = (const float *)qbufs_take(&bs, mo, 0, a.M * 4, "qconv multipliers");
    a.bias = bo == Py_None ? NULL : (const float *)qbufs_take(&bs, bo, 0, a.M * 4, "qconv bias");
    a.out = (float *)qbufs_take(&bs, oo, 1, a.N * a.M * a.L * 4, "qconv output");
    a.res = ro == Py_None ? NULL : (const float *)qbufs_take(&bs, ro, 0, a.N * a.M * a.L * 4, "qconv residual");
    if (bs.failed) return NULL;
    q_chain chain;
    Py_buffer chv = {0};
    if (cho != Py_None) {
        int bad = trans || PyObject_GetBuffer(cho, &chv, PyBUF_SIMPLE) != 0;
        if (trans) PyErr_SetString(PyExc_ValueError, "qconv: a pointwise chain needs the conv's (M, L) output");
        if (!bad && (chv.len % 4 != 0 || q_chain_parse((const float *)chv.buf, chv.len / 4, a.M, &chain) < 0)) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "qconv: the chain must be float32");
            PyBuffer_Release(&chv);
            bad = 1;
        }
        if (bad) {
            qbufs_release(&bs);
            return NULL;
        }
        a.chain = &chain;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS;
    a.xp = pd_alloc64((size_t)(a.direct ? a.CG * a.P + a.f.nrt + a.Wq + (g->KW - 1) * g->DW + 16
                                        : a.tiles * a.kgroups * a.f.nrt) * 4);
    isz *toff = a.direct ? (isz *)malloc((size_t)(g->KH * g->KW) * sizeof(isz)) : NULL;
    if (toff) {
        for (isz t = 0; t < g->KH * g->KW; t++) toff[t] = q_tap_off(&a, t);
        a.toff = toff;
    }
    if (a.xp && (toff || !a.direct)) {
        /* (the last tile's vectors wholly past the map are not written: summed as they are, never stored) */
        for (a.img = 0; a.img < a.N; a.img++) {
            if (a.direct)
                parallel_for(q_direct_pack, &a, a.CG, grain_for(a.CG, 4));
            else
                parallel_for(q_pack, &a, a.kgroups, grain_for(a.kgroups, 4));
            const isz items = a.tiles * a.mblocks;
            parallel_for(q_gemm_task, &a, items, grain_for(items, 4));
        }
    } else {
        ok = 0;
    }
    free(a.xp);
    free(toff);
    Py_END_ALLOW_THREADS;
    qbufs_release(&bs);
    if (a.chain) PyBuffer_Release(&chv);
    if (!ok) return PyErr_NoMemory();
    return pd_done(fail0);
}

/* qdq(x, out, n, (k, s, rt), qmax): out = (q(x) * s) / qmax, Paddle's quantize_linear then dequantize_linear */
typedef struct {
    const float *x;
    float *out;
    isz n;
    q_out oq;
} qdq_args;

PD_INLINE void qdq_task_impl(void *ctx, isz begin, isz end) {
    const qdq_args *a = (const qdq_args *)ctx;
    for (isz c = begin; c < end; c++) {
        const isz i0 = c * 4096, i1 = i0 + 4096 < a->n ? i0 + 4096 : a->n;
        q_qdq_any(a->out + i0, a->x + i0, i1 - i0, &a->oq);
    }
}
PD_VERSIONS(qdq_task)

PD_HIDDEN PyObject *py_qdq(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *oo;
    qdq_args a;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "OOn(ffi)f", &xo, &oo, &a.n, &a.oq.qp.k, &a.oq.qp.s, &a.oq.qp.rt, &a.oq.qmax))
        return NULL;
    q_bufs bs = {0};
    a.x = (const float *)qbufs_take(&bs, xo, 0, a.n * 4, "qdq input");
    a.out = (float *)qbufs_take(&bs, oo, 1, a.n * 4, "qdq output");
    if (bs.failed) return NULL;
    const isz chunks = (a.n + 4095) / 4096;
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(qdq_task, &a, chunks, a.n < PD_ONE_THREAD_FLOATS ? chunks : grain_for(chunks, 4));
    Py_END_ALLOW_THREADS;
    qbufs_release(&bs);
    Py_RETURN_NONE;
}

PD_HIDDEN void q_task_pick(int isa) {
    q_pick(isa);
    q_pack_pick(isa);
    q_direct_pack_pick(isa);
    q_chain_pick(isa);
    qdq_task_pick(isa);
}

/* --------------------------------------------------------------------------------------------------------------- */
/* byte buffers                                                                                                   */
/* --------------------------------------------------------------------------------------------------------------- */

PD_HIDDEN void qbufs_release(q_bufs *s) {
    while (s->n > 0) PyBuffer_Release(&s->view[--s->n]);
}

PD_HIDDEN void *qbufs_take(q_bufs *s, PyObject *obj, int writable, isz nbytes, const char *what) {
    if (s->failed) return NULL;
    Py_buffer *view = &s->view[s->n];
    if (s->n == Q_MAX_BUFS) {
        PyErr_Format(PyExc_SystemError, "%s: more than %d buffers", what, Q_MAX_BUFS);
    } else if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) == 0) {
        if (view->len == nbytes) {
            s->n++;
            return view->buf;
        }
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got a buffer of %zd bytes", what, nbytes, view->len);
        PyBuffer_Release(view);
    }
    s->failed = 1;
    qbufs_release(s);
    return NULL;
}
