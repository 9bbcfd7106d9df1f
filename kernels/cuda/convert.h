/* CUDA dtype conversion between f32 and f16/bf16 (the same rounding as core/half.h). */
#ifndef LDT_KERNELS_CUDA_CONVERT_H
#define LDT_KERNELS_CUDA_CONVERT_H

#include "ldt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Converts n elements of host array src (dtype from) into host array dst (dtype to) on the
 * current GPU: f32 -> f16/bf16 or f16/bf16 -> f32. LDT_ERR_UNSUPPORTED without a device. */
ldt_status ldt__cuda_convert_host(const void *src, ldt_dtype from, void *dst, ldt_dtype to,
                                  int64_t n);

#ifdef __cplusplus
}
#endif
#endif
