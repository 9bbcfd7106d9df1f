/* Status names and hints from the one X-macro table, and the thread-local error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

#define LDT__ERRMSG_CAP 1024
#define LDT__TRACE_CAP 512

static _Thread_local char tl_msg[LDT__ERRMSG_CAP];
static _Thread_local char tl_trace[LDT__TRACE_CAP];

static ldt_status set_error_v(ldt_status st, const char *fmt, va_list ap) {
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    tl_trace[0] = '\0';
    return st;
}

const char *ldt_status_name(ldt_status s) {
    switch (s) {
#define LDT__NAME_CASE(sfx, val, name, hint) \
    case LDT_##sfx: return name;
        LDT_STATUS_MAP(LDT__NAME_CASE)
#undef LDT__NAME_CASE
    }
    return "unknown status";
}

const char *ldt_status_hint(ldt_status s) {
    switch (s) {
#define LDT__HINT_CASE(sfx, val, name, hint) \
    case LDT_##sfx: return hint;
        LDT_STATUS_MAP(LDT__HINT_CASE)
#undef LDT__HINT_CASE
    }
    return "unknown status code";
}

const char *ldt_last_error(void) { return tl_msg; }
const char *ldt_last_error_trace(void) { return tl_trace; }

ldt_status ldt_set_error(ldt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error_v(st, fmt, ap);
    va_end(ap);
    return st;
}

void ldt_clear_error(void) {
    tl_msg[0] = '\0';
    tl_trace[0] = '\0';
}

ldt_status ldt__error(ldt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error_v(st, fmt, ap);
    va_end(ap);
    return st;
}

ldt_status ldt__error_prefix(ldt_status st, const char *fmt, ...) {
    char prefix[256];
    char old[LDT__ERRMSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tl_msg, sizeof old);
    {
        /* prefix first, then as much of the old message as fits */
        size_t n = strlen(prefix), m = strlen(old);
        if (n > sizeof tl_msg - 3) n = sizeof tl_msg - 3;
        memcpy(tl_msg, prefix, n);
        tl_msg[n] = ':';
        tl_msg[n + 1] = ' ';
        if (m > sizeof tl_msg - n - 3) m = sizeof tl_msg - n - 3;
        memcpy(tl_msg + n + 2, old, m);
        tl_msg[n + 2 + m] = '\0';
    }
    return st;
}

ldt_status ldt__trace(ldt_status st, const char *file, int line) {
    size_t used = strlen(tl_trace);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (used + 1 < sizeof tl_trace)
        snprintf(tl_trace + used, sizeof tl_trace - used, "%s%s:%d", used ? " <- " : "", base,
                 line);
    return st;
}

void ldt__error_set_raw(const char *msg, const char *trace) {
    snprintf(tl_msg, sizeof tl_msg, "%s", msg ? msg : "");
    snprintf(tl_trace, sizeof tl_trace, "%s", trace ? trace : "");
}
