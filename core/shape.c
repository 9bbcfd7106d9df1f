/* Shapes: overflow-checked element counts, parse and format. */
#include <stdio.h>

#include "core/error.h"
#include "core/text.h"

static ldt_status check_ndim(const ldt_shape *s, const char *what) {
    if (!s) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: shape must not be NULL", what);
    if (s->ndim < 0 || s->ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: shape has %d dims, expected 0 to %d", what,
                 s->ndim, LDT_MAX_DIMS);
    return LDT_OK;
}

ldt_status ldt_shape_numel(const ldt_shape *s, int64_t *out) {
    int64_t n = 1;
    char buf[256];
    LDT_CHECK(check_ndim(s, "shape"));
    for (int d = 0; d < s->ndim; d++)
        if (s->dims[d] < 0) {
            ldt_shape_format(s, buf, sizeof buf);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape %s: dim %d has negative size %lld", buf, d,
                     (long long)s->dims[d]);
        }
    for (int d = 0; d < s->ndim; d++) {
        if (s->dims[d] == 0) {
            n = 0;
            break;
        }
    }
    if (n != 0)
        for (int d = 0; d < s->ndim; d++) {
            if (__builtin_mul_overflow(n, s->dims[d], &n)) {
                ldt_shape_format(s, buf, sizeof buf);
                LDT_FAIL(LDT_ERR_OVERFLOW, "shape %s: element count exceeds 2^63-1", buf);
            }
        }
    if (out) *out = n;
    return LDT_OK;
}

ldt_status ldt_shape_nbytes(const ldt_shape *s, ldt_dtype t, int64_t *out) {
    int64_t n, b;
    char buf[256];
    size_t es = ldt_dtype_size(t);
    if (es == 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape: invalid dtype %d", (int)t);
    LDT_CHECK(ldt_shape_numel(s, &n));
    if (__builtin_mul_overflow(n, (int64_t)es, &b)) {
        ldt_shape_format(s, buf, sizeof buf);
        LDT_FAIL(LDT_ERR_OVERFLOW, "shape %s %s: byte count exceeds 2^63-1", buf,
                 ldt_dtype_name(t));
    }
    if (out) *out = b;
    return LDT_OK;
}

ldt_status ldt_shape_parse(const char *text, ldt_shape *out) {
    ldt_shape s = {0, {0}};
    const char *p;
    int bracket = 0;
    if (!text || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape: text and out must not be NULL");
    p = ldt__skip_ws(text);
    if (*p == '[' || *p == '(') {
        bracket = *p == '[' ? ']' : ')';
        p = ldt__skip_ws(p + 1);
    }
    while (*p && *p != bracket) {
        int64_t v;
        const char *end;
        int rc = ldt__parse_i64(p, &v, &end);
        if (rc == -2) LDT_FAIL(LDT_ERR_OVERFLOW, "shape '%s': a size exceeds 2^63-1", text);
        if (rc != 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "shape '%s': expected a size at '%s' (form: 7,5 or [7,5] or 7x5)", text, p);
        if (v < 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape '%s': size %lld is negative", text,
                     (long long)v);
        if (s.ndim == LDT_MAX_DIMS)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape '%s': more than %d dims", text,
                     LDT_MAX_DIMS);
        s.dims[s.ndim++] = v;
        p = ldt__skip_ws(end);
        if (*p == ',' || *p == 'x') {
            p = ldt__skip_ws(p + 1);
            if (!*p || *p == bracket)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape '%s': trailing separator", text);
        } else if (*p && *p != bracket) {
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "shape '%s': unexpected '%c', expected ',' between sizes", text, *p);
        }
    }
    if (bracket) {
        if (*p != bracket)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape '%s': missing closing '%c'", text, bracket);
        p = ldt__skip_ws(p + 1);
    }
    if (*p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shape '%s': unexpected text '%s'", text, p);
    LDT_CHECK(ldt_shape_numel(&s, NULL));
    *out = s;
    return LDT_OK;
}

int ldt_shape_format(const ldt_shape *s, char *buf, size_t cap) {
    size_t pos = 0;
    if (cap) buf[0] = '\0';
    if (!s || s->ndim < 0 || s->ndim > LDT_MAX_DIMS) {
        ldt__appendf(buf, cap, &pos, "[?]");
        return (int)pos;
    }
    ldt__appendf(buf, cap, &pos, "[");
    for (int d = 0; d < s->ndim; d++)
        ldt__appendf(buf, cap, &pos, "%s%lld", d ? "," : "", (long long)s->dims[d]);
    ldt__appendf(buf, cap, &pos, "]");
    return (int)pos;
}

int ldt_shape_equal(const ldt_shape *a, const ldt_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}
