/* pdlite native host kernels: pool2d (see common.h) */
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* pool2d (max / avg), Paddle's CPU windows: see pdlite/kernels/host/pool.py                       */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const float *x;
    float *out;
    isz NC, H, W, OH, OW, KH, KW, SH, SW, PT, PL;
    int is_max, exclusive;
} pool_args;


/* one output (oy, ox) the slow way: any window position (padding, clipping at the edges) */
PD_INLINE float pool_one(const pool_args *a, const float *src, isz h0, isz h1, isz hcount, isz ox) {
    isz ws = ox * a->SW - a->PL, we = ws + a->KW;
    if (we > a->W + a->PL) we = a->W + a->PL;
    const isz wcount = we - ws;
    const isz w0 = ws < 0 ? 0 : ws, w1 = we > a->W ? a->W : we;
    if (a->is_max) {
        float m = -FLT_MAX;
        for (isz y = h0; y < h1; y++)
            for (isz x = w0; x < w1; x++) m = PD_MAXNAN(m, src[y * a->W + x]);
        return m;
    }
    float s = 0.0f;
    for (isz y = h0; y < h1; y++)
        for (isz x = w0; x < w1; x++) s += src[y * a->W + x];
    const float div = a->exclusive ? (float)((h1 - h0) * (w1 - w0)) : (float)(hcount * wcount);
    return s / div;
}

/* The 3x3 stride-2 max pool's column taps, 16 outputs at a time: o[q] = max(cv[2q], cv[2q + 1], cv[2q + 2]) for
 * q < n, the even / odd columns picked by two-vector shuffles (single AVX-512 instructions). Reads cv up to index
 * 2 * (n rounded up to 16) + 1. Used where the CPU has AVX-512 (g_avx512) and g_shuffles16 is on. A function
 * of its own with the AVX-512 target: inlined into pool_task (its 256-bit preference), or as an inline helper of
 * every ISA's version, GCC turned its vector compares into scalar ones. ResNet18's max pool (64 x 112 x 112, input
 * from memory), both builds in one process: one Zen 4 core 0.84 -> 0.70 ms, batch 4 3.19 -> 2.64, two threads
 * 0.41 -> 0.33. */
#ifdef PD_X86_DISPATCH
/* m = PD_MAXNAN(m, v) lane by lane */
#define PD_MAXNAN16(m, v)                                                                                          \
    do {                                                                                                           \
        const pd_v16i take_ = ((v) > (m)) | ((v) != (v));                                                          \
        (m) = (pd_v16)(((pd_v16i)(v) & take_) | ((pd_v16i)(m) & ~take_));                                          \
    } while (0)
PD_TARGET_AVX512 __attribute__((noinline)) static void pool_3s2_row(const float *cv, float *o, isz n) {
    for (isz q = 0; q < n; q += 16) {
        pd_v16 a, b, c, e;
        memcpy(&a, cv + 2 * q, sizeof(a));
        memcpy(&b, cv + 2 * q + 16, sizeof(b));
        memcpy(&c, cv + 2 * q + 2, sizeof(c));
        memcpy(&e, cv + 2 * q + 18, sizeof(e));
        pd_v16 m = PD_SHUFFLE16(a, b, PD_EVEN16);
        const pd_v16 odd = PD_SHUFFLE16(a, b, PD_ODD16), next = PD_SHUFFLE16(c, e, PD_EVEN16);
        PD_MAXNAN16(m, odd);
        PD_MAXNAN16(m, next);
        if (n - q >= 16) {
            memcpy(o + q, &m, sizeof(m));
        } else {
            float t[16];
            memcpy(t, &m, sizeof(t));
            memcpy(o + q, t, (size_t)(n - q) * sizeof(float));
        }
    }
}
#else
static void pool_3s2_row(const float *cv, float *o, isz n) { (void)cv, (void)o, (void)n; } /* never called */
#endif

/* Global pooling (pool_global: one window over each whole, unpadded plane): planes [begin, end), 4 at a time. Each
 * plane's floats go into 8 lane partials (float e into lane e % 8: the whole groups of 8 front to back, then the
 * last hw % 8 floats into lanes 0 ..), the lanes then combined as ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7));
 * avg divides that sum by hw. Vectors of 8 floats (one AVX2 register, two SSE / NEON ones): the same operations in
 * the same order on every ISA, so the same bits everywhere (a max is exact in any order). The 4 planes' chains run
 * side by side (one alone waits on its adds). Before (8 planes, each summed front to back in scalar chains), one
 * Zen 5 core: MobileNetV3-small's 240 x 14 x 14 6.7 us at AVX-512, 15.4 at AVX2. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi" /* (pool_v8 values never cross a call: the helpers below are inlined) */
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* (as above) */
#endif
typedef float pool_v8 __attribute__((vector_size(32)));
/* below this many input floats a global pool runs on the calling thread (MobileNetV3-small's largest, 16 x 56 x 56 and
 * 240 x 14 x 14, take 1-2 us: less than a hand-off to the pool) */
#define POOL_GLOBAL_ONE_THREAD 262144
PD_INLINE int pool_global(const pool_args *a) {
    return a->OH == 1 && a->OW == 1 && a->KH == a->H && a->KW == a->W && a->PT == 0 && a->PL == 0;
}
typedef int32_t pool_v8i __attribute__((vector_size(32)));
#define POOL_LANES 8
#define POOL_PLANES 4

/* acc op= v lane by lane: + (avg) or PD_MAXNAN (max) */
PD_INLINE void pool_step8(pool_v8 *acc, const pool_v8 *v, int is_max) {
    if (!is_max) {
        *acc += *v;
        return;
    }
    const pool_v8i take = (*v > *acc) | (*v != *v);
    *acc = (pool_v8)(((pool_v8i)*v & take) | ((pool_v8i)*acc & ~take));
}

PD_INLINE float pool_lanes8(const pool_v8 *pv, int is_max) {
    const pool_v8 v = *pv;
    if (!is_max) return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
    float m = v[0];
    for (int l = 1; l < POOL_LANES; l++) m = PD_MAXNAN(m, v[l]);
    return m;
}

PD_INLINE void pool_planes(const pool_args *a, isz begin, isz end) {
    const isz hw = a->H * a->W, whole = hw / POOL_LANES * POOL_LANES, rest = hw - whole;
    const int is_max = a->is_max;
    /* lanes past a plane's end: the identity of the step (-0.0f: x + -0.0f == x for every x, -0.0f included) */
    const float init = is_max ? -FLT_MAX : 0.0f, pad = is_max ? -FLT_MAX : -0.0f, div = (float)hw;
    for (isz p = begin; p < end; p += POOL_PLANES) {
        const isz m = end - p < POOL_PLANES ? end - p : POOL_PLANES;
        const float *src = a->x + p * hw;
        pool_v8 acc[POOL_PLANES];
        for (int j = 0; j < POOL_PLANES; j++)
            for (int l = 0; l < POOL_LANES; l++) acc[j][l] = init;
        if (m == POOL_PLANES) {
            for (isz e = 0; e < whole; e += POOL_LANES)
                for (int j = 0; j < POOL_PLANES; j++) {
                    pool_v8 v;
                    memcpy(&v, src + j * hw + e, sizeof v);
                    pool_step8(&acc[j], &v, is_max);
                }
        } else {
            for (isz j = 0; j < m; j++)
                for (isz e = 0; e < whole; e += POOL_LANES) {
                    pool_v8 v;
                    memcpy(&v, src + j * hw + e, sizeof v);
                    pool_step8(&acc[j], &v, is_max);
                }
        }
        for (isz j = 0; j < m; j++) {
            if (rest) {
                pool_v8 v;
                for (int l = 0; l < POOL_LANES; l++) v[l] = l < rest ? src[j * hw + whole + l] : pad;
                pool_step8(&acc[j], &v, is_max);
            }
            const float r = pool_lanes8(&acc[j], is_max);
            a->out[p + j] = is_max ? r : r / div;
        }
    }
}

PD_INLINE void pool_task_impl(void *vctx, isz begin, isz end) {
    const pool_args *a = (const pool_args *)vctx;
    if (pool_global(a)) {
        pool_planes(a, begin, end);
        return;
    }
    const isz OW = a->OW, SW = a->SW, KW = a->KW;
    /* output columns whose window lies inside the image horizontally: [ilo, ihi) */
    isz ilo = (a->PL + SW - 1) / SW, ihi = a->W - KW + a->PL >= 0 ? (a->W - KW + a->PL) / SW + 1 : 0;
    if (ihi > OW) ihi = OW;
    if (ilo > ihi) ilo = ihi;
    /* acc: one output row; then the row-reduced input columns (at most W + KW) and their two phases, or whole_3s2's
     * 2*OW + 1 columns; 48 and 64 more (zeros) that pool_3s2_row's last vectors may read past them */
    const size_t nacc = (size_t)(OW + 2 * (a->W + KW) + 2 + 48 + 2 * OW + 64);
    float *acc = (float *)pd_scratch(nacc * sizeof(float));
    if (!acc) return;
    memset(acc, 0, nacc * sizeof(float));
    const int whole_3s2 = a->is_max && SW == 2 && KW == 3 && g_shuffles16 && g_avx512;
    for (isz p = begin; p < end; p++) {
        const float *src = a->x + p * a->H * a->W;
        float *dst = a->out + p * a->OH * OW;
        for (isz oy = 0; oy < a->OH; oy++) {
            isz hs = oy * a->SH - a->PT, he = hs + a->KH;
            if (he > a->H + a->PT) he = a->H + a->PT;
            const isz hcount = he - hs;
            const isz h0 = hs < 0 ? 0 : hs, h1 = he > a->H ? a->H : he;
            float *d = dst + oy * OW;
            if (whole_3s2 && h1 > h0) {
                /* the 3x3 stride-2 max pool's whole row, edge windows included: cv[i] = the window rows' max of
                 * column i - PL for i in [0, 2*OW + 1), -FLT_MAX outside the image (pool_one's start value: the
                 * same maxima), then pool_3s2_row over every output */
                float *cv = acc + OW;
                const isz nx = 2 * OW + 1, lo = a->PL < nx ? a->PL : nx, hi = a->PL + a->W < nx ? a->PL + a->W : nx;
                for (isz i = 0; i < lo; i++) cv[i] = -FLT_MAX;
                const float *r0 = src + h0 * a->W - a->PL; /* r0[i]: column i - PL of row h0 */
                if (h1 - h0 == 3) {
                    const float *r1 = r0 + a->W, *r2 = r1 + a->W;
                    PD_SIMD for (isz i = lo; i < hi; i++) {
                        const float m = PD_MAXNAN(r0[i], r1[i]);
                        cv[i] = PD_MAXNAN(m, r2[i]);
                    }
                } else {
                    PD_SIMD for (isz i = lo; i < hi; i++) cv[i] = r0[i];
                    for (isz y = h0 + 1; y < h1; y++) {
                        const float *r = r0 + (y - h0) * a->W;
                        PD_SIMD for (isz i = lo; i < hi; i++) cv[i] = PD_MAXNAN(cv[i], r[i]);
                    }
                }
                for (isz i = hi; i < nx; i++) cv[i] = -FLT_MAX;
                pool_3s2_row(cv, d, OW);
                continue;
            }
            for (isz ox = 0; ox < ilo; ox++) d[ox] = pool_one(a, src, h0, h1, hcount, ox);
            for (isz ox = ihi; ox < OW; ox++) d[ox] = pool_one(a, src, h0, h1, hcount, ox);
            if (ilo >= ihi) continue;
            const isz n = ihi - ilo;
            const isz x0 = ilo * SW - a->PL, x1 = (ihi - 1) * SW - a->PL + KW; /* input columns read */
            const int is_max = a->is_max;
            if (is_max && SW == 2 && KW == 3 && h1 > h0) {
                /* the common 3x3 stride-2 max pool without the shuffled form (whole_3s2 above): the window's rows
                 * reduced into cv, then its three column taps; every loop contiguous (stride-2 loads did not
                 * vectorise) */
                float *cv = acc + OW;
                const isz nx = x1 - x0;
                const float *r0 = src + h0 * a->W + x0;
                PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = r0[q];
                for (isz y = h0 + 1; y < h1; y++) {
                    const float *r = src + y * a->W + x0;
                    PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = PD_MAXNAN(cv[q], r[q]);
                }
                /* the taps at every column (contiguous, vectorised), then every other one (a plain copy) */
                float *hm = cv + nx;
                PD_SIMD for (isz q = 0; q < nx - 2; q++) {
                    const float m = PD_MAXNAN(cv[q], cv[q + 1]);
                    hm[q] = PD_MAXNAN(m, cv[q + 2]);
                }
                float *o = d + ilo;
                for (isz q = 0; q < n; q++) o[q] = hm[2 * q];
                continue;
            }
            /* separable: reduce the window's rows first (contiguous, vectorised), then its columns */
            float *cv = acc + OW; /* cv[x - x0] for x in [x0, x1) */
            const isz nx = x1 - x0;
            if (h1 <= h0) {
                for (isz q = 0; q < nx; q++) cv[q] = is_max ? -FLT_MAX : 0.0f;
            } else if (h1 - h0 == 1) {
                const float *r = src + h0 * a->W + x0;
                PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = r[q];
            } else {
                /* (no memcpy into cv: its stores would not forward to the vector loads that follow) */
                const float *r0 = src + h0 * a->W + x0, *r1 = r0 + a->W;
                if (is_max) {
                    PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = PD_MAXNAN(r0[q], r1[q]);
                } else {
                    PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = r0[q] + r1[q];
                }
                for (isz y = h0 + 2; y < h1; y++) {
                    const float *r = src + y * a->W + x0;
                    if (is_max) {
                        PD_SIMD for (isz q = 0; q < nx; q++) cv[q] = PD_MAXNAN(cv[q], r[q]);
                    } else {
                        PD_SIMD for (isz q = 0; q < nx; q++) cv[q] += r[q];
                    }
                }
            }
            if (n == 1) { /* one window per row (global pooling): reduce cv over 8 lanes, then the lanes */
                float part[8], r;
                const float init = is_max ? -FLT_MAX : 0.0f;
                for (int l = 0; l < 8; l++) part[l] = init;
                isz x = 0;
                for (; x + 8 <= KW; x += 8)
                    for (int l = 0; l < 8; l++) part[l] = is_max ? PD_MAXNAN(part[l], cv[x + l]) : part[l] + cv[x + l];
                r = part[0];
                for (int l = 1; l < 8; l++) r = is_max ? PD_MAXNAN(r, part[l]) : r + part[l];
                for (; x < KW; x++) r = is_max ? PD_MAXNAN(r, cv[x]) : r + cv[x];
                if (is_max) {
                    d[ilo] = r;
                } else {
                    const float div = a->exclusive ? (float)((h1 - h0) * KW) : (float)(hcount * KW);
                    d[ilo] = r / div;
                }
                continue;
            }
            /* column taps: tap kx of output q reads cv[q*SW + kx]; with SW == 2, from the even / odd phase */
            const float *ph[2] = {cv, cv};
            isz step = SW;
            if (SW == 2) { /* deinterleave, so that every column tap is a contiguous slice */
                float *ev = cv + nx, *od = ev + (nx + 1) / 2;
                for (isz i = 0; 2 * i < nx; i++) ev[i] = cv[2 * i];
                for (isz i = 0; 2 * i + 1 < nx; i++) od[i] = cv[2 * i + 1];
                ph[0] = ev, ph[1] = od, step = 1;
            }
            for (isz kx = 0; kx < KW; kx++) {
                const float *t = SW == 2 ? ph[kx % 2] + kx / 2 : cv + kx;
                if (kx == 0) {
                    if (step == 1) {
                        PD_SIMD for (isz q = 0; q < n; q++) acc[q] = t[q];
                    } else {
                        for (isz q = 0; q < n; q++) acc[q] = t[q * step];
                    }
                } else if (is_max) {
                    if (step == 1) {
                        PD_SIMD for (isz q = 0; q < n; q++) acc[q] = PD_MAXNAN(acc[q], t[q]);
                    } else {
                        for (isz q = 0; q < n; q++) acc[q] = PD_MAXNAN(acc[q], t[q * step]);
                    }
                } else {
                    if (step == 1) {
                        PD_SIMD for (isz q = 0; q < n; q++) acc[q] += t[q];
                    } else {
                        for (isz q = 0; q < n; q++) acc[q] += t[q * step];
                    }
                }
            }
            if (is_max) {
                memcpy(d + ilo, acc, (size_t)n * sizeof(float));
            } else {
                const float div = a->exclusive ? (float)((h1 - h0) * KW) : (float)(hcount * KW);
                for (isz q = 0; q < n; q++) d[ilo + q] = acc[q] / div;
            }
        }
    }
    free(acc);
}


#if defined(PD_X86_DISPATCH) && defined(__GNUC__) && !defined(__clang__)
/* AVX-512 with 256-bit auto-vectorised loops: pooling rows are short (55 outputs of a 112-wide map), and the
 * 512-bit form of these loops measured 2x slower than the AVX2 one (0.82 vs 0.38 ms for ResNet18's max pool) */
#undef PD_TARGET_AVX512
#define PD_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=256")))
#endif
PD_VERSIONS(pool_task)

PD_HIDDEN void pool_avg_planes(const float *x, float *out, isz planes, isz hw) {
    pool_args a = {x, out, planes, 1, hw, 1, 1, 1, hw, 1, 1, 0, 0, 0, 1};
    pool_task(&a, 0, planes); /* pool_global: pool_planes, on this thread */
}

PD_HIDDEN PyObject *py_pool2d(PyObject *self, PyObject *args) {
    const unsigned pd_fail0 = pd_failures();
    PyObject *xo, *oo;
    pool_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nnnnnnnnnnn)ii", &xo, &oo, &a.NC, &a.H, &a.W, &a.OH, &a.OW, &a.KH, &a.KW, &a.SH,
                          &a.SW, &a.PT, &a.PL, &a.is_max, &a.exclusive))
        return NULL;
    if (a.NC < 0 || a.H < 0 || a.W < 0 || a.OH < 0 || a.OW < 0 || a.KH <= 0 || a.KW <= 0 || a.SH <= 0 || a.SW <= 0) {
        PyErr_SetString(PyExc_ValueError, "pool2d: bad geometry");
        return NULL;
    }
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, a.NC * a.H * a.W, "pool2d input");
    a.out = bufs_take(&bs, oo, 1, a.NC * a.OH * a.OW, "pool2d output");
    if (bs.failed) return NULL;
    if (a.NC > 0 && a.OH > 0 && a.OW > 0) {
        const isz work = a.NC * a.OH * a.OW * a.KH * a.KW;
        isz grain = work < (pool_global(&a) ? POOL_GLOBAL_ONE_THREAD : 32768) ? a.NC : grain_for(a.NC, 4);
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(pool_task, &a, a.NC, grain);
        Py_END_ALLOW_THREADS;
    }
    bufs_release(&bs);
    return pd_done(pd_fail0);
}
