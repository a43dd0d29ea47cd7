/* pdlite native host kernels: the int8 family's shared declarations (qgemm.c, qdirect.c, qchain.c; internals in
 * qgemm.h and qquant.h; see docs/quantization.md)
 *
 *   qconv   int8 conv (one group: 1x1, im2col) and fc: the float input quantized as Paddle's quantize_linear into
 *           packed columns, exact int32 sums of int8 x int8 products (AVX512-VNNI, AVX-VNNI, AVX2 vpmaddwd, plain
 *           C), then out = act(float(sum) * mul[m] + bias[m] (+ residual)) in float32
 *   qdwconv int8 depthwise conv (qdepthwise.c): the same quantization, sums and epilogue per channel plane
 *   qdq     Paddle's quantize_linear then dequantize_linear of a float tensor in one pass
 *   qchain  a pointwise chain (adds of per-channel parameters, scales, activations, QDQ) in one pass (qchain.c); the
 *           int8 conv runs its output's chain in its epilogue
 */
#ifndef PD_NATIVE_QINT8_H
#define PD_NATIVE_QINT8_H
#include "common.h"

typedef uint32_t q_v16u __attribute__((vector_size(64)));

/* how a float is quantized: q = clip(round_half_even(k * x), -128, 127) (rt 0) or round_half_away(k * clip(x, -s, s))
 * (rt 1); k = qmax * inverse(s) as Paddle computes it in float32 (Python passes it) */
typedef struct {
    float k, s;
    int rt;
} q_param;

/* int8 codes between ops: a tensor of bytes q + 128 (uint8), q = quantize_linear(x) with the scale of the reading op's
 * in_scale (its attribute): a producer writes them instead of its float output (`codes` below, quantized with `cq`
 * after its whole epilogue), a reader packs them instead of quantizing floats (`xc`) */
#define Q_RT_CODES 2 /* the packers' "round type" for an input of codes (bytes read as they are) */

/* a quantize -> dequantize of outputs: y = (q(x) * s) / qmax; recip: the division may run as y1 = p r, y1 + (p - y1
 * qmax) r with two FMAs (r = 1 / qmax), checked to give the quotient's bits on every code at this scale (q_out_init) */
typedef struct {
    q_param qp;
    float qmax;
    int on;
    int recip;
    float r;
} q_out;
/* oq->on = 1, and recip set where the FMA form of the division is exact on all 256 codes (qquant.h) */
PD_HIDDEN void q_out_init(q_out *oq);

/* buffers of any element type, sizes checked in bytes (common.h's pd_bufs counts float32 values) */
#define Q_MAX_BUFS 8
typedef struct {
    Py_buffer view[Q_MAX_BUFS];
    int n, failed;
} q_bufs;
PD_HIDDEN void *qbufs_take(q_bufs *s, PyObject *obj, int writable, isz nbytes, const char *what);
PD_HIDDEN void qbufs_release(q_bufs *s);
/* qconv's and qdwconv's optional codes arguments: xcodes (the input is codes), codes_out (uint8, N*M*L bytes) and its
 * (k, s, rt); *out then NULL-able. -1 with a Python error */
PD_HIDDEN int q_parse_codes_out(PyObject *cqo, q_param *cq);

/* a pointwise chain (qchain.c): steps applied to each channel's row in order */
enum { Q_STEP_ADD_C = 1, Q_STEP_SCALE = 2, Q_STEP_ACT = 3, Q_STEP_QDQ = 4 };
#define Q_MAX_STEPS 16
typedef struct {
    int code, after;
    float a, b;
    act_t act;
    q_out oq;
    const float *vec; /* add_c: one value per channel */
} q_step;
typedef struct {
    int n;
    int nrun; /* the steps q_chain_row runs: n, or lut_at where the table finishes the chain (q_chain_lut) */
    int regs; /* every step runs in vector registers (activations of act_in_regs, QDQs of round type 0) */
    int lut_at; /* q_chain_lut: from this QDQ step on, the chain and the output's codes are lut[its code], or -1 */
    uint8_t lut[256];
    q_step s[Q_MAX_STEPS];
} q_chain;
/* parse a chain's program (float32 values, qchain.c) for `channels` channels; -1 with a Python error when malformed */
PD_HIDDEN int q_chain_parse(const float *prog, isz len, isz channels, q_chain *c);
/* a chain whose output becomes codes quantized with cq: its table where the chain allows one (c->lut_at >= 0) */
PD_HIDDEN void q_chain_lut(q_chain *c, const q_param *cq);
extern PD_HIDDEN void (*q_chain_row)(float *o, isz n, isz ch, const q_chain *c);
PD_HIDDEN void q_chain_pick(int isa);
PD_HIDDEN PyObject *py_qchain(PyObject *self, PyObject *args);

/* module.c's pick_isa: the int8 format (vnni / avxvnni / avx2 / baseline); avxvnni 0 where AVX2 is forced */
PD_HIDDEN void q_task_pick(int isa, int avxvnni);
PD_HIDDEN const char *q_isa_name(void);
PD_HIDDEN PyObject *py_qgemm_info(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_qpack_weights(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_qconv(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_qdq(PyObject *self, PyObject *args);
PD_HIDDEN PyObject *py_qdwconv(PyObject *self, PyObject *args); /* qdepthwise.c */
PD_HIDDEN void q_dw_pick(int isa);
PD_HIDDEN PyObject *py_qstemconv(PyObject *self, PyObject *args);     /* qstem.c */
PD_HIDDEN PyObject *py_qstem_applies(PyObject *self, PyObject *args); /* qstem.c */
PD_HIDDEN PyObject *py_set_qdw_integer(PyObject *self, PyObject *arg); /* qdepthwise.c, tests' hook */

#endif /* PD_NATIVE_QINT8_H */
