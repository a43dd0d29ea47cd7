/* pdlite native host kernels: the wide register tile's shape, shared by packed_gemm.c (the wide conv form, pw_*)
 * and packed_fc.c (packed_fc): PW_MR rows (output channels / fc rows) by PW_NR columns (3 vectors of 16) */
#ifndef PD_NATIVE_PACKED_H
#define PD_NATIVE_PACKED_H
#define PW_MR 8
#define PW_NR 48
#endif
