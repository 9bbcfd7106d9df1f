/* Internal helpers for parsing the text forms of shapes, meshes and placements. */
#ifndef LDT_CORE_TEXT_H
#define LDT_CORE_TEXT_H

#include <stdint.h>

const char *ldt__skip_ws(const char *p);
/* Parses a decimal int64 (optional sign) at p; sets *end past it. 0 on success, -1 when no
 * digits, -2 on overflow. */
int ldt__parse_i64(const char *p, int64_t *out, const char **end);
/* Appends to buf at *pos (snprintf rules: *pos grows by what was needed even past cap). */
void ldt__appendf(char *buf, size_t cap, size_t *pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
