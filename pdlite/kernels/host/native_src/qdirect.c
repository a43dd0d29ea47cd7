/* pdlite native host kernels: the int8 conv's direct form (see qgemm.h, docs/quantization.md) */
#include "qgemm.h"

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
/* one image row of the avx2 / avxvnni formats' words, round_type 0, with 8-lane intrinsics (q_avx2_words8) */
PD_TARGET_AVX2 static void q_direct_row_avx2(const q_args *a, const void *const rows[4], isz x0, isz x1,
                                             uint32_t *dst) {
    const __m256 k = _mm256_set1_ps(a->qp.k);
    for (isz q0 = x0; q0 < x1; q0 += 8) {
        const isz cnt = x1 - q0 < 8 ? x1 - q0 : 8;
        const __m256i word = q_avx2_words8(rows, a->f.kg, q0, cnt, k);
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
    const isz img = a->img * g->C * g->H * g->W;
    uint32_t *rowbuf = g->SW > 1 ? (uint32_t *)pd_scratch((size_t)(g->W + 16) * 4) : NULL;
    if (g->SW > 1 && !rowbuf) return;
    for (isz cg = begin; cg < end; cg++) {
        uint32_t *plane = (uint32_t *)a->xp + cg * a->P;
        const isz last = cg == a->CG - 1 ? a->P + a->f.nrt + a->Wq + (g->KW - 1) * g->DW + 16 : a->P; /* + the tail */
        for (isz i = 0; i < last; i++) plane[i] = pad;
        for (isz y = 0; y < g->H; y++) {
            const isz py = y + g->PT;
            if (py / g->SH >= a->Hq) continue;
            const void *rows[4];
            for (int t = 0; t < kg; t++) {
                const isz c = cg * kg + t, at = img + (c * g->H + y) * g->W;
                rows[t] = c >= g->C ? NULL : rt == Q_RT_CODES ? (const void *)(a->xc + at) : (const void *)(a->x + at);
            }
            /* the row's pixels that land in a plane: px = x + PL with px / SW < Wq */
            const isz x1 = g->W + g->PL > a->Wq * g->SW ? a->Wq * g->SW - g->PL : g->W, x0 = 0;
            uint32_t *row_plane = plane + (py % g->SH) * g->SW * a->Pq + (py / g->SH) * a->Wq;
            uint32_t *dst = g->SW > 1 ? rowbuf : row_plane + g->PL; /* dst[x] */
#ifdef PD_X86_DISPATCH
            if (rt == 0 && Q_AVX2_CLASS) {
                q_direct_row_avx2(a, rows, x0, x1, dst);
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
    if (((const q_args *)ctx)->xc)
        q_direct_pack_rt(ctx, begin, end, Q_RT_CODES);
    else if (((const q_args *)ctx)->qp.rt == 0)
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
PD_HIDDEN isz q_tap_off(const q_args *a, isz t) {
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
            q_avx2_madd4(acc, x0, x1, wg);
        }
    }
    int32_t out[4][16];
    q_avx2_store4(&out[0][0], 16, acc);
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
    int32_t out[8][48], *const sums = &out[0][0];
    const isz ld = 48;
    Q_ACC_OUT(0); Q_ACC_OUT(1); Q_ACC_OUT(2); Q_ACC_OUT(3);
    Q_ACC_OUT(4); Q_ACC_OUT(5); Q_ACC_OUT(6); Q_ACC_OUT(7);
    const isz m0 = mb * 8, mrows = a->M - m0 < 8 ? a->M - m0 : 8;
    q_direct_epilogue(a, &out[0][0], 48, mrows, m0, l0, nt, 1);
}

PD_TARGET_AVXVNNI static void q_direct_avxvnni(const q_args *a, isz tile, isz mb) {
    const isz l0 = tile * 16, nt = a->Lg - l0 < 16 ? a->Lg - l0 : 16, taps = a->geo.KH * a->geo.KW;
    const int32_t *wg = (const int32_t *)a->wp + mb * a->kgroups * 6;
    Q_AVXVNNI_ALL(Q_AVXVNNI_DECL);
    const isz P = a->P, CG = a->CG;
    for (isz t = 0; t < taps; t++) {
        const int32_t *xg = (const int32_t *)a->xp + l0 + a->toff[t];
        for (isz cg = 0; cg < CG; cg++, wg += 6, xg += P) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)xg);
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(xg + 8));
            Q_AVXVNNI_ALL(Q_AVXVNNI_STEP);
        }
    }
    int32_t out[6][16], *const sums = &out[0][0];
    const isz ld = 16;
    Q_AVXVNNI_ALL(Q_AVXVNNI_OUT);
    const isz m0 = mb * 6, mrows = a->M - m0 < 6 ? a->M - m0 : 6;
    q_direct_epilogue(a, &out[0][0], 16, mrows, m0, l0, nt, 0);
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

PD_HIDDEN void q_direct_pack_image(q_args *a) { parallel_for(q_direct_pack, a, a->CG, grain_for(a->CG, 4)); }

PD_HIDDEN void q_direct_tile(const q_args *a, isz tile, isz mb) {
#ifdef PD_X86_DISPATCH
    if (g_qisa == Q_VNNI)
        q_direct_vnni(a, tile, mb);
    else if (g_qisa == Q_AVX2)
        q_direct_avx2(a, tile, mb);
    else if (g_qisa == Q_AVXVNNI)
        q_direct_avxvnni(a, tile, mb);
    else
#endif
        q_direct_base(a, tile, mb);
}

PD_HIDDEN void q_direct_pick(int isa) { q_direct_pack_pick(isa); }
