/* pdlite native host kernels: pointwise chains (see qint8.h, docs/quantization.md)
 *
 * A chain is the run of per-element ops the host's int8 programs put between two convs (Paddle's QDQ pairs on the
 * inputs of adds and scales, the conv bias added after the output's QDQ, learnable scales and biases, activations):
 * one pass applies them all to each channel's row, in the program's order, each with the float32 operations of the
 * op it replaces (kept as separate roundings: no multiply-add fused across steps). The int8 conv applies its
 * output's chain in its epilogue (qgemm.c); `qchain` applies one to a tensor (N, C, S).
 *
 * Program (float32 values): steps [code, count, count values], codes
 *   1 add_c   count C: o += v[channel]                      (elementwise_add of a per-channel parameter)
 *   2 scale   3: s, b, bias_after: o * s (+ b) or (o + b) * s  (the scale op; b added only when non-zero)
 *   3 act     4: kind, a0, a1, a2 (native.py's codes)           (the activation ops)
 *   4 qdq     4: k, s, round_type, qmax                         (quantize_linear then dequantize_linear)
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif
#include "qquant.h"

PD_HIDDEN int q_chain_parse(const float *prog, isz len, isz channels, q_chain *c) {
    c->n = c->nrun = 0;
    c->lut_at = -1;
    c->regs = 1;
    for (isz i = 0; i < len;) {
        if (i + 2 > len || c->n == Q_MAX_STEPS) goto bad;
        const int code = (int)prog[i];
        const isz cnt = (isz)prog[i + 1];
        const float *p = prog + i + 2;
        if (cnt < 0 || i + 2 + cnt > len) goto bad;
        q_step *s = &c->s[c->n++];
        memset(s, 0, sizeof *s);
        s->code = code;
        switch (code) {
        case Q_STEP_ADD_C:
            if (cnt != channels) {
                PyErr_Format(PyExc_ValueError, "pointwise chain: a per-channel add of %zd values for %zd channels",
                             cnt, channels);
                return -1;
            }
            s->vec = p;
            break;
        case Q_STEP_SCALE:
            if (cnt != 3) goto bad;
            s->a = p[0], s->b = p[1], s->after = p[2] != 0.0f;
            break;
        case Q_STEP_ACT:
            if (cnt != 4 || p[0] < ACT_NONE || p[0] > ACT_GELU) goto bad;
            s->act.kind = (int)p[0], s->act.a0 = p[1], s->act.a1 = p[2], s->act.a2 = p[3];
            c->regs &= act_in_regs(&s->act);
            break;
        case Q_STEP_QDQ:
            if (cnt != 4 || (p[2] != 0.0f && p[2] != 1.0f)) goto bad;
            s->oq.qp.k = p[0], s->oq.qp.s = p[1], s->oq.qp.rt = (int)p[2], s->oq.qmax = p[3];
            q_out_init(&s->oq);
            c->regs &= s->oq.qp.rt == 0;
            break;
        default:
            goto bad;
        }
        i += 2 + cnt;
    }
    c->nrun = c->n;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "pointwise chain: malformed program (step %d; at most %d steps)", c->n,
                 Q_MAX_STEPS);
    return -1;
}

/* o[0 .. n) of channel ch through the chain, in place */
PD_INLINE void q_chain_row_impl(float *o, isz n, isz ch, const q_chain *c) {
    for (int i = 0; i < c->nrun; i++) {
        const q_step *s = &c->s[i];
        switch (s->code) {
        case Q_STEP_ADD_C: {
            const float v = s->vec[ch];
            PD_SIMD for (isz j = 0; j < n; j++) o[j] = o[j] + v;
            break;
        }
        case Q_STEP_SCALE: {
            const float a = s->a, b = s->b;
            if (s->after) {
                PD_SIMD for (isz j = 0; j < n; j++) o[j] = o[j] * a;
                if (b != 0.0f) PD_SIMD for (isz j = 0; j < n; j++) o[j] = o[j] + b;
            } else if (b != 0.0f) {
                PD_SIMD for (isz j = 0; j < n; j++) o[j] = (o[j] + b) * a;
            } else {
                PD_SIMD for (isz j = 0; j < n; j++) o[j] = o[j] * a;
            }
            break;
        }
        case Q_STEP_ACT:
            bias_act_copy(o, o, n, 0.0f, 0, &s->act);
            break;
        default: /* Q_STEP_QDQ */
            q_qdq_any(o, o, n, &s->oq);
        }
    }
}

static void q_chain_row_base(float *o, isz n, isz ch, const q_chain *c) { q_chain_row_impl(o, n, ch, c); }
#ifdef PD_X86_DISPATCH
/* The chains of c->regs with every step on one vector of the row in registers, then the next (one pass over the row
 * instead of one per step): each step's float32 operations as q_chain_row_impl's (bias_act_v16's activations, the
 * forms of q_qdq_any for this ISA: the QDQ's FMA division where q_out_init proved it exact, rounding as that form
 * does), so the same bits. Written twice (AVX-512: 16 lanes, masked tails; AVX2: 8 lanes, padded tails) with a
 * macro over the width's intrinsics. */
#define Q_CHAIN_STEPS(U, V, PS, SET1, ADD, MUL, DIV, AND, ANDN, BLEND, LT, GT, ORD, MIN, MAX, ROUND_QDQ)             \
    for (int i = 0; i < c->nrun; i++) {                                                                               \
        const q_step *s = &c->s[i];                                                                                \
        switch (s->code) {                                                                                         \
        case Q_STEP_ADD_C: {                                                                                       \
            const V a = SET1(s->vec[ch]);                                                                          \
            for (int u = 0; u < (U); u++) v[u] = ADD(v[u], a);                                               \
            break;                                                                                                 \
        }                                                                                                          \
        case Q_STEP_SCALE: {                                                                                       \
            const V a = SET1(s->a), b = SET1(s->b);                                                                \
            const int after = s->after, addb = s->b != 0.0f;                                                       \
            for (int u = 0; u < (U); u++) {                                                                  \
                if (!after && addb) v[u] = ADD(v[u], b);                                                           \
                v[u] = MUL(v[u], a);                                                                               \
                if (after && addb) v[u] = ADD(v[u], b);                                                            \
            }                                                                                                      \
            break;                                                                                                 \
        }                                                                                                          \
        case Q_STEP_ACT: {                                                                                         \
            const V zero = SET1(0.0f), a0 = SET1(s->act.a0), a1 = SET1(s->act.a1), a2 = SET1(s->act.a2);           \
            const int kind = s->act.kind;                                                                          \
            for (int u = 0; u < (U); u++) {                                                                  \
                if (kind == ACT_RELU || kind == ACT_RELU6) {                                                       \
                    v[u] = ANDN(LT(v[u], zero), v[u]);                                                             \
                    if (kind == ACT_RELU6) v[u] = BLEND(v[u], a0, GT(v[u], a0));                                   \
                } else if (kind == ACT_LEAKY) {                                                                    \
                    v[u] = BLEND(v[u], MUL(v[u], a0), LT(v[u], zero));                                             \
                } else if (kind == ACT_HSWISH) {                                                                   \
                    V t = ADD(v[u], a0);                                                                           \
                    t = ANDN(LT(t, zero), t);                                                                      \
                    t = BLEND(t, a1, GT(t, a1));                                                                   \
                    v[u] = DIV(MUL(t, v[u]), a2);                                                                  \
                }                                                                                                  \
            }                                                                                                      \
            break;                                                                                                 \
        }                                                                                                          \
        default: { /* Q_STEP_QDQ, round type 0 */                                                                  \
            const V k = SET1(s->oq.qp.k), sc = SET1(s->oq.qp.s), qm = SET1(s->oq.qmax), r = SET1(s->oq.r);         \
            const int recip = s->oq.recip;                                                                         \
            for (int u = 0; u < (U); u++) {                                                                  \
                V y = MUL(v[u], k);                                                                                \
                y = AND(y, ORD(y));                                                                                \
                y = MIN(MAX(y, SET1(-128.0f)), SET1(127.0f));                                                      \
                y = ROUND_QDQ(y, recip);                                                                           \
                const V p = MUL(y, sc);                                                                            \
                if (recip) {                                                                                       \
                    const V y1 = MUL(p, r);                                                                        \
                    v[u] = PS##_fmadd_ps(PS##_fnmadd_ps(y1, qm, p), r, y1);                                        \
                } else {                                                                                           \
                    v[u] = DIV(p, qm);                                                                             \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
        }                                                                                                          \
    }
/* vectors a step runs on before the next step (independent dependency chains): 4 of 16 lanes; 2 of 8 at AVX2, whose
 * rows are mostly 16 wide (its register tiles) */
#define Q_CHAIN_U 4
#define Q_CHAIN_U2 2

#define Q512_AND(a, m) _mm512_maskz_mov_ps((m), (a))
#define Q512_ANDN(m, a) _mm512_maskz_mov_ps((__mmask16)~(m), (a))
#define Q512_BLEND(a, b, m) _mm512_mask_blend_ps((m), (a), (b))
#define Q512_LT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ)
#define Q512_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define Q512_ORD(a) _mm512_cmp_ps_mask((a), (a), _CMP_ORD_Q)
/* as q_qdq_any rounds: roundscale (q_qdq_recip_avx512; at the int8 AVX2 formats, their vroundps), else q_qdq_loop's
 * 1.5 * 2^23 addition (the sign of a zero differs) */
#define Q512_ROUND(y, recip)                                                                                      \
    ((recip) || g_qisa != Q_VNNI                                                                                  \
         ? _mm512_roundscale_ps((y), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)                                \
         : _mm512_sub_ps(_mm512_add_ps((y), _mm512_set1_ps(12582912.0f)), _mm512_set1_ps(12582912.0f)))

PD_TARGET_AVX512 static void q_chain_row_avx512(float *o, isz n, isz ch, const q_chain *c) {
    if (!c->regs) {
        q_chain_row_impl(o, n, ch, c);
        return;
    }
    for (isz j0 = 0; j0 < n; j0 += 16 * Q_CHAIN_U) {
        __m512 v[Q_CHAIN_U];
        __mmask16 mk[Q_CHAIN_U];
        for (int u = 0; u < Q_CHAIN_U; u++) {
            const isz j = j0 + 16 * u;
            mk[u] = n - j >= 16 ? (__mmask16)0xffff : n > j ? (__mmask16)((1u << (n - j)) - 1u) : (__mmask16)0;
            v[u] = _mm512_maskz_loadu_ps(mk[u], o + (n > j ? j : 0));
        }
        Q_CHAIN_STEPS(Q_CHAIN_U, __m512, _mm512, _mm512_set1_ps, _mm512_add_ps, _mm512_mul_ps, _mm512_div_ps,
                      Q512_AND, Q512_ANDN, Q512_BLEND, Q512_LT, Q512_GT, Q512_ORD, _mm512_min_ps, _mm512_max_ps,
                      Q512_ROUND)
        for (int u = 0; u < Q_CHAIN_U; u++)
            _mm512_mask_storeu_ps(o + (n > j0 + 16 * u ? j0 + 16 * u : 0), mk[u], v[u]);
    }
}

#define Q256_ANDN(m, a) _mm256_andnot_ps((m), (a))
#define Q256_BLEND(a, b, m) _mm256_blendv_ps((a), (b), (m))
#define Q256_LT(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define Q256_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define Q256_ORD(a) _mm256_cmp_ps((a), (a), _CMP_ORD_Q)
/* q_qdq_recip_avx2's and q_qdq_avx2's vroundps */
#define Q256_ROUND(y, recip) ((void)(recip), _mm256_round_ps((y), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))

PD_TARGET_AVX2 static void q_chain_row_avx2(float *o, isz n, isz ch, const q_chain *c) {
    if (!c->regs || !Q_AVX2_CLASS) { /* (the AVX2 QDQ forms run at the int8 AVX2 formats only) */
        q_chain_row_impl(o, n, ch, c);
        return;
    }
    for (isz j0 = 0; j0 < n; j0 += 8 * Q_CHAIN_U2) {
        float t[8] = {0}; /* the one partial vector (past n: zeros, computed, not stored) */
        __m256 v[Q_CHAIN_U2];
        for (int u = 0; u < Q_CHAIN_U2; u++) {
            const isz j = j0 + 8 * u;
            if (j + 8 <= n) {
                v[u] = _mm256_loadu_ps(o + j);
            } else {
                for (isz k = 0; j + k < n && k < 8; k++) t[k] = o[j + k];
                v[u] = _mm256_loadu_ps(t);
            }
        }
        Q_CHAIN_STEPS(Q_CHAIN_U2, __m256, _mm256, _mm256_set1_ps, _mm256_add_ps, _mm256_mul_ps, _mm256_div_ps,
                      _mm256_and_ps, Q256_ANDN, Q256_BLEND, Q256_LT, Q256_GT, Q256_ORD, _mm256_min_ps, _mm256_max_ps,
                      Q256_ROUND)
        for (int u = 0; u < Q_CHAIN_U2; u++) {
            const isz j = j0 + 8 * u;
            if (j + 8 <= n) {
                _mm256_storeu_ps(o + j, v[u]);
            } else if (j < n) {
                _mm256_storeu_ps(t, v[u]);
                for (isz k = 0; j + k < n; k++) o[j + k] = t[k];
            }
        }
    }
}
#endif
PD_HIDDEN void (*q_chain_row)(float *o, isz n, isz ch, const q_chain *c) = q_chain_row_base;

PD_HIDDEN void q_chain_pick(int isa) {
    q_chain_row = q_chain_row_base;
#ifdef PD_X86_DISPATCH
    if (isa == PD_ISA_AVX512) q_chain_row = q_chain_row_avx512;
    else if (isa == PD_ISA_AVX2) q_chain_row = q_chain_row_avx2;
#else
    (void)isa;
#endif
}

typedef struct {
    const float *x, *y;
    float *out;
    isz C, S;
    const q_chain *chain, *xc, *yc; /* after the sum; on x; on y (before the sum) */
} qchain_args;

static void qchain_task(void *ctx, isz begin, isz end) {
    const qchain_args *a = (const qchain_args *)ctx;
    float *t = a->y ? (float *)pd_scratch((size_t)a->S * sizeof(float)) : NULL;
    if (a->y && !t) return;
    for (isz r = begin; r < end; r++) {
        float *o = a->out + r * a->S;
        const isz ch = r % a->C;
        if (o != a->x + r * a->S) memcpy(o, a->x + r * a->S, (size_t)a->S * sizeof(float));
        if (a->y) { /* o = xc(x) + yc(y) */
            q_chain_row(o, a->S, ch, a->xc);
            memcpy(t, a->y + r * a->S, (size_t)a->S * sizeof(float));
            q_chain_row(t, a->S, ch, a->yc);
            for (isz j = 0; j < a->S; j++) o[j] = o[j] + t[j];
        }
        q_chain_row(o, a->S, ch, a->chain);
    }
    free(t);
}

/* a chain's program (a float32 buffer) parsed into c, the buffer kept in views[*n] (released by the caller) */
static int qchain_take(PyObject *po, Py_buffer *views, int *n, isz channels, q_chain *c) {
    if (PyObject_GetBuffer(po, &views[*n], PyBUF_SIMPLE) != 0) return -1;
    const Py_buffer *v = &views[(*n)++];
    if (v->len % 4 != 0 || q_chain_parse((const float *)v->buf, v->len / 4, channels, c) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "qchain: a program must be float32");
        return -1;
    }
    return 0;
}

/* qchain(x, out, (N, C, S), program float32[, y, x program, y program]): out[n, c, :] = chain(x[n, c, :]), or with y:
 * chain(x chain(x[n, c, :]) + y chain(y[n, c, :])) (an add of two tensors of one shape); out may be x */
PD_HIDDEN PyObject *py_qchain(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xo, *oo, *po, *yo = Py_None, *pxo = Py_None, *pyo = Py_None;
    qchain_args a;
    isz N;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "OO(nnn)O|OOO", &xo, &oo, &N, &a.C, &a.S, &po, &yo, &pxo, &pyo)) return NULL;
    if (N < 0 || a.C <= 0 || a.S < 0 || (yo != Py_None && (pxo == Py_None || pyo == Py_None))) {
        PyErr_SetString(PyExc_ValueError, "qchain: bad shape, or y without its two programs");
        return NULL;
    }
    Py_buffer views[3];
    int nv = 0, bad = 0;
    q_chain chain, xc, yc;
    bad = qchain_take(po, views, &nv, a.C, &chain) < 0;
    if (!bad && yo != Py_None)
        bad = qchain_take(pxo, views, &nv, a.C, &xc) < 0 || qchain_take(pyo, views, &nv, a.C, &yc) < 0;
    q_bufs bs = {0};
    if (!bad) {
        a.chain = &chain, a.xc = &xc, a.yc = &yc;
        a.x = (const float *)qbufs_take(&bs, xo, 0, N * a.C * a.S * 4, "qchain input");
        a.y = yo == Py_None ? NULL : (const float *)qbufs_take(&bs, yo, 0, N * a.C * a.S * 4, "qchain input y");
        a.out = (float *)qbufs_take(&bs, oo, 1, N * a.C * a.S * 4, "qchain output");
        bad = bs.failed;
    }
    if (!bad) {
        const unsigned fail0 = pd_failures();
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(qchain_task, &a, N * a.C, row_grain(N * a.C, a.S));
        Py_END_ALLOW_THREADS;
        qbufs_release(&bs);
        while (nv > 0) PyBuffer_Release(&views[--nv]);
        return pd_done(fail0);
    }
    while (nv > 0) PyBuffer_Release(&views[--nv]);
    return NULL;
}

/* A chain whose output is quantized to codes: from its first QDQ step (round type 0) after which no step reads a
 * per-channel value, every later step and the output's quantization are a function of that step's code alone (the QDQ
 * gives one value per code), so they are a table of the 256 codes, made here by running those very steps and the
 * output's quantization (this ISA's forms) on one value per code. The rows then run the steps before it, are
 * quantized as it quantizes (the same integers: Paddle's quantize_linear) and looked up (q_lut_codes). Exact: a value
 * of that code is (q / k) where q / k * k rounds back to q (checked), the same code as the row's value; a NaN has
 * code 0; a QDQ's zero may differ in sign, which no step's float32 operation (add, multiply, divide by a constant,
 * compare, min / max) carries into a non-zero value, so into another code. */
PD_HIDDEN void q_chain_lut(q_chain *c, const q_param *cq) {
    int f = -1;
    for (int i = c->n - 1; i >= 0 && c->s[i].code != Q_STEP_ADD_C; i--)
        if (c->s[i].code == Q_STEP_QDQ && c->s[i].oq.qp.rt == 0) f = i;
    if (f < 0) return;
    const q_param *qp = &c->s[f].oq.qp;
    if (!isfinite(qp->k) || qp->k <= 0.0f) return;
    float v[256];
    uint8_t back[256];
    for (int i = 0; i < 256; i++) v[i] = (float)(i - 128) / qp->k;
    q_codes_row(back, v, 256, qp);
    for (int i = 0; i < 256; i++)
        if (back[i] != i) return;
    q_chain tail = *c;
    tail.n = tail.nrun = c->n - f;
    memmove(tail.s, c->s + f, (size_t)tail.n * sizeof tail.s[0]);
    q_chain_row(v, 256, 0, &tail);
    q_codes_row(c->lut, v, 256, cq);
    c->lut_at = f;
    c->nrun = f;
}
