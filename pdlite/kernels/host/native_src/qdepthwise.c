/* pdlite native host kernels: the int8 depthwise conv (see qint8.h, docs/quantization.md)
 *
 * out[n, c] = act(float(sum_t q(x)[n, c, tap t] * W8[c, t]) * mul[c] + bias[c] (+ res)), then the optional output
 * QDQ and pointwise chain: the epilogue of qgemm.c (q_epilogue). One channel per output channel (groups = C = M).
 * The sums are exact integers (|sum| <= taps 255 128 < 2^31 for taps < 2^16), the same on every form:
 *
 *   window   (AVX512-VNNI; strides and dilations with SW + DW <= 5, SW <= 4, and 4 DW a multiple of SW where KW > 4;
 *            not where 2 P > 3 OW, a third of the columns dropped, and fsum can run: fsum is faster there)
 *            per (image, channel) plane: each padded input row's windows of 4 taps (bytes q + 128 of columns
 *            u SW + t DW, t = 0..3, one dword per output column u, the padding byte 128) built once, 16 at a time
 *            (one 64-byte load - masked where it reads the codes input directly -, a dword permute, an in-lane byte
 *            shuffle), into SH phase planes of pitch P = OW + 4 (G - 1) DW / SW (G = ceil(KW / 4) groups of taps a
 *            kernel row); output (oh, ow) at flat index oh P + ow reads the window of kernel row i, group g at the
 *            fixed offset ((i DH) / SH) P + 4 g DW / SW in phase (i DH) % SH, so the whole plane is one vpdpbusd per
 *            (kernel row, group) on each vector of 16 contiguous outputs, 4 vectors in flight (the columns ow >= OW
 *            computed and dropped); the sums start at -comp[c] (comp = 128 sum_t W8[c, t] takes the + 128 back).
 *            Codes or floats out where nothing follows the activation: straight from the registers (qdw_values16,
 *            qdw_codes16: q_row_values' and q_v16's operations, the same bits); else q_epilogue over the plane.
 *   fsum     (every other ISA and shape, taps <= QDW_FSUM_TAPS): the codes q of a chunk of channels as floats, the
 *            fp32 depthwise conv's own kernel (depthwise.c, whichever form it picks for the shape) run on them with
 *            the weights W8 as floats, no bias, no activation: every product q W8 and every partial sum is an integer
 *            below 2^24 (|sum| <= taps 128 127), so the float sums ARE the integer sums, in any order, with or
 *            without FMA; then the same epilogue (native._set_qdw_integer(0) runs it at vnni too: the tests
 *            compare the two forms' bits).
 *   loops    (larger kernels off vnni) plain loops over each output row per tap.
 */
#include "qdw.h"
#include "depthwise.h"

#define QDW_FSUM_TAPS 1000 /* taps * 128 * 127 < 2^24 */
#define QDW_CHUNK_FLOATS 32768 /* a chunk's input (or output) plane floats: its scratch stays in L2 */

static int g_qdw_int = 1; /* the window form where it applies and pays (tests' hook: _set_qdw_integer) */

/* tests: _set_qdw_integer(n): 0 runs the float-sums form (or the plain loops) where the window form would run, 1 (the
 * default) the window form where it applies and pays, 2 wherever it applies; returns the old setting */
PD_HIDDEN PyObject *py_set_qdw_integer(PyObject *self, PyObject *arg) {
    (void)self;
    const long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > 2) {
        PyErr_SetString(PyExc_ValueError, "_set_qdw_integer: 0, 1 or 2");
        return NULL;
    }
    const int before = g_qdw_int;
    g_qdw_int = (int)n;
    return PyLong_FromLong(before);
}

/* the sums of output row oh of one plane, plain loops */
PD_INLINE void qdw_row_loops(const qdw_args *d, const uint8_t *p, const int8_t *w, isz oh, int32_t *acc) {
    const conv_geo *g = &d->a.geo;
    const isz OW = g->OW, SW = g->SW;
    memset(acc, 0, (size_t)OW * sizeof(int32_t));
    for (isz i = 0; i < g->KH; i++) {
        const uint8_t *row = p + (oh * g->SH + i * g->DH) * d->Wp;
        for (isz j = 0; j < g->KW; j++) {
            const int32_t wt = w[i * g->KW + j];
            const uint8_t *r = row + j * g->DW;
            if (SW == 1) {
                PD_SIMD for (isz o = 0; o < OW; o++) acc[o] += (int32_t)r[o] * wt;
            } else {
                for (isz o = 0; o < OW; o++) acc[o] += (int32_t)r[o * SW] * wt;
            }
        }
    }
}

#ifdef PD_X86_DISPATCH
/* planes [begin, end) in the window form (vnni): the padded plane's rows as windows of 4 taps (qdw_windows) in SH
 * phase planes of pitch P (phase y % SH, row y / SH); output (oh, ow) at flat index oh P + ow then reads the window
 * of kernel row i, group gg at a fixed offset ((i DH) / SH) P + 4 gg DW / SW in phase (i DH) % SH: the sums of a
 * whole plane are vpdpbusd over contiguous vectors (the columns ow >= OW computed and dropped). Codes out without a
 * residual, output QDQ or chain: the codes straight from the sums' registers (qdw_codes16); else the sums packed to
 * OH x OW and q_epilogue once over the plane */
PD_TARGET_VNNI static void qdw_task_win(void *ctx, isz begin, isz end) {
    const qdw_args *d = (const qdw_args *)ctx;
    const conv_geo *g = &d->a.geo;
    const isz G = (g->KW + 3) / 4, P = d->P, nt = g->KH * G;
    const isz nout = (g->OH * P + 15) / 16 * 16;
    const int mode = qdw_mode(&d->a);
    const isz es = mode == QDW_FLOATS || mode == QDW_SUMS ? 4 : 1; /* bytes a value */
    uint8_t *p = d->a.xc ? NULL : (uint8_t *)pd_scratch((size_t)(d->Hp * d->Wp + 256));
    const isz PS = d->Kr * P + 16; /* a phase plane and its gap */
    int32_t *win = (int32_t *)pd_scratch((size_t)(g->SH * PS + 64) * sizeof(int32_t));
    int32_t *acc = (int32_t *)pd_scratch((size_t)(nout + 64) * (size_t)es);
    int32_t *wv = (int32_t *)pd_scratch((size_t)nt * sizeof(int32_t));
    const isz nvw = (P + 15) / 16; /* window loads a row */
    isz *off = (isz *)pd_scratch((size_t)(nt + nvw) * sizeof(isz) + (size_t)nvw * sizeof(__mmask64));
    if ((p || d->a.xc) && win && acc && wv && off) {
        isz *lo = off + nt; /* the codes rows' loads: from src + lo[j], the bytes of lm[j] */
        __mmask64 *lm = (__mmask64 *)(lo + nvw);
        __m512i idx, sh;
        qdw_win_setup(g, nvw, lo, lm, &idx, &sh);
        memset(win, 0, (size_t)(g->SH * PS + 64) * sizeof(int32_t)); /* (rows only dropped columns read) */
        qdw_offsets(g, G, P, PS, 0, off);
        q_args a = d->a;
        a.comp = NULL; /* (the sums start at -comp[c]) */
        for (isz pl = begin; pl < end; pl++) {
            const isz c = pl % g->C;
            a.img = pl / g->C;
            qdw_weight_words(d->w + c * g->KH * g->KW, g->KH, g->KW, G, wv);
            if (p) {
                if (a.qp.rt == 0)
                    qdw_quantize_vnni(d, pl, p);
                else
                    qdw_quantize_rt(d, pl, p, 1);
            }
            const uint8_t *xc = a.xc ? a.xc + pl * g->H * g->W : NULL;
            for (isz ph = 0; ph < g->SH; ph++) qdw_windows(d, p, xc, ph, lm, lo, idx, sh, win + ph * PS);
            qdw_plane_out(mode, &a, d->a.comp[c], win, off, wv, nt, nout, P, acc, c, pl);
        }
    }
    free(p);
    free(win);
    free(acc);
    free(wv);
    free(off);
}
#endif

/* planes [begin, end) in plain loops */
PD_INLINE void qdw_task_impl(void *ctx, isz begin, isz end) {
    const qdw_args *d = (const qdw_args *)ctx;
    const conv_geo *g = &d->a.geo;
    uint8_t *p = (uint8_t *)pd_scratch((size_t)(d->Hp * d->Wp + 256));
    int32_t *acc = (int32_t *)pd_scratch((size_t)g->OW * sizeof(int32_t));
    if (p && acc) {
        q_args a = d->a;
        for (isz pl = begin; pl < end; pl++) {
            const isz c = pl % g->C;
            a.img = pl / g->C;
            if (a.xc)
                qdw_quantize_rt(d, pl, p, Q_RT_CODES);
            else if (a.qp.rt == 0)
                qdw_quantize_rt(d, pl, p, 0);
            else
                qdw_quantize_rt(d, pl, p, 1);
            for (isz oh = 0; oh < g->OH; oh++) {
                qdw_row_loops(d, p, d->w + c * g->KH * g->KW, oh, acc);
                q_epilogue_loops(&a, acc, g->OW, 1, c, oh * g->OW, g->OW);
            }
        }
    }
    free(p);
    free(acc);
}
PD_VERSIONS(qdw_task)

#ifdef PD_X86_DISPATCH
/* xf[0 .. n) = float(q(x)), round_type 0, 8 at a time (q_avx2_q8: the 16-lane vectors spill at AVX2) */
PD_TARGET_AVX2 static void qdwf_quantize_avx2(float *xf, const float *x, isz n, float k) {
    const __m256 kv = _mm256_set1_ps(k);
    for (isz i = 0; i < n; i += 8) {
        const isz cnt = n - i < 8 ? n - i : 8;
        const __m256 q = _mm256_cvtepi32_ps(q_avx2_q8(x, i, cnt, kv));
        if (cnt == 8) {
            _mm256_storeu_ps(xf + i, q);
        } else {
            float t[8];
            _mm256_storeu_ps(t, q);
            for (isz j = 0; j < cnt; j++) xf[i + j] = t[j];
        }
    }
}
#endif

/* items [begin, end) = (image, chunk of channels) of the float-sums form */
PD_INLINE void qdwf_task_impl(void *ctx, isz begin, isz end) {
    const qdw_args *d = (const qdw_args *)ctx;
    const conv_geo *g = &d->a.geo;
    const isz HW = g->H * g->W, L = g->OH * g->OW, taps = g->KH * g->KW;
    float *xf = (float *)pd_scratch((size_t)(d->chunk * HW) * sizeof(float));
    float *sf = (float *)pd_scratch((size_t)(d->chunk * L) * sizeof(float));
    if (xf && sf) {
        q_args a = d->a;
        a.comp = NULL; /* the float q has no + 128 */
        a.fsum = 1;    /* the epilogue reads the float sums as they are */
        for (isz it = begin; it < end; it++) {
            const isz n = it / d->chunks, c0 = (it % d->chunks) * d->chunk;
            const isz cc = g->C - c0 < d->chunk ? g->C - c0 : d->chunk, off = (n * g->C + c0) * HW, cnt = cc * HW;
            if (a.xc) {
                const uint8_t *xc = a.xc + off;
                PD_SIMD for (isz i = 0; i < cnt; i++) xf[i] = (float)((int32_t)xc[i] - 128);
            } else {
                const float *x = a.x + off;
#ifdef PD_X86_DISPATCH
                if (Q_AVX2_CLASS && a.qp.rt == 0) {
                    qdwf_quantize_avx2(xf, x, cnt, a.qp.k);
                    goto quantized;
                }
#endif
                for (isz i = 0; i < cnt; i += 16) {
                    const isz k = cnt - i < 16 ? cnt - i : 16;
                    pd_v16 xv = {0};
                    if (k == 16)
                        memcpy(&xv, x + i, sizeof xv);
                    else
                        for (isz j = 0; j < k; j++) xv[j] = x[i + j];
                    const pd_v16 qf = __builtin_convertvector(q_v16(xv, &a.qp), pd_v16);
                    if (k == 16)
                        memcpy(xf + i, &qf, sizeof qf);
                    else
                        for (isz j = 0; j < k; j++) xf[i + j] = qf[j];
                }
            }
#ifdef PD_X86_DISPATCH
        quantized:
#endif
            ;
            dw_args w;
            memset(&w, 0, sizeof w);
            w.x = xf, w.w = d->wf + c0 * taps, w.out = sf;
            w.N = 1, w.C = w.OC = cc, w.H = g->H, w.W = g->W, w.OH = g->OH, w.OW = g->OW, w.KH = g->KH, w.KW = g->KW;
            w.SH = g->SH, w.SW = g->SW, w.DH = g->DH, w.DW = g->DW, w.PT = g->PT, w.PL = g->PL;
            w.act.kind = ACT_NONE;
            dw_run_serial(&w);
            const int32_t *si = (const int32_t *)sf; /* (read as floats: a.fsum) */
            a.img = n;
            if (g_qisa == Q_VNNI)
                q_epilogue(&a, si, L, cc, c0, 0, L);
            else
                q_epilogue_loops(&a, si, L, cc, c0, 0, L);
        }
    }
    free(xf);
    free(sf);
}
PD_VERSIONS(qdwf_task)

PD_HIDDEN void q_dw_pick(int isa) {
    qdw_task_pick(isa);
    qdwf_task_pick(isa);
}

static const char *const qdw_what[2][9] = {
    {"qdwconv input codes",
     "qdwconv input",
     "qdwconv int8 weights",
     "qdwconv comp",
     "qdwconv multipliers",
     "qdwconv bias",
     "qdwconv output codes",
     "qdwconv output",
     "qdwconv residual"},
    {"qstemconv input codes",
     "qstemconv input",
     "qstemconv int8 weights",
     "qstemconv comp",
     "qstemconv multipliers",
     "qstemconv bias",
     "qstemconv output codes",
     "qstemconv output",
     "qstemconv residual"}};

/* qdwconv's and qstemconv's arguments into d (stem: the geometry tuple names M after W, the weights (M, C KH KW);
 * else M = C, the weights (C, KH KW)), their buffers into bs, a chain into chain and chv (d->a.chain set); 0, or -1
 * with the error set and the buffers released */
PD_HIDDEN int qdw_parse(PyObject *args, int stem, qdw_args *d, q_bufs *bs, q_chain *chain, Py_buffer *chv) {
    const char *fn = stem ? "qstemconv" : "qdwconv", *const *wh = qdw_what[stem != 0];
    PyObject *xo, *wo, *co, *mo, *bo, *oo, *ap, *ro = Py_None, *qo = Py_None, *cho = Py_None, *cdo = Py_None;
    PyObject *cqo = Py_None;
    q_args *a = &d->a;
    conv_geo *g = &a->geo;
    int act, xcodes = 0;
    isz M = 0;
    const int ok = stem ? PyArg_ParseTuple(args, "OOOOOO(nnnnnnnnnnnnnnn)(ffi)iO|OOOpOO", &xo, &wo, &co, &mo, &bo, &oo,
                                           &a->N, &g->C, &g->H, &g->W, &M, &g->OH, &g->OW, &g->KH, &g->KW, &g->SH,
                                           &g->SW, &g->DH, &g->DW, &g->PT, &g->PL, &a->qp.k, &a->qp.s, &a->qp.rt, &act,
                                           &ap, &ro, &qo, &cho, &xcodes, &cdo, &cqo)
                        : PyArg_ParseTuple(args, "OOOOOO(nnnnnnnnnnnnnn)(ffi)iO|OOOpOO", &xo, &wo, &co, &mo, &bo, &oo,
                                           &a->N, &g->C, &g->H, &g->W, &g->OH, &g->OW, &g->KH, &g->KW, &g->SH, &g->SW,
                                           &g->DH, &g->DW, &g->PT, &g->PL, &a->qp.k, &a->qp.s, &a->qp.rt, &act, &ap,
                                           &ro, &qo, &cho, &xcodes, &cdo, &cqo);
    if (!ok) return -1;
    if (!stem) M = g->C;
    if (cdo != Py_None && q_parse_codes_out(cqo, &a->cq) < 0) return -1;
    if (cdo == Py_None && oo == Py_None) {
        PyErr_Format(PyExc_ValueError, "%s: no output (out or codes_out)", fn);
        return -1;
    }
    if (qo != Py_None) {
        if (!PyArg_ParseTuple(qo, "(ffi)f", &a->oq.qp.k, &a->oq.qp.s, &a->oq.qp.rt, &a->oq.qmax)) return -1;
        q_out_init(&a->oq);
    }
    const isz wk = (stem ? g->C : 1) * g->KH * g->KW; /* weights a filter */
    if (a->N < 0 || g->C <= 0 || M <= 0 || g->H <= 0 || g->W <= 0 || g->OH <= 0 || g->OW <= 0 || g->KH <= 0 ||
        g->KW <= 0 || g->SH <= 0 || g->SW <= 0 || g->DH <= 0 || g->DW <= 0 || g->PT < 0 || g->PL < 0 ||
        g->KH * g->KW >= (isz)1 << 16 || wk >= (isz)1 << 16) {
        PyErr_Format(PyExc_ValueError, "%s: bad geometry", fn);
        return -1;
    }
    if (parse_act(act, ap, &a->act) < 0) return -1;
    a->M = M;
    a->L = g->OH * g->OW;
    {
        const isz hn = (g->OH - 1) * g->SH + (g->KH - 1) * g->DH + 1, wn = (g->OW - 1) * g->SW + (g->KW - 1) * g->DW + 1;
        d->Hp = hn > g->H + g->PT ? hn : g->H + g->PT;
        d->Wp = wn > g->W + g->PL ? wn : g->W + g->PL;
        /* the vnni tiles read 64 bytes from each tile's first column: room for the last tile past the row */
        d->Wp += 16 * g->SW + 4 * g->DW;
    }
    const isz xn = a->N * g->C * g->H * g->W;
    if (xcodes)
        a->xc = (const uint8_t *)qbufs_take(bs, xo, 0, xn, wh[0]);
    else
        a->x = (const float *)qbufs_take(bs, xo, 0, xn * 4, wh[1]);
    d->w = (const int8_t *)qbufs_take(bs, wo, 0, M * wk, wh[2]);
    a->comp = (const int32_t *)qbufs_take(bs, co, 0, M * 4, wh[3]);
    a->mul = (const float *)qbufs_take(bs, mo, 0, M * 4, wh[4]);
    a->bias = bo == Py_None ? NULL : (const float *)qbufs_take(bs, bo, 0, M * 4, wh[5]);
    if (cdo != Py_None)
        a->codes = (uint8_t *)qbufs_take(bs, cdo, 1, a->N * a->M * a->L, wh[6]);
    else
        a->out = (float *)qbufs_take(bs, oo, 1, a->N * a->M * a->L * 4, wh[7]);
    a->res = ro == Py_None ? NULL : (const float *)qbufs_take(bs, ro, 0, a->N * a->M * a->L * 4, wh[8]);
    if (bs->failed) return -1;
    if (cho != Py_None) {
        if (PyObject_GetBuffer(cho, chv, PyBUF_SIMPLE) != 0) {
            qbufs_release(bs);
            return -1;
        }
        if (chv->len % 4 != 0 || q_chain_parse((const float *)chv->buf, chv->len / 4, a->M, chain) < 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: the chain must be float32", fn);
            PyBuffer_Release(chv);
            qbufs_release(bs);
            return -1;
        }
        a->chain = chain;
        if (a->codes) q_chain_lut(chain, &a->cq); /* (codes through the chain's table where it has one: qchain.c) */
    }
    return 0;
}

/* qdwconv(x, w int8 (C, KH KW), comp int32 (C), mul, bias|None, out|None, (N,C,H,W,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL),
 *         (k, s, rt), act, (a0,a1,a2), res|None, ((k,s,rt), qmax)|None, chain|None, xcodes, codes_out|None,
 *         (k, s, rt)|None): codes in and out as qconv's */
PD_HIDDEN PyObject *py_qdwconv(PyObject *self, PyObject *args) {
    (void)self;
    const unsigned fail0 = pd_failures();
    qdw_args d;
    memset(&d, 0, sizeof d);
    q_args *a = &d.a;
    conv_geo *g = &a->geo;
    q_bufs bs = {0};
    q_chain chain;
    Py_buffer chv = {0};
    if (qdw_parse(args, 0, &d, &bs, &chain, &chv) < 0) return NULL;
    const isz G = (g->KW + 3) / 4;
    /* the window form where it applies, except where its dropped columns would be over a third of those computed
     * (a 5x5 on 7x7 maps: P = 11 for OW = 7) and the float-sums form can run: the fp32 kernel's channel-blocked form
     * is faster there (MobileNetV3-small's 576 x 7x7 5x5: 0.034 -> 0.029 ms, 1 thread, noisy) */
    const isz P = g->OW + 4 * (G - 1) * g->DW / g->SW;
    const int win = g_qisa == Q_VNNI && g_qdw_int && qdw_win_applies(g) &&
                    (2 * P <= 3 * g->OW || g->KH * g->KW > QDW_FSUM_TAPS || g_qdw_int == 2);
    if (win) qdw_win_geometry(&d);
    isz items = a->N * g->C;
    pd_task task = qdw_task;
#ifdef PD_X86_DISPATCH
    if (win) task = qdw_task_win;
#endif
    float *wf = NULL;
    const isz taps = g->KH * g->KW;
    if (!win && taps <= QDW_FSUM_TAPS && (wf = (float *)malloc((size_t)(g->C * taps) * sizeof(float)))) {
        for (isz i = 0; i < g->C * taps; i++) wf[i] = (float)d.w[i];
        const isz hw = g->H * g->W > a->L ? g->H * g->W : a->L;
        isz chunk = QDW_CHUNK_FLOATS / (hw > 0 ? hw : 1);
        chunk = chunk < 1 ? 1 : (chunk >= 16 ? chunk / 16 * 16 : chunk);
        const isz quarter = (g->C / 4 + 15) / 16 * 16; /* at least 4 items where that keeps 16 channels each */
        if (quarter >= 16 && chunk > quarter) chunk = quarter;
        d.wf = wf, d.chunk = chunk < g->C ? chunk : g->C, d.chunks = (g->C + d.chunk - 1) / d.chunk;
        items = a->N * d.chunks;
        task = qdwf_task;
    }
    Py_BEGIN_ALLOW_THREADS;
    parallel_for(task, &d, items, a->N * a->M * a->L < PD_ONE_THREAD_FLOATS ? items : grain_for(items, 4));
    Py_END_ALLOW_THREADS;
    free(wf);
    qbufs_release(&bs);
    if (a->chain) PyBuffer_Release(&chv);
    return pd_done(fail0);
}
