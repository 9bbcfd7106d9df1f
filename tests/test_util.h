/* Helpers shared by the tests: case counts scaled by LDT_TEST_SCALE, a seeded PRNG. */
#ifndef LDT_TESTS_TEST_UTIL_H
#define LDT_TESTS_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "ldt/core.h"

/* LDT_TEST_SCALE (default 1) scales random-case counts: the sanitizer builds lower it. */
static inline double ldt_test_scale(void) {
    const char *s = getenv("LDT_TEST_SCALE");
    double v = s ? atof(s) : 1.0;
    return v > 0 ? v : 1.0;
}

static inline int ldt_test_cases(int base) {
    int n = (int)(base * ldt_test_scale());
    return n < 1 ? 1 : n;
}

/* splitmix64: a small deterministic generator for random cases. */
static inline uint64_t ldt_test_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi]. */
static inline int64_t ldt_test_range(uint64_t *state, int64_t lo, int64_t hi) {
    return lo + (int64_t)(ldt_test_rand(state) % (uint64_t)(hi - lo + 1));
}

/* A shape from its sizes: ldt_test_shape(2, 7, 5) is [7,5]. */
static inline ldt_shape ldt_test_shape(int nd, ...) {
    ldt_shape s = {nd, {0}};
    va_list ap;
    va_start(ap, nd);
    for (int d = 0; d < nd; d++) s.dims[d] = va_arg(ap, int);
    va_end(ap);
    return s;
}

/* "[7,5]" in one of four rotating buffers, so a message can format several shapes. */
static inline const char *ldt_test_fmt_shape(const ldt_shape *s) {
    static char buf[4][96];
    static int k;
    k = (k + 1) % 4;
    ldt_shape_format(s, buf[k], sizeof buf[k]);
    return buf[k];
}

#endif
