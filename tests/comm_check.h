/* Helpers shared by the MPI and NCCL communicator tests (plain programs run under mpirun):
 * a failure counter, every rank's input as a function of (rank, index), and the reference
 * reduction in rank order. */
#ifndef LDT_TESTS_COMM_CHECK_H
#define LDT_TESTS_COMM_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "exec/reduce.h"
#include "ldt/ldt.h"

/* per thread: the threaded NCCL test runs a rank per thread */
static _Thread_local int g_rank, g_size, g_fail;

#define CHECK(cond, ...)                                               \
    do {                                                               \
        if (!(cond)) {                                                 \
            fprintf(stderr, "rank %d: %s:%d: ", g_rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                              \
            fprintf(stderr, "\n");                                     \
            g_fail++;                                                  \
        }                                                              \
    } while (0)

#define OK(call) CHECK((call) == LDT_OK, "%s: %s", #call, ldt_last_error())

/* Rank r's element i as a double: small multiples of 1/4, exact in every float dtype. */
static inline double value(int r, int64_t i) { return (double)((r * 7 + i * 3) % 11) - 5.0 + 0.25 * (r % 3); }

static inline void put(void *buf, ldt_dtype dt, int64_t i, double v) {
    switch (dt) {
    case LDT_F32: ((float *)buf)[i] = (float)v; break;
    case LDT_F64: ((double *)buf)[i] = v; break;
    case LDT_F16: ((uint16_t *)buf)[i] = ldt__f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)buf)[i] = ldt__f32_to_bf16((float)v); break;
    case LDT_I32: ((int32_t *)buf)[i] = (int32_t)floor(v); break;
    case LDT_I64: ((int64_t *)buf)[i] = (int64_t)floor(v) * 1000000007LL; break;
    case LDT_U8: ((uint8_t *)buf)[i] = (uint8_t)(floor(v) + 5); break;
    default: ((uint8_t *)buf)[i] = ((int64_t)floor(v) & 1) != 0; break;
    }
}

static inline double get(const void *buf, ldt_dtype dt, int64_t i) {
    switch (dt) {
    case LDT_F32: return ((const float *)buf)[i];
    case LDT_F64: return ((const double *)buf)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)buf)[i]);
    case LDT_BF16: return ldt__bf16_to_f32(((const uint16_t *)buf)[i]);
    case LDT_I32: return ((const int32_t *)buf)[i];
    case LDT_I64: return (double)((const int64_t *)buf)[i];
    case LDT_U8: return ((const uint8_t *)buf)[i];
    default: return ((const uint8_t *)buf)[i];
    }
}

static inline void fill(void *buf, ldt_dtype dt, int r, int64_t off, int64_t n) {
    for (int64_t i = 0; i < n; i++) put(buf, dt, i, value(r, off + i));
}

/* The reference over members[0..k) (world ranks) of elements [off, off+n): ldt__reduce_n in
 * member order. */
static inline void *reference(const int *members, int k, ldt_dtype dt, ldt_reduce_op op, int64_t off,
                       int64_t n) {
    size_t es = ldt_dtype_size(dt);
    void *out = malloc((size_t)(n ? n : 1) * es), **srcs = malloc((size_t)k * sizeof *srcs);
    for (int m = 0; m < k; m++) {
        srcs[m] = malloc((size_t)(n ? n : 1) * es);
        fill(srcs[m], dt, members[m], off, n);
    }
    ldt__reduce_n(out, (const void *const *)srcs, k, n, dt, op);
    for (int m = 0; m < k; m++) free(srcs[m]);
    free(srcs);
    return out;
}

/* The independent figure for sum/max/min of exact small numbers (float dtypes only). */
static inline double by_hand(const int *members, int k, ldt_dtype dt, ldt_reduce_op op, int64_t i) {
    char tmp[8];
    double acc = 0;
    for (int m = 0; m < k; m++) {
        double v;
        put(tmp, dt, 0, value(members[m], i));
        v = get(tmp, dt, 0);
        if (m == 0) acc = v;
        else if (op == LDT_REDUCE_SUM || op == LDT_REDUCE_AVG) acc += v;
        else if (op == LDT_REDUCE_MAX) acc = v > acc ? v : acc;
        else acc = v < acc ? v : acc;
    }
    return op == LDT_REDUCE_AVG ? acc / k : acc;
}

#endif
