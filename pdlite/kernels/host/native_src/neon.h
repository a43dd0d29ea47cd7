/* pdlite native host kernels: NEON (aarch64 Advanced SIMD) register tiles of the packed GEMM forms (see common.h)
 *
 * The AVX-512 tiles of packed_gemm.c hold 28 (small form: 64 channels x 7 columns) or 24 (wide form and packed fc:
 * 8 rows x 48 columns) vectors of 16 floats: 112 and 96 NEON registers, of the 32 an aarch64 core has. Here each of
 * those tiles runs as sub-tiles that fit the register file, one after another over the same reduction steps:
 *   pk_tile_neon   8 channels x 7 columns: 14 accumulators; per reduction step 2 loads of weights, 2 loads of the
 *                  step's 7 columns (b[0..3] and b[3..6]: no read past the tile), 14 lane-indexed FMAs
 *   rows8_neon     8 rows x 8 columns: 16 accumulators; per step 2 loads of the row values, 2 of the columns,
 *                  16 lane-indexed FMAs
 * Each output is still one fused multiply-add per reduction step, k ascending, from the same start: the same
 * operations in the same order as the AVX-512 tiles (FMA contracted there too), so the packed forms give the same
 * bits on NEON as on AVX-512 (tests/kernels/test_host_native_isa.py compares them with the x86 results recorded by
 * .ci/arm64.sh's runs; docs/determinism.md). Compiled on aarch64 only (GCC and Clang: arm_neon.h). */
#ifndef PD_NATIVE_NEON_H
#define PD_NATIVE_NEON_H
#if defined(__aarch64__)
#include <arm_neon.h>

#define PD_FMA_LANES4(acc0, acc1, a0, a1, bv, lane)                                                                \
    do {                                                                                                           \
        acc0 = vfmaq_laneq_f32(acc0, a0, bv, lane);                                                                \
        acc1 = vfmaq_laneq_f32(acc1, a1, bv, lane);                                                                \
    } while (0)

/* packed_gemm.c's pk_tile: c[j*64 + 16v + i] (+)= sum_k a[k*16mv + 16v + i] * b[k*ldb + j] for j < 7, v < mv,
 * i < 16; `first`: c starts at 0; steps k < pfn prefetch the cache line at pf + 16k (the next block's weights). */
PD_INLINE void pk_tile_neon(const int mv, isz kc, const float *a, const float *b, const isz ldb, float *c, int first,
                            const float *pf, isz pfn) {
    const isz lda = 16 * mv;
    for (int g = 0; g < 2 * mv; g++) { /* rows 8g .. 8g + 7 of the panel */
        float32x4_t acc[7][2];
        for (int j = 0; j < 7; j++)
            for (int h = 0; h < 2; h++)
                acc[j][h] = first ? vdupq_n_f32(0.0f) : vld1q_f32(c + j * 64 + g * 8 + h * 4);
        const float *ag = a + g * 8;
        for (isz k = 0; k < kc; k++) {
            if (g == 0 && k < pfn) __builtin_prefetch(pf + k * 16, 0, 2);
            const float32x4_t a0 = vld1q_f32(ag + k * lda), a1 = vld1q_f32(ag + k * lda + 4);
            const float32x4_t b0 = vld1q_f32(b + k * ldb), b1 = vld1q_f32(b + k * ldb + 3); /* columns 0-3, 3-6 */
            PD_FMA_LANES4(acc[0][0], acc[0][1], a0, a1, b0, 0);
            PD_FMA_LANES4(acc[1][0], acc[1][1], a0, a1, b0, 1);
            PD_FMA_LANES4(acc[2][0], acc[2][1], a0, a1, b0, 2);
            PD_FMA_LANES4(acc[3][0], acc[3][1], a0, a1, b0, 3);
            PD_FMA_LANES4(acc[4][0], acc[4][1], a0, a1, b1, 1);
            PD_FMA_LANES4(acc[5][0], acc[5][1], a0, a1, b1, 2);
            PD_FMA_LANES4(acc[6][0], acc[6][1], a0, a1, b1, 3);
        }
        for (int j = 0; j < 7; j++)
            for (int h = 0; h < 2; h++) vst1q_f32(c + j * 64 + g * 8 + h * 4, acc[j][h]);
    }
}

/* The wide form's and packed fc's tile: t[i*48 + q] = sum_k a[k*8 + i] * b[k*ldb + q] for i < 8, q < 16nv (t's
 * other entries untouched), in 8-column sub-tiles. */
PD_INLINE void rows8_neon(const int nv, isz kd, const float *a, const float *b, const isz ldb, float *t) {
    for (int s = 0; s < 2 * nv; s++) { /* columns 8s .. 8s + 7 */
        float32x4_t acc[8][2];
        for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = vdupq_n_f32(0.0f);
        const float *bs = b + s * 8;
        for (isz k = 0; k < kd; k++) {
            const float32x4_t b0 = vld1q_f32(bs + k * ldb), b1 = vld1q_f32(bs + k * ldb + 4);
            const float32x4_t r0 = vld1q_f32(a + k * 8), r1 = vld1q_f32(a + k * 8 + 4);
            PD_FMA_LANES4(acc[0][0], acc[0][1], b0, b1, r0, 0);
            PD_FMA_LANES4(acc[1][0], acc[1][1], b0, b1, r0, 1);
            PD_FMA_LANES4(acc[2][0], acc[2][1], b0, b1, r0, 2);
            PD_FMA_LANES4(acc[3][0], acc[3][1], b0, b1, r0, 3);
            PD_FMA_LANES4(acc[4][0], acc[4][1], b0, b1, r1, 0);
            PD_FMA_LANES4(acc[5][0], acc[5][1], b0, b1, r1, 1);
            PD_FMA_LANES4(acc[6][0], acc[6][1], b0, b1, r1, 2);
            PD_FMA_LANES4(acc[7][0], acc[7][1], b0, b1, r1, 3);
        }
        for (int i = 0; i < 8; i++) {
            vst1q_f32(t + i * 48 + s * 8, acc[i][0]);
            vst1q_f32(t + i * 48 + s * 8 + 4, acc[i][1]);
        }
    }
}
#endif /* __aarch64__ */
#endif /* PD_NATIVE_NEON_H */
