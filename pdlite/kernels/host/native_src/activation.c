/* pdlite native host kernels: bias + activation in place (see common.h) */
#include "common.h"

/* ------------------------------------------------------------------------------------------------ */
/* bias + activation in place                                                                       */
/* ------------------------------------------------------------------------------------------------ */

typedef struct {
    float *out;
    const float *bias;
    isz C, inner;
    act_t act;
} ba_args;

PD_INLINE void ba_task_impl(void *vctx, isz begin, isz end) {
    const ba_args *a = (const ba_args *)vctx;
    for (isz r = begin; r < end; r++) {
        float b = a->bias ? a->bias[r % a->C] : 0.0f;
        bias_act_copy(a->out + r * a->inner, a->out + r * a->inner, a->inner, b, a->bias != NULL, &a->act);
    }
}


PD_VERSIONS(ba_task)

PD_HIDDEN PyObject *py_bias_act(PyObject *self, PyObject *args) {
    PyObject *oo, *bo, *ap;
    isz n, c, inner;
    int act;
    ba_args a;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(nnn)iO", &oo, &bo, &n, &c, &inner, &act, &ap)) return NULL;
    if (n < 0 || c <= 0 || inner < 0) {
        PyErr_SetString(PyExc_ValueError, "bias_act: bad shape");
        return NULL;
    }
    if (parse_act(act, ap, &a.act) < 0) return NULL;
    Py_buffer ob, bb;
    int has_bias = bo != Py_None;
    if (get_buf(oo, &ob, 1, n * c * inner, "bias_act output") < 0) return NULL;
    if (has_bias && get_buf(bo, &bb, 0, c, "bias_act bias") < 0) {
        PyBuffer_Release(&ob);
        return NULL;
    }
    a.out = (float *)ob.buf;
    a.bias = has_bias ? (const float *)bb.buf : NULL;
    a.C = c;
    a.inner = inner;
    if (inner > 0 && (has_bias || a.act.kind != ACT_NONE)) {
        isz rows = n * c;
        /* tiny tensors: one thread (waking a worker costs more than the work) */
        isz grain = rows * inner < 16384 ? rows : grain_for(rows, 4);
        Py_BEGIN_ALLOW_THREADS;
        parallel_for(ba_task, &a, rows, grain);
        Py_END_ALLOW_THREADS;
    }
    if (has_bias) PyBuffer_Release(&bb);
    PyBuffer_Release(&ob);
    Py_RETURN_NONE;
}
