/* pdlite native host kernels: squeeze_excitation (see common.h) */
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* squeeze-and-excitation in one call (pdlite/operators/squeeze_excitation.py):                    */
/*   p[n, c] = mean(x[n, c, :]); h = act1(W1 @ p[n] + b1); s = act2(W2 @ h + b2);                  */
/*   out[n, c, :] = x[n, c, :] * s[c]                                                              */
/* The six ops it replaces (global average pool, two 1x1 convs with their activations, the         */
/* broadcasting multiply) cost 1-3 us of kernel work each and about as much again in dispatch; here */
/* the pool and the two small products run on the calling thread, one after another per image,     */
/* and the scaling pass (the only one over the whole map) on the pool (activation.c's mul_rows).    */
/* The pool is pool.c's (the same lane partials, the same bits as the pool2d op). The products run  */
/* with the weights transposed (W1t: (C, C1), W2t: (C1, C)): acc[o] += W1t[c, o] * p[c] for c front */
/* to back, vectorised along o (one sum per output, in input order; FMA-contracted where the ISA    */
/* has it); then the bias, then the activation (bias_act_copy, as the conv kernels apply it).       */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    const float *x, *w1t, *b1, *w2t, *b2;
    float *pooled, *hidden, *gates;
    isz C, C1, HW;
    act_t act1, act2;
} se_args;

/* out[o] = act(sum_i wt[i, o] * v[i] + b[o]) for o < n, i < k (wt: (k, n)): outputs 64 at a time (8 vectors of 8,
 * held in registers over the whole of i), then 8 at a time, then one by one; every output's sum in the same order */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi" /* (se_v8 values never cross a call: se_product is inlined) */
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi" /* (as above) */
#endif
typedef float se_v8 __attribute__((vector_size(32)));
#define SE_BLOCK 8 /* vectors per block of outputs */

PD_INLINE void se_product(const float *restrict wt, const float *restrict v, const float *restrict b,
                          float *restrict out, isz k, isz n, const act_t *act) {
    isz o = 0;
    for (; o + 8 * SE_BLOCK <= n; o += 8 * SE_BLOCK) {
        se_v8 acc[SE_BLOCK];
        for (int j = 0; j < SE_BLOCK; j++) acc[j] = (se_v8){0};
        for (isz i = 0; i < k; i++) {
            const float vi = v[i];
            for (int j = 0; j < SE_BLOCK; j++) {
                se_v8 w;
                memcpy(&w, wt + i * n + o + 8 * j, sizeof w);
                acc[j] += w * vi;
            }
        }
        memcpy(out + o, acc, sizeof acc);
    }
    for (; o + 8 <= n; o += 8) {
        se_v8 acc = {0};
        for (isz i = 0; i < k; i++) {
            se_v8 w;
            memcpy(&w, wt + i * n + o, sizeof w);
            acc += w * v[i];
        }
        memcpy(out + o, &acc, sizeof acc);
    }
    for (; o < n; o++) {
        float acc = 0.0f;
        for (isz i = 0; i < k; i++) acc += wt[i * n + o] * v[i];
        out[o] = acc;
    }
    if (b) {
        PD_SIMD for (isz j = 0; j < n; j++) out[j] += b[j];
    }
    bias_act_copy(out, out, n, 0.0f, 0, act);
}

/* images [begin, end): their gates (the pooled values computed before, by pool_avg_planes) */
PD_INLINE void se_task_impl(void *vctx, isz begin, isz end) {
    const se_args *a = (const se_args *)vctx;
    for (isz n = begin; n < end; n++) {
        se_product(a->w1t, a->pooled + n * a->C, a->b1, a->hidden, a->C, a->C1, &a->act1);
        se_product(a->w2t, a->hidden, a->b2, a->gates + n * a->C, a->C1, a->C, &a->act2);
    }
}

PD_VERSIONS(se_task)

PD_HIDDEN PyObject *py_squeeze_excitation(PyObject *self, PyObject *args) {
    PyObject *xo, *w1o, *b1o, *w2o, *b2o, *oo, *p1, *p2;
    isz N, C, C1, HW;
    int k1, k2;
    se_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO(nnnn)iOiO", &xo, &w1o, &b1o, &w2o, &b2o, &oo, &N, &C, &C1, &HW, &k1, &p1,
                          &k2, &p2))
        return NULL;
    if (N < 0 || C <= 0 || C1 <= 0 || HW <= 0) {
        PyErr_SetString(PyExc_ValueError, "squeeze_excitation: bad shape");
        return NULL;
    }
    if (parse_act(k1, p1, &a.act1) < 0 || parse_act(k2, p2, &a.act2) < 0) return NULL;
    pd_bufs bs = {0};
    a.x = bufs_take(&bs, xo, 0, N * C * HW, "squeeze_excitation x");
    a.w1t = bufs_take(&bs, w1o, 0, C * C1, "squeeze_excitation w1t");
    a.b1 = b1o == Py_None ? NULL : bufs_take(&bs, b1o, 0, C1, "squeeze_excitation b1");
    a.w2t = bufs_take(&bs, w2o, 0, C1 * C, "squeeze_excitation w2t");
    a.b2 = b2o == Py_None ? NULL : bufs_take(&bs, b2o, 0, C, "squeeze_excitation b2");
    float *out = bufs_take(&bs, oo, 1, N * C * HW, "squeeze_excitation output");
    if (bs.failed) return NULL;
    a.C = C, a.C1 = C1, a.HW = HW;
    float *scratch = N > 0 ? (float *)pd_alloc64(sizeof(float) * (size_t)(2 * N * C + C1)) : NULL;
    if (N > 0 && !scratch) {
        bufs_release(&bs);
        return PyErr_NoMemory();
    }
    if (N > 0) {
        a.pooled = scratch, a.gates = scratch + N * C, a.hidden = scratch + 2 * N * C;
        Py_BEGIN_ALLOW_THREADS;
        pool_avg_planes(a.x, a.pooled, N * C, HW);
        se_task(&a, 0, N);
        mul_rows_run(a.x, a.gates, out, N * C, HW);
        Py_END_ALLOW_THREADS;
    }
    free(scratch);
    bufs_release(&bs);
    Py_RETURN_NONE;
}
