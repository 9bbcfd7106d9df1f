/* Parsing and formatting helpers shared by the text forms of core types. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/text.h"

const char *ldt__skip_ws(const char *p) {
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

int ldt__parse_i64(const char *p, int64_t *out, const char **end) {
    int neg = 0;
    uint64_t v = 0;
    const char *s = p;
    if (*s == '-' || *s == '+') neg = (*s++ == '-');
    if (!isdigit((unsigned char)*s)) {
        *end = p;
        return -1;
    }
    while (isdigit((unsigned char)*s)) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -2;
        v = v * 10 + d;
        if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return -2;
        s++;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    *end = s;
    return 0;
}

void ldt__appendf(char *buf, size_t cap, size_t *pos, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(*pos < cap ? buf + *pos : NULL, *pos < cap ? cap - *pos : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *pos += (size_t)n;
}
