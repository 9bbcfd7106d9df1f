/* LDT_API marks the public API: the library is built with hidden visibility, so these
 * declarations are all that liblazydt.so exports (tests/test_surface.c checks it). */
#ifndef LDT_EXPORT_H
#define LDT_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define LDT_API __attribute__((visibility("default")))
#else
#define LDT_API
#endif

#endif
