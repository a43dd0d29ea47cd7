/* pdlite native host kernels: the int8 conv of few input channels in the depthwise window form (see qdw.h,
 * docs/quantization.md)
 *
 * A conv of one group over C input channels, C KH ceil(KW / 4) small (the 3-channel 3x3 stride-2 stem of the image
 * classifiers: 9): at vnni, each input channel plane's padded rows as windows of 4 taps (qdw_windows, as the int8
 * depthwise conv builds them), once per image; then output channel m's whole plane is the vpdpbusd over (input
 * channel c, kernel row i, group g) of its weight words on those windows, at the fixed offsets of the depthwise
 * window form plus channel c's window planes: C KH G vpdpbusd for 16 outputs, no columns matrix (the columns form
 * pads 3 channels to 4 words and runs 16 x 16 tiles over a K of 27, its sums through memory). The sums are the exact
 * integers (they start at -comp[m], comp[m] = 128 sum_k W8[m, k]: the padding and the + 128 of the bytes taken back),
 * the same as every form's; the epilogue is the depthwise window form's (qdw_plane_out: q_epilogue's operations, or
 * codes and floats straight from the registers as qdw_codes16 / qdw_values16: the same bits). Vnni only:
 * quant_native.stem_form says where it runs (other ISAs run qconv's forms).
 */
#include "qdw.h"

#define QST_MAX_WORDS 16 /* (input channel, kernel row, group of 4 taps) words a filter: 9 for a 3-channel 3x3 */

#ifdef PD_X86_DISPATCH
typedef struct {
    qdw_args d;   /* d.a.geo.C the input channels, d.a.M the output channels, d.w (M, C KH KW) */
    int32_t *win; /* the current image's windows: C blocks of CS words, each SH phase planes of PS words */
    isz CS, PS;
} qst_args;

/* input channels [begin, end) of image d.a.img: their planes' windows */
PD_TARGET_VNNI static void qst_windows_task(void *ctx, isz begin, isz end) {
    const qst_args *s = (const qst_args *)ctx;
    const qdw_args *d = &s->d;
    const conv_geo *g = &d->a.geo;
    const isz nvw = (d->P + 15) / 16; /* window loads a row */
    uint8_t *p = d->a.xc ? NULL : (uint8_t *)pd_scratch((size_t)(d->Hp * d->Wp + 256));
    isz *lo = (isz *)pd_scratch((size_t)nvw * (sizeof(isz) + sizeof(__mmask64)));
    if ((p || d->a.xc) && lo) {
        __mmask64 *lm = (__mmask64 *)(lo + nvw);
        __m512i idx, sh;
        qdw_win_setup(g, nvw, lo, lm, &idx, &sh);
        for (isz c = begin; c < end; c++) {
            const isz pl = d->a.img * g->C + c;
            int32_t *win = s->win + c * s->CS;
            for (isz ph = 0; ph < g->SH; ph++) { /* past each phase's rows (read for dropped outputs only): zeros */
                const isz rows = (d->Hp - ph + g->SH - 1) / g->SH;
                memset(win + ph * s->PS + rows * d->P, 0, (size_t)(s->PS - rows * d->P) * sizeof(int32_t));
            }
            memset(win + g->SH * s->PS, 0, 64 * sizeof(int32_t));
            if (p) {
                if (d->a.qp.rt == 0)
                    qdw_quantize_vnni(d, pl, p);
                else
                    qdw_quantize_rt(d, pl, p, 1);
            }
            const uint8_t *xc = d->a.xc ? d->a.xc + pl * g->H * g->W : NULL;
            for (isz ph = 0; ph < g->SH; ph++) qdw_windows(d, p, xc, ph, lm, lo, idx, sh, win + ph * s->PS);
        }
    }
    free(p);
    free(lo);
}

/* output channels [begin, end) of image d.a.img from the windows */
PD_TARGET_VNNI static void qst_out_task(void *ctx, isz begin, isz end) {
    const qst_args *s = (const qst_args *)ctx;
    const qdw_args *d = &s->d;
    const conv_geo *g = &d->a.geo;
    const isz G = (g->KW + 3) / 4, kt = g->KH * G, nt = g->C * kt, P = d->P;
    const isz nout = (g->OH * P + 15) / 16 * 16;
    const int mode = qdw_mode(&d->a);
    const isz es = mode == QDW_FLOATS || mode == QDW_SUMS ? 4 : 1; /* bytes a value */
    int32_t *acc = (int32_t *)pd_scratch((size_t)(nout + 64) * (size_t)es);
    int32_t *wv = (int32_t *)pd_scratch((size_t)nt * sizeof(int32_t));
    isz *off = (isz *)pd_scratch((size_t)nt * sizeof(isz));
    if (acc && wv && off) {
        for (isz c = 0; c < g->C; c++) qdw_offsets(g, G, P, s->PS, c * s->CS, off + c * kt);
        q_args a = d->a;
        a.comp = NULL; /* (the sums start at -comp[m]) */
        for (isz m = begin; m < end; m++) {
            for (isz c = 0; c < g->C; c++)
                qdw_weight_words(d->w + (m * g->C + c) * g->KH * g->KW, g->KH, g->KW, G, wv + c * kt);
            qdw_plane_out(mode, &a, d->a.comp[m], s->win, off, wv, nt, nout, P, acc, m, a.img * a.M + m);
        }
    }
    free(acc);
    free(wv);
    free(off);
}
#endif

/* qstemconv(x, w int8 (M, C KH KW), comp int32 (M), mul, bias|None, out|None,
 *           (N,C,H,W,M,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), (k, s, rt), act, (a0,a1,a2), res|None, ((k,s,rt), qmax)|None,
 *           chain|None, xcodes, codes_out|None, (k, s, rt)|None): qconv's arguments (codes in and out as its) with
 * the weights as quant_native.stem_weights packs them; vnni only, where qstem_applies */
PD_HIDDEN PyObject *py_qstemconv(PyObject *self, PyObject *args) {
    (void)self;
#ifdef PD_X86_DISPATCH
    const unsigned fail0 = pd_failures();
    qst_args s;
    memset(&s, 0, sizeof s);
    qdw_args *d = &s.d;
    q_args *a = &d->a;
    const conv_geo *g = &a->geo;
    q_bufs bs = {0};
    q_chain chain;
    Py_buffer chv = {0};
    if (qdw_parse(args, 1, d, &bs, &chain, &chv) < 0) return NULL;
    if (g_qisa != Q_VNNI || !qdw_win_applies(g) || g->C * g->KH * ((g->KW + 3) / 4) > QST_MAX_WORDS) {
        qbufs_release(&bs);
        if (a->chain) PyBuffer_Release(&chv);
        PyErr_SetString(PyExc_ValueError, "qstemconv: not a vnni process or not a stem form's geometry "
                                          "(quant_native.stem_form)");
        return NULL;
    }
    qdw_win_geometry(d);
    s.PS = d->Kr * d->P + 16; /* a phase plane and its gap */
    s.CS = g->SH * s.PS + 64;
    s.win = (int32_t *)pd_scratch((size_t)(g->C * s.CS) * sizeof(int32_t));
    if (s.win) {
        Py_BEGIN_ALLOW_THREADS;
        for (isz n = 0; n < a->N; n++) {
            a->img = n;
            parallel_for(qst_windows_task, &s, g->C, 1);
            parallel_for(qst_out_task, &s, a->M, a->M * a->L < PD_ONE_THREAD_FLOATS ? a->M : grain_for(a->M, 4));
        }
        Py_END_ALLOW_THREADS;
    }
    free(s.win);
    qbufs_release(&bs);
    if (a->chain) PyBuffer_Release(&chv);
    return pd_done(fail0);
#else
    (void)args;
    PyErr_SetString(PyExc_ValueError, "qstemconv: an x86-64 vnni form (quant_native.stem_form)");
    return NULL;
#endif
}

/* qstem_applies((C, KH, KW, SH, SW, DH, DW)): whether qstemconv runs that geometry in this process */
PD_HIDDEN PyObject *py_qstem_applies(PyObject *self, PyObject *args) {
    (void)self;
    conv_geo g;
    memset(&g, 0, sizeof g);
    if (!PyArg_ParseTuple(args, "(nnnnnnn)", &g.C, &g.KH, &g.KW, &g.SH, &g.SW, &g.DH, &g.DW)) return NULL;
    int ok = 0;
#ifdef PD_X86_DISPATCH
    ok = g_qisa == Q_VNNI && g.C > 0 && g.KH > 0 && g.KW > 0 && g.SH > 0 && g.SW > 0 && g.DH > 0 && g.DW > 0 &&
         qdw_win_applies(&g) && g.C * g.KH * ((g.KW + 3) / 4) <= QST_MAX_WORDS;
#endif
    return PyBool_FromLong(ok);
}
