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
    c->n = 0;
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
            break;
        case Q_STEP_QDQ:
            if (cnt != 4 || (p[2] != 0.0f && p[2] != 1.0f)) goto bad;
            s->oq.qp.k = p[0], s->oq.qp.s = p[1], s->oq.qp.rt = (int)p[2], s->oq.qmax = p[3];
            q_out_init(&s->oq);
            break;
        default:
            goto bad;
        }
        i += 2 + cnt;
    }
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "pointwise chain: malformed program (step %d; at most %d steps)", c->n,
                 Q_MAX_STEPS);
    return -1;
}

/* o[0 .. n) of channel ch through the chain, in place */
PD_INLINE void q_chain_row_impl(float *o, isz n, isz ch, const q_chain *c) {
    for (int i = 0; i < c->n; i++) {
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
PD_TARGET_AVX2 static void q_chain_row_avx2(float *o, isz n, isz ch, const q_chain *c) { q_chain_row_impl(o, n, ch, c); }
PD_TARGET_AVX512 static void q_chain_row_avx512(float *o, isz n, isz ch, const q_chain *c) {
    q_chain_row_impl(o, n, ch, c);
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
