/* pdlite native host kernels: the depthwise conv's arguments, shared by its forms (depthwise.c: the planar forms and
 * the pick; depthwise_rows.c, depthwise_blocked.c, depthwise_short.c) */
#ifndef PD_NATIVE_DEPTHWISE_H
#define PD_NATIVE_DEPTHWISE_H
#include "common.h"

typedef struct {
    const float *x, *w, *bias;
    float *out;
    isz N, C, H, W, OC, OH, OW, KH, KW, SH, SW, DH, DW, PT, PL;
    act_t act;
} dw_args;

/* the short-map form (depthwise_short.c): whether it takes the conv, and its task over planes [begin, end) */
PD_HIDDEN int dws_applies(const dw_args *a);
PD_HIDDEN void dws_run(void *vctx, isz begin, isz end);
/* the row-vector forms (depthwise_rows.c): AVX-512 (dwr) and AVX2 (dwr8); tasks over planes [begin, end) */
PD_HIDDEN int dwr_applies(const dw_args *a);
PD_HIDDEN int dwr8_applies(const dw_args *a);
PD_HIDDEN void dwr_task(void *vctx, isz begin, isz end);
PD_HIDDEN void dwr8_task(void *vctx, isz begin, isz end);
/* the channel-blocked form (depthwise_blocked.c): its task over blocks of 16 output channels [begin, end) */
PD_HIDDEN int dwb_applies(const dw_args *a);
PD_HIDDEN void dwb_run(void *vctx, isz begin, isz end);
/* the conv a in the calling thread, in the form py_depthwise_conv2d picks (the int8 depthwise conv's float-sums form,
 * qdepthwise.c, runs it on chunks of channels inside its own parallel items) */
PD_HIDDEN void dw_run_serial(const dw_args *a);
#endif /* PD_NATIVE_DEPTHWISE_H */
