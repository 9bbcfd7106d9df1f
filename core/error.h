/* Internal error reporting: set the thread-local message, and CHECK macros that return or
 * jump while recording file:line, so an error carries a trail of where it passed. */
#ifndef LDT_CORE_ERROR_H
#define LDT_CORE_ERROR_H

#include "ldt/core.h"

#if defined(__GNUC__)
#define LDT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LDT__PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the thread's last error to the formatted message, resets the trail, returns st. */
ldt_status ldt__error(ldt_status st, const char *fmt, ...) LDT__PRINTF(2, 3);
/* Prefixes the thread's current message with "<prefix>: ", returns st. */
ldt_status ldt__error_prefix(ldt_status st, const char *fmt, ...) LDT__PRINTF(2, 3);
/* Appends "file:line" to the trail, returns st. */
ldt_status ldt__trace(ldt_status st, const char *file, int line);
/* Replaces the thread's message and trail (to carry a rank's error to the caller). */
void ldt__error_set_raw(const char *msg, const char *trace);

#ifdef __cplusplus
}
#endif

/* Sets the error and returns it from the enclosing function. */
#define LDT_FAIL(st, ...) return ldt__trace(ldt__error((st), __VA_ARGS__), __FILE__, __LINE__)

#define LDT_CHECK(call)                                                  \
    do {                                                                 \
        ldt_status ldt__st = (call);                                     \
        if (ldt__st != LDT_OK) return ldt__trace(ldt__st, __FILE__, __LINE__); \
    } while (0)

/* Needs `ldt_status st;` and a `fail:` label in scope. */
#define LDT_CHECK_GOTO(call)                                             \
    do {                                                                 \
        st = (call);                                                     \
        if (st != LDT_OK) {                                              \
            ldt__trace(st, __FILE__, __LINE__);                          \
            goto fail;                                                   \
        }                                                                \
    } while (0)

#define LDT_FAIL_GOTO(code, ...)                                         \
    do {                                                                 \
        st = ldt__trace(ldt__error((code), __VA_ARGS__), __FILE__, __LINE__); \
        goto fail;                                                       \
    } while (0)

#endif
