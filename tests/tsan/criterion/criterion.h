/* A minimal stand-in for the parts of Criterion the communicator tests use, so those tests
 * run under ThreadSanitizer: Criterion itself cannot start there (its inheritable arena
 * fails to map beside TSan's shadow memory, Snaipe/Criterion issue 274). Each Test registers
 * itself; tests/tsan/main.c runs them in order; a failed assertion prints and exits 1. */
#ifndef LDT_TESTS_TSAN_CRITERION_H
#define LDT_TESTS_TSAN_CRITERION_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ldt_tsan_test {
    const char *name;
    void (*fn)(void);
} ldt_tsan_test;

void ldt_tsan_register(const char *name, void (*fn)(void));

#define Test(suite, name)                                                              \
    static void suite##_##name(void);                                                  \
    __attribute__((constructor)) static void ldt_tsan_reg_##suite##_##name(void) {     \
        ldt_tsan_register(#suite "::" #name, suite##_##name);                          \
    }                                                                                  \
    static void suite##_##name(void)

#define LDT_TSAN_FAIL(...)                                                             \
    do {                                                                               \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
        fprintf(stderr, "" __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                           \
        exit(1);                                                                       \
    } while (0)

#define cr_assert(c, ...)                                                              \
    do {                                                                               \
        if (!(c)) LDT_TSAN_FAIL("assertion failed: " #c " " __VA_ARGS__);              \
    } while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...)                                                    \
    do {                                                                               \
        if (strcmp((a), (b)) != 0) LDT_TSAN_FAIL("'%s' != '%s'", (a), (b));            \
    } while (0)

#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                             \
    cr_assert(((a) - (b) <= (eps)) && ((b) - (a) <= (eps)), __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...)                                                   \
    do {                                                                               \
        if (strcmp((a), (b)) == 0) LDT_TSAN_FAIL("'%s' == '%s'", (a), (b));            \
    } while (0)
/* cr_expect*: the stand-in stops at the first failure, as cr_assert* do */
#define cr_expect(c, ...) cr_assert(c, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) cr_assert_eq(a, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) cr_assert_neq(a, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) cr_assert_gt(a, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) cr_assert_lt(a, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) cr_assert_geq(a, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) cr_assert_leq(a, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) cr_assert_str_eq(a, b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) cr_assert_str_neq(a, b, __VA_ARGS__)
#define cr_log_info(...)                                                               \
    do {                                                                               \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fputc('\n', stderr);                                                          \
    } while (0)

#endif
