/* pdlite native host kernels: the Python module (see common.h) */
#include "common.h"
#include "qint8.h" /* the int8 family (qgemm.c) */

/* ------------------------------------------------------------------------------------------------ */
/* ISA pick                                                                                         */
/* ------------------------------------------------------------------------------------------------ */

static const char *g_isa = "baseline";
PD_HIDDEN int g_shuffles16 = 0; /* common.h */
PD_HIDDEN int g_avx512 = 0;    /* common.h */
PD_HIDDEN int g_neon = 0;      /* common.h */
PD_HIDDEN int g_avx2_tiles = 0; /* common.h */

static void pick_isa(void) {
#ifdef PD_X86_DISPATCH
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    /* baseline | avx2 | avxvnni | avx512: testing and benchmarking (avxvnni: the AVX2 kernels with the int8 ones on
     * AVX-VNNI, as on CPUs with it and no AVX-512; avx2: plain AVX2 throughout) */
    const char *force = getenv("PDLITE_NATIVE_ISA");
    if (force && strcmp(force, "baseline") == 0) avx2 = avx512 = 0;
    if (force && (strcmp(force, "avx2") == 0 || strcmp(force, "avxvnni") == 0)) avx512 = 0;
    int isa = avx512 ? PD_ISA_AVX512 : (avx2 ? PD_ISA_AVX2 : PD_ISA_BASELINE);
    dw_task_pick(isa);
    dw3_task_pick(isa);
    dws2_task_pick(isa);
    dwb_task_pick(isa);
    dws_task_pick(isa);
    g_shuffles16 = isa == PD_ISA_AVX512;
    g_avx512 = isa == PD_ISA_AVX512;
    g_avx2_tiles = isa == PD_ISA_AVX2;
    ba_task_pick(isa);
    aa_task_pick(isa);
    mr_task_pick(isa);
    dc_task_pick(isa);
    i2c_task_pick(isa);
    pool_task_pick(isa);
    se_task_pick(isa);
    gemm_task_pick(isa);
    wino_in_task_pick(isa);
    wino_gemm_task_pick(isa);
    wino_out_task_pick(isa);
    wino_band_task_pick(isa);
    pk_pack_task_pick(isa);
    pk_gemm_task_pick(isa);
    pk_multi_task_pick(isa);
    fc_pack_task_pick(isa);
    fc_task_pick(isa);
    gv_task_pick(isa);
    pw_task_pick(isa);
    ln_task_pick(isa);
    sm_task_pick(isa);
    at_task_pick(isa);
    q_task_pick(isa, !(force && strcmp(force, "avx2") == 0));
    g_isa = avx512 ? "avx512" : (avx2 ? "avx2" : "baseline");
#elif defined(__aarch64__)
    /* Advanced SIMD (NEON) is part of every aarch64 CPU: the portable build is NEON code (GCC and Clang vectorise
     * with it), and the register tiles of neon.h run unless PDLITE_NATIVE_ISA=baseline (testing) */
    const char *force = getenv("PDLITE_NATIVE_ISA");
    g_neon = !(force && strcmp(force, "baseline") == 0);
    g_isa = g_neon ? "neon" : "baseline";
#endif
}

/* ------------------------------------------------------------------------------------------------ */
/* Python bindings                                                                                  */
/* ------------------------------------------------------------------------------------------------ */

PD_HIDDEN void bufs_release(pd_bufs *s) {
    while (s->n > 0) PyBuffer_Release(&s->view[--s->n]);
}

PD_HIDDEN float *bufs_take(pd_bufs *s, PyObject *obj, int writable, isz nfloats, const char *what) {
    if (s->failed) return NULL;
    Py_buffer *view = &s->view[s->n];
    if (s->n == PD_MAX_BUFS) {
        PyErr_Format(PyExc_SystemError, "%s: more than %d buffers", what, PD_MAX_BUFS);
    } else if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) == 0) {
        if (view->len == nfloats * (isz)sizeof(float)) {
            s->n++;
            return (float *)view->buf;
        }
        PyErr_Format(PyExc_ValueError, "%s: expected %zd float32 values, got a buffer of %zd bytes", what, nfloats,
                     view->len);
        PyBuffer_Release(view);
    }
    s->failed = 1;
    bufs_release(s);
    return NULL;
}

PD_HIDDEN int parse_act(int kind, PyObject *params, act_t *act) {
    act->kind = kind;
    act->a0 = act->a1 = act->a2 = 0.0f;
    if (kind < ACT_NONE || kind > ACT_GELU) {
        PyErr_Format(PyExc_ValueError, "unknown activation code %d", kind);
        return -1;
    }
    if (!PyArg_ParseTuple(params, "fff", &act->a0, &act->a1, &act->a2)) return -1;
    return 0;
}


static PyObject *py_set_num_threads(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) n = 1;
    if (n > PD_MAX_THREADS) n = PD_MAX_THREADS;
    g_threads = (int)n;
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyLong_FromLong(g_threads);
}

static PyObject *py_inject_alloc_failure(PyObject *self, PyObject *arg) {
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    __atomic_store_n(&g_fail_alloc_in, (int)(n > 0 ? n : 0), __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

/* align_offset(buffer): the float32 elements to skip from the buffer's start to a 64-byte boundary (native.py's
 * empty_aligned: a vector store or load of a row then covers one cache line, not two) */
static PyObject *py_align_offset(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uintptr_t addr = (uintptr_t)view.buf;
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)((64 - addr % 64) % 64 / sizeof(float)));
}

/* the tests' switches: *flag = truth of arg; returns the old setting */
static PyObject *set_flag(int *flag, PyObject *arg) {
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    const int before = *flag;
    *flag = on;
    return PyBool_FromLong(before);
}

static PyObject *py_set_shuffles16(PyObject *self, PyObject *arg) {
    (void)self;
    return set_flag(&g_shuffles16, arg);
}

static PyObject *py_set_depthwise_rows(PyObject *self, PyObject *arg) {
    (void)self;
    return set_flag(&g_dwr_on, arg);
}

static PyObject *py_isa(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(g_isa);
}

static PyMethodDef methods[] = {
    {"depthwise_conv2d", py_depthwise_conv2d, METH_VARARGS,
     "depthwise_conv2d(x, w, bias|None, out, (N,C,H,W,OC,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), act, (a0,a1,a2))"},
    {"bias_act", py_bias_act, METH_VARARGS, "bias_act(out, bias|None, (N,C,inner), act, (a0,a1,a2)): in place"},
    {"add_act", py_add_act, METH_VARARGS, "add_act(x, y, out, n, act, (a0,a1,a2)): out = act(x + y), n floats each"},
    {"mul_rows", py_mul_rows, METH_VARARGS, "mul_rows(x, s, out, (rows, inner)): out[r, :] = x[r, :] * s[r]"},
    {"squeeze_excitation", py_squeeze_excitation, METH_VARARGS,
     "squeeze_excitation(x, w1t (C,C1), b1|None, w2t (C1,C), b2|None, out, (N,C,C1,HW), act1, (a0,a1,a2), act2, "
     "(a0,a1,a2)): out[n,c,:] = x[n,c,:] * act2(W2 @ act1(W1 @ mean(x[n]) + b1) + b2)[c]"},
    {"direct_conv", py_direct_conv, METH_VARARGS,
     "direct_conv(x, packed w, bias|None, out, (N,C,H,W,OC,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), act, (a0,a1,a2))"},
    {"direct_conv_pack", py_direct_conv_pack, METH_VARARGS,
     "direct_conv_pack(w, out, (OC,C,KH,KW)): w in blocks of 16 output channels, innermost"},
    {"im2col", py_im2col, METH_VARARGS, "im2col(x, cols, (N,C,H,W,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL))"},
    {"pool2d", py_pool2d, METH_VARARGS, "pool2d(x, out, (NC,H,W,OH,OW,KH,KW,SH,SW,PT,PL), is_max, exclusive)"},
    {"conv_gemm", py_conv_gemm, METH_VARARGS,
     "conv_gemm(w, x, bias|None, out, (N,G,M,K,L), act, (a0,a1,a2)[, im2col geo|None[, bias_cols]]): "
     "out[n,g] = act(w[g] @ x[n,g] + bias) (bias per row, or per column with bias_cols)"},
    {"winograd_conv3x3", py_winograd_conv3x3, METH_VARARGS,
     "winograd_conv3x3(x, u (16,OC,C), bias|None, out, (N,C,H,W,OC,OH,OW,PT,PL), act, (a0,a1,a2)[, packed]): stride 1; "
     "packed: u[p] as packed_conv packs an (OC, C, 1, 1) filter"},
    {"packed_fc", py_packed_fc, METH_VARARGS,
     "packed_fc(x (M,K), packed w, bias (N)|None, out (M,N), (M,K,N), act, (a0,a1,a2)): act(x @ w + bias)"},
    {"packed_gemv", py_packed_gemv, METH_VARARGS,
     "packed_gemv(x (M,K), packed w, bias (N)|None, out (M,N), (M,K,N), act, (a0,a1,a2)): packed_fc's result, "
     "row by row as matrix-vector products (few rows)"},
    {"winograd_pass_tiles", py_winograd_pass_tiles, METH_VARARGS,
     "winograd_pass_tiles(n, oh, ow): the tile columns of winograd_conv3x3's widest pass over that batch"},
    {"packed_conv", py_packed_conv, METH_VARARGS,
     "packed_conv(x, packed w, bias|None, out, (N,C,H,W,M,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), act, (a0,a1,a2)[, wide])"},
    {"layer_norm", py_layer_norm, METH_VARARGS,
     "layer_norm(x, scale|None, bias|None, y, mean|None, var|None, (rows, cols), eps[, residual]): over each row (of "
     "x + residual)"},
    {"softmax", py_softmax, METH_VARARGS, "softmax(x, y, (rows, cols)): over each row"},
    {"attention", py_attention, METH_VARARGS,
     "attention(x, out, (B, S, H, D), alpha): per head softmax(alpha q k^T) v of x (B, S, 3HD) into out (B, S, HD)"},
    {"qgemm_info", py_qgemm_info, METH_VARARGS,
     "qgemm_info([M, K]): (int8 format vnni|avx2|baseline, columns stored + 128, rows per block, packed bytes of M x K)"},
    {"qpack_weights", py_qpack_weights, METH_VARARGS, "qpack_weights(w int8 (M,K), out bytes, (M,K))"},
    {"qconv", py_qconv, METH_VARARGS,
     "qconv(x, packed w, comp|None, mul, bias|None, out, (N,C,H,W,M,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), (k,s,rt), act, "
     "(a0,a1,a2)[, res|None[, trans[, ((k,s,rt), qmax)|None]]]): int8 conv / fc with exact int32 sums (trans: fc's "
     "(L, M) output; the last tuple: the outputs quantized then dequantized)"},
    {"qdwconv", py_qdwconv, METH_VARARGS,
     "qdwconv(x, w int8 (C,KH*KW), comp, mul, bias|None, out, (N,C,H,W,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), (k,s,rt), act, "
     "(a0,a1,a2)[, res|None[, ((k,s,rt), qmax)|None[, chain|None]]]): int8 depthwise conv, exact int32 sums"},
    {"qstemconv", py_qstemconv, METH_VARARGS,
     "qstemconv(x, w int8 (M,C*KH*KW), comp, mul, bias|None, out, (N,C,H,W,M,OH,OW,KH,KW,SH,SW,DH,DW,PT,PL), (k,s,rt), "
     "act, (a0,a1,a2)[, res|None[, ((k,s,rt), qmax)|None[, chain|None[, xcodes[, codes_out, (k,s,rt)]]]]]): int8 conv "
     "of few input channels in the depthwise window form (vnni), exact int32 sums"},
    {"qstem_applies", py_qstem_applies, METH_VARARGS,
     "qstem_applies((C,KH,KW,SH,SW,DH,DW)): whether qstemconv runs that geometry in this process"},
    {"qdq", py_qdq, METH_VARARGS, "qdq(x, out, n, (k,s,rt), qmax): quantize_linear then dequantize_linear"},
    {"qchain", py_qchain, METH_VARARGS, "qchain(x, out, (N,C,S), program float32): a pointwise chain per channel"},
    {"set_sgemm", py_set_sgemm, METH_VARARGS, "set_sgemm(address of cblas_sgemm, ilp64)"},
    {"has_sgemm", py_has_sgemm, METH_NOARGS, "whether conv_gemm has an sgemm"},
    {"set_num_threads", py_set_num_threads, METH_O, "set the threads per kernel call (caller included)"},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "the threads per kernel call"},
    {"align_offset", py_align_offset, METH_O, "align_offset(buffer): float32 elements to its next 64-byte boundary"},
    {"isa", py_isa, METH_NOARGS, "the instruction set the kernels run with: baseline, avx2, avx512 (x86-64) or neon (aarch64)"},
    {"_set_depthwise_rows", py_set_depthwise_rows, METH_O,
     "tests: use the depthwise kernel's row-vector form (stride 1, 3x3 stride 2; default: on; it runs only with "
     "AVX-512); returns the old setting"},
    {"_set_shuffles16", py_set_shuffles16, METH_O,
     "tests: use the forms built on 16-lane shuffles (the channel-blocked depthwise on small maps, packed_conv's "
     "vector write-out, the 3x3 stride-2 max pool's column taps; default: with AVX-512); returns the old setting"},
    {"_set_qdw_integer", py_set_qdw_integer, METH_O,
     "tests: the int8 depthwise conv's integer window form (vnni only): 0 off (the float-sums form), 1 where it "
     "applies and pays (default), 2 wherever it applies; returns the old setting"},
    {"_ranges_trace", py_ranges_trace, METH_VARARGS,
     "tests: _ranges_trace(n, grain, slow_us) runs parallel_ranges over n items, the calling thread spending slow_us "
     "on each of its own; returns (times each item ran, whether the calling thread ran it)"},
    {"_inject_alloc_failure", py_inject_alloc_failure, METH_O,
     "tests: the n-th next task scratch allocation fails (0: none); the call it belongs to raises MemoryError"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "pdlite host native kernels", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    static int atfork_done = 0;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, pool_after_fork_child);
        atfork_done = 1;
        pick_isa();
        const char *spin = getenv("PDLITE_NATIVE_SPIN_US");
        if (spin && *spin) g_spin_ns = atol(spin) * 1000L;
    }
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "SOURCE_HASH", PD_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
