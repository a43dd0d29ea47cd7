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
 *   avxvnni  AVX-VNNI (VEX vpdpbusd, 256 bits; CPUs with it and no AVX-512): the vnni format with blocks of 6 rows
 *            and tiles of 16 columns, register tile 6 x 16 (12 ymm accumulators).
 *   baseline the vnni format with tiles of 16 columns, plain C.
 * Per image: the columns are quantized and packed tile by tile (parallel over tiles), then every (tile, block of
 * rows) item runs one register tile over the whole reduction and writes its outputs (parallel over items; which
 * thread runs an item never changes its result). Convs with a window larger than 1x1 run in the direct form instead
 * (qdirect.c: the image quantized once, the columns read in place; the same sums). After the epilogue, the optional
 * output QDQ and pointwise chain (qchain.c) run on each row while it is in cache.
 */
#include "qgemm.h"

PD_HIDDEN int g_qisa = Q_BASE;
PD_HIDDEN int g_qvbmi = 0;

static const q_format Q_FORMATS[4] = {
    {8, 16, 4, 1, "baseline"},
    {4, 16, 2, 0, "avx2"},
    {8, 48, 4, 1, "vnni"},
    {6, 16, 4, 1, "avxvnni"},
};

/* avxvnni: whether AVX-VNNI may run where the CPU has it and the fp32 ISA is AVX2 (not when AVX2 is forced) */
PD_HIDDEN void q_pick(int isa, int avxvnni) {
    g_qisa = Q_BASE;
#ifdef PD_X86_DISPATCH
    if (isa == PD_ISA_AVX512 && __builtin_cpu_supports("avx512vnni")) g_qisa = Q_VNNI;
    else if (isa >= PD_ISA_AVX2 && avxvnni && __builtin_cpu_supports("avxvnni")) g_qisa = Q_AVXVNNI;
    else if (isa >= PD_ISA_AVX2) g_qisa = Q_AVX2;
    g_qvbmi = g_qisa == Q_VNNI && __builtin_cpu_supports("avx512vbmi");
#else
    (void)isa, (void)avxvnni;
#endif
}

PD_HIDDEN const char *q_isa_name(void) { return Q_FORMATS[g_qisa].name; }

/* --------------------------------------------------------------------------------------------------------------- */
/* packing the quantized columns of one tile                                                                      */
/* --------------------------------------------------------------------------------------------------------------- */

#ifdef PD_X86_DISPATCH
/* the avx2 / avxvnni formats' group `grp` from its kg rows (NULL: zeros) with 8-lane intrinsics, round_type 0 (the
 * 16-lane vector extensions compile to spills with AVX2): cvtps2dq rounds half to even after the clamp, as q_v16 */
PD_TARGET_AVX2 static void q_pack_avx2_rows(const void *args, const void *const rows[4], isz grp);
#endif

/* one reduction group (item) of the current image into a->xp, every tile: its kg rows of columns gathered over the
 * whole map at once (the image's own rows for a 1x1 stride-1 conv), then quantized 16 columns at a time and stored
 * interleaved ([tile][group][nrt][kg]) */
PD_INLINE void q_pack_rt(void *ctx, isz begin, isz end, const int rt) {
    const q_args *a = (const q_args *)ctx;
    const int kg = a->f.kg, nrt = a->f.nrt;
    const isz L = a->L;
    const isz img = a->img * a->geo.C * a->geo.H * a->geo.W;
    float *buf = a->pointwise ? NULL : (float *)pd_scratch((size_t)(kg * L) * sizeof(float));
    if (!a->pointwise && !buf) return;
    for (isz grp = begin; grp < end; grp++) {
        const void *rows[4];
        for (int t = 0; t < kg; t++) {
            const isz r = grp * kg + t;
            if (r >= a->K) {
                rows[t] = NULL;
            } else if (rt == Q_RT_CODES) { /* (codes: pointwise only, py_qconv checks) */
                rows[t] = a->xc + img + r * L;
            } else if (a->pointwise) {
                rows[t] = a->x + img + r * L;
            } else {
                im2col_block(&a->geo, a->x + img, r, r + 1, 0, L, buf + t * L, L);
                rows[t] = buf + t * L;
            }
        }
#ifdef PD_X86_DISPATCH
        if (rt == 0 && Q_AVX2_CLASS) {
            q_pack_avx2_rows(a, rows, grp);
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
    if (((const q_args *)ctx)->xc)
        q_pack_rt(ctx, begin, end, Q_RT_CODES);
    else if (((const q_args *)ctx)->qp.rt == 0)
        q_pack_rt(ctx, begin, end, 0);
    else
        q_pack_rt(ctx, begin, end, 1);
}
PD_VERSIONS(q_pack)

#ifdef PD_X86_DISPATCH
PD_TARGET_AVX2 static void q_pack_avx2_rows(const void *args, const void *const rows[4], isz grp) {
    const q_args *a = (const q_args *)args;
    const __m256 k = _mm256_set1_ps(a->qp.k);
    for (isz q0 = 0; q0 < a->L; q0 += 8) {
        const isz cnt = a->L - q0 < 8 ? a->L - q0 : 8;
        const __m256i word = q_avx2_words8(rows, a->f.kg, q0, cnt, k);
        char *dst = (char *)a->xp + (((q0 / 16) * a->kgroups + grp) * 16 + (q0 % 16)) * 4;
        _mm256_store_si256((__m256i *)dst, word);
    }
}
#endif

/* --------------------------------------------------------------------------------------------------------------- */
/* register tiles                                                                                                 */
/* --------------------------------------------------------------------------------------------------------------- */

/* Each item is a span of a->span tiles (Q_SPAN_COLS columns at most) x one block of rows: every tile's register tile
 * writes its int32 sums into the span's buffer, then one epilogue runs over the span's columns (per row: the epilogue
 * steps, QDQ and chain once per 256 columns instead of once per register tile's 16 or 48; the same operations on each
 * value, so the same bits). Each target's span function inlines its tiles and the epilogue at that target. */
#define Q_SPAN_COLS 256

/* the sums of one tile x rows [8 mb, +8) into sums (row stride ld), u8x4 format, plain C */
PD_INLINE void q_sums_base(const q_args *a, isz tile, isz mb, int32_t *sums, isz ld) {
    const isz nrt = 16;
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
    for (int m = 0; m < 8; m++) memcpy(sums + m * ld, acc[m], sizeof acc[m]);
}

#ifdef PD_X86_DISPATCH
/* the same tile with AVX2's vpmaddwd (s16x2 format): 4 rows x 16 columns, 8 ymm accumulators */
PD_TARGET_AVX2 static inline __attribute__((always_inline)) void q_sums_avx2(const q_args *a, isz tile, isz mb,
                                                                            int32_t *sums, isz ld) {
    const isz nrt = 16;
    const int16_t *xp = (const int16_t *)a->xp + tile * a->kgroups * nrt * 2;
    const int32_t *wb = (const int32_t *)a->wp + mb * a->kgroups * 4;
    __m256i acc[4][2];
    for (int m = 0; m < 4; m++) acc[m][0] = acc[m][1] = _mm256_setzero_si256();
    for (isz g = 0; g < a->kgroups; g++) {
        const __m256i x0 = _mm256_load_si256((const __m256i *)(xp + g * 32));
        const __m256i x1 = _mm256_load_si256((const __m256i *)(xp + g * 32 + 16));
        q_avx2_madd4(acc, x0, x1, wb + g * 4);
    }
    q_avx2_store4(sums, ld, acc);
}

/* VNNI: 8 rows x (16 nv) columns, nv <= 3 vectors, 8 nv zmm accumulators (named variables: GCC kept an array of
 * them in memory) */
PD_TARGET_VNNI static inline __attribute__((always_inline)) void q_sums_vnni_nv(const int nv, const q_args *a,
                                                                                 isz tile, isz mb, int32_t *sums,
                                                                                 isz ld) {
    const isz nrt = 48;
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
    Q_ACC_OUT(0); Q_ACC_OUT(1); Q_ACC_OUT(2); Q_ACC_OUT(3);
    Q_ACC_OUT(4); Q_ACC_OUT(5); Q_ACC_OUT(6); Q_ACC_OUT(7);
}

/* AVX-VNNI: 6 rows x 16 columns (avxvnni format) */
PD_TARGET_AVXVNNI static inline __attribute__((always_inline)) void q_sums_avxvnni(const q_args *a, isz tile, isz mb,
                                                                                  int32_t *sums, isz ld) {
    const isz nrt = 16;
    const uint8_t *xp = (const uint8_t *)a->xp + tile * a->kgroups * nrt * 4;
    const int32_t *wb = (const int32_t *)a->wp + mb * a->kgroups * 6;
    Q_AVXVNNI_ALL(Q_AVXVNNI_DECL);
    for (isz g = 0; g < a->kgroups; g++) {
        const __m256i x0 = _mm256_load_si256((const __m256i *)(xp + g * 64));
        const __m256i x1 = _mm256_load_si256((const __m256i *)(xp + g * 64 + 32));
        const int32_t *wg = wb + g * 6;
        Q_AVXVNNI_ALL(Q_AVXVNNI_STEP);
    }
    Q_AVXVNNI_ALL(Q_AVXVNNI_OUT);
}
#endif

/* one item's span: tiles [t0, t1) x rows [mr mb, + mr) summed into sums (row stride ld), then the epilogue (v16: the
 * 16-lane q_epilogue, else q_epilogue_loops); `tile_sums` the target's register tile, inlined */
#define Q_SPAN_RUN(tile_sums, v16)                                                                                \
    do {                                                                                                           \
        const isz nrt = a->f.nrt, mr = a->f.mr, ld = (t1 - t0) * nrt;                                             \
        for (isz t = t0; t < t1; t++) tile_sums;                                                                   \
        const isz q0 = t0 * nrt, ncols = (a->L < t1 * nrt ? a->L : t1 * nrt) - q0;                               \
        const isz m0 = mb * mr, mrows = a->M - m0 < mr ? a->M - m0 : mr;                                          \
        if (v16)                                                                                                   \
            q_epilogue(a, sums, ld, mrows, m0, q0, ncols);                                                        \
        else                                                                                                       \
            q_epilogue_loops(a, sums, ld, mrows, m0, q0, ncols);                                                  \
    } while (0)

static void q_span_base(const q_args *a, isz t0, isz t1, isz mb, int32_t *sums) {
    Q_SPAN_RUN(q_sums_base(a, t, mb, sums + (t - t0) * nrt, ld), 0);
}

#ifdef PD_X86_DISPATCH
PD_TARGET_AVX2 static void q_span_avx2(const q_args *a, isz t0, isz t1, isz mb, int32_t *sums) {
    Q_SPAN_RUN(q_sums_avx2(a, t, mb, sums + (t - t0) * nrt, ld), 0);
}

PD_TARGET_AVXVNNI static void q_span_avxvnni(const q_args *a, isz t0, isz t1, isz mb, int32_t *sums) {
    Q_SPAN_RUN(q_sums_avxvnni(a, t, mb, sums + (t - t0) * nrt, ld), 0);
}

PD_TARGET_VNNI static inline __attribute__((always_inline)) void q_sums_vnni(const q_args *a, isz tile, isz mb,
                                                                            int32_t *sums, isz ld) {
    const isz left = a->L - tile * 48;
    if (left > 32)
        q_sums_vnni_nv(3, a, tile, mb, sums, ld);
    else if (left > 16)
        q_sums_vnni_nv(2, a, tile, mb, sums, ld);
    else
        q_sums_vnni_nv(1, a, tile, mb, sums, ld);
}

PD_TARGET_VNNI static void q_span_vnni(const q_args *a, isz t0, isz t1, isz mb, int32_t *sums) {
    Q_SPAN_RUN(q_sums_vnni(a, t, mb, sums + (t - t0) * nrt, ld), 1);
}
#endif

static void q_gemm_task(void *ctx, isz begin, isz end) {
    const q_args *a = (const q_args *)ctx;
    int32_t sums[8 * Q_SPAN_COLS] __attribute__((aligned(64))); /* (mr <= 8 rows of a span's sums) */
    for (isz it = begin; it < end; it++) {
        const isz tile = it / a->mblocks, mb = it % a->mblocks;
        if (a->direct) {
            q_direct_tile(a, tile, mb);
            continue;
        }
        const isz t0 = tile * a->span, t1 = t0 + a->span < a->tiles ? t0 + a->span : a->tiles;
#ifdef PD_X86_DISPATCH
        if (a->gemv) {
            if (g_qisa == Q_VNNI)
                q_gemv_vnni(a, mb);
            else
                q_gemv_avx2(a, mb);
            continue;
        }
        if (g_qisa == Q_VNNI) {
            q_span_vnni(a, t0, t1, mb, sums);
            continue;
        }
        if (g_qisa == Q_AVX2) {
            q_span_avx2(a, t0, t1, mb, sums);
            continue;
        }
        if (g_qisa == Q_AVXVNNI) {
            q_span_avxvnni(a, t0, t1, mb, sums);
            continue;
        }
#endif
        q_span_base(a, t0, t1, mb, sums);
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

/* qconv(x, wp, comp|None, mul, bias|None, out|None, (N,C,H,W,M,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), (k, s, rt), act,
 *       (a0,a1,a2), res|None, trans, out_q|None, direct, chain|None, xcodes, codes_out|None, (k, s, rt)|None):
 * x float32, or codes (uint8 q + 128) with xcodes (pointwise, direct and one-column forms); the output float32 in out,
 * or codes in codes_out (uint8) quantized with the last tuple */
PD_HIDDEN PyObject *py_qconv(PyObject *self, PyObject *args) {
    (void)self;
    const unsigned fail0 = pd_failures();
    PyObject *xo, *wo, *co, *mo, *bo, *oo, *ap, *ro = Py_None, *qo = Py_None;
    q_args a;
    memset(&a, 0, sizeof a);
    conv_geo *g = &a.geo;
    PyObject *cho = Py_None, *cdo = Py_None, *cqo = Py_None;
    int act, trans = 0, direct = 0, xcodes = 0;
    if (!PyArg_ParseTuple(args, "OOOOOO(nnnnnnnnnnnnnnn)(ffi)iO|OpOpOpOO", &xo, &wo, &co, &mo, &bo, &oo, &a.N, &g->C,
                          &g->H, &g->W, &a.M, &g->OH, &g->OW, &g->KH, &g->KW, &g->SH, &g->SW, &g->DH, &g->DW, &g->PT,
                          &g->PL, &a.qp.k, &a.qp.s, &a.qp.rt, &act, &ap, &ro, &trans, &qo, &direct, &cho, &xcodes,
                          &cdo, &cqo))
        return NULL;
    if (cdo != Py_None && q_parse_codes_out(cqo, &a.cq) < 0) return NULL;
    if (qo != Py_None) {
        if (!PyArg_ParseTuple(qo, "(ffi)f", &a.oq.qp.k, &a.oq.qp.s, &a.oq.qp.rt, &a.oq.qmax)) return NULL;
        q_out_init(&a.oq);
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
    if ((xcodes && !a.pointwise && !a.direct) || ((xcodes || cdo != Py_None) && trans)) {
        PyErr_SetString(PyExc_ValueError, "qconv: codes in or out need a pointwise or direct-form conv");
        return NULL;
    }
    if (cdo == Py_None && oo == Py_None) {
        PyErr_SetString(PyExc_ValueError, "qconv: no output (out or codes_out)");
        return NULL;
    }
    a.kgroups = (a.K + a.f.kg - 1) / a.f.kg;
    a.tiles = ((a.direct ? a.Lg : a.L) + a.f.nrt - 1) / a.f.nrt;
    a.mblocks = (a.M + a.f.mr - 1) / a.f.mr;
    /* tiles per item (q_gemm_task): up to Q_SPAN_COLS columns, fewer where the items would be too few to share */
    a.span = a.direct ? 1 : Q_SPAN_COLS / a.f.nrt;
    while (a.span > 1 && (a.tiles + a.span - 1) / a.span * a.mblocks < 32) a.span = (a.span + 1) / 2;
    q_bufs bs = {0};
    const isz xn = a.N * g->C * g->H * g->W;
    if (xcodes)
        a.xc = (const uint8_t *)qbufs_take(&bs, xo, 0, xn, "qconv input codes");
    else
        a.x = (const float *)qbufs_take(&bs, xo, 0, xn * 4, "qconv input");
    a.wp = qbufs_take(&bs, wo, 0, q_packed_bytes(a.M, a.K), "qconv packed weights");
    a.comp = a.f.u8 ? (const int32_t *)qbufs_take(&bs, co, 0, a.M * 4, "qconv comp") : NULL;
    a.mul = (const float *)qbufs_take(&bs, mo, 0, a.M * 4, "qconv multipliers");
    a.bias = bo == Py_None ? NULL : (const float *)qbufs_take(&bs, bo, 0, a.M * 4, "qconv bias");
    if (cdo != Py_None)
        a.codes = (uint8_t *)qbufs_take(&bs, cdo, 1, a.N * a.M * a.L, "qconv output codes");
    else
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
        if (a.codes) q_chain_lut(&chain, &a.cq);
    }
    int ok = 1;
    /* one column in place (a 1x1 conv of a 1x1 map, an fc of one row): the GEMV forms (q_gemv_vnni, q_gemv_avx2) */
    const int gemv = a.gemv = (g_qisa == Q_VNNI || g_qisa == Q_AVX2) && a.L == 1 && a.pointwise && !a.direct;
    (void)gemv;
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
#ifdef PD_X86_DISPATCH
            if (gemv) {
                if (g_qisa == Q_VNNI)
                    q_gemv_pack(&a);
                else
                    q_gemv_pack_s16(&a);
                parallel_for(q_gemm_task, &a, a.mblocks, grain_for(a.mblocks, 4));
                continue;
            }
#endif
            if (a.direct)
                q_direct_pack_image(&a);
            else
                parallel_for(q_pack, &a, a.kgroups, grain_for(a.kgroups, 4));
            const isz items = (a.tiles + a.span - 1) / a.span * a.mblocks;
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
    q_out_init(&a.oq);
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

PD_HIDDEN void q_task_pick(int isa, int avxvnni) {
    q_pick(isa, avxvnni);
    q_pack_pick(isa);
    q_direct_pick(isa);
    q_dw_pick(isa);
    q_chain_pick(isa);
    qdq_task_pick(isa);
}

/* --------------------------------------------------------------------------------------------------------------- */
/* byte buffers                                                                                                   */
/* --------------------------------------------------------------------------------------------------------------- */

PD_HIDDEN void q_out_init(q_out *oq) {
    oq->on = 1;
    oq->r = 1.0f / oq->qmax;
    oq->recip = oq->qmax > 0.0f;
    for (int q = -128; q < 128 && oq->recip; q++) {
        const float p = (float)q * oq->qp.s, want = p / oq->qmax, y1 = p * oq->r;
        const float got = fmaf(fmaf(-y1, oq->qmax, p), oq->r, y1);
        oq->recip = got == want && (got != 0.0f || signbit(got) == signbit(want));
    }
}

PD_HIDDEN int q_parse_codes_out(PyObject *cqo, q_param *cq) {
    if (!PyArg_ParseTuple(cqo, "ffi", &cq->k, &cq->s, &cq->rt)) return -1;
    if (cq->rt != 0 && cq->rt != 1) {
        PyErr_SetString(PyExc_ValueError, "codes: round_type must be 0 or 1");
        return -1;
    }
    return 0;
}

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
