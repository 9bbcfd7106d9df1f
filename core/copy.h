/* Internal: the copy every bulk data move goes through (ldt__copy), in place of memcpy.
 *
 * glibc's memcpy (2.36, x86-64 with ERMS/FSRM) copies 2 KiB up to its non-temporal threshold
 * with `rep movsb`, and on AMD EPYC (Zen) that runs about 20x slower when the destination
 * lies 1 to 31 bytes past the source modulo 4 KiB: on a 2-core EPYC guest, copies of 4 to 256
 * KiB ran at 1.5 to 2.1 GB/s with the destination 1, 8 or 16 bytes past, and at 29 to 54
 * GB/s with it 0, 32, 64 or more bytes past (or anywhere before). Two buffers malloc'd one
 * after the other from the heap lie that way (the second starts 16 bytes of chunk header past
 * a page-multiple size), and so may a user's buffer against an arena, or one rank's against
 * another's: the same copy then took 20x longer or not by where the allocator put it. Those
 * copies go through a plain 16-byte vector loop instead, which runs as fast as memcpy at
 * every size there (34 to 50 GB/s to 256 KiB, 36 at 4 MiB); every other copy is memcpy. */
#ifndef LDT_CORE_COPY_H
#define LDT_CORE_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The copies memcpy may run slowly: n bytes or more, the destination 1 to 63 bytes past the
 * source modulo 4 KiB. */
#define LDT__COPY_ALIAS_MIN 1024

static inline int ldt__copy_aliased(const void *dst, const void *src, size_t n) {
    uintptr_t rel = ((uintptr_t)dst - (uintptr_t)src) & 4095u;
    return n >= LDT__COPY_ALIAS_MIN && rel >= 1 && rel <= 63;
}

/* The loop for those: 64 bytes an iteration. The empty asm keeps the compiler from turning
 * the loop back into a memcpy call. */
void ldt__copy_blocks(void *dst, const void *src, size_t n);

/* A copy of large results with non-temporal stores where the ISA has them (SSE2), else
 * ldt__copy; ldt__copy_stream_fence orders those stores before a barrier publishes them. */
void ldt__copy_stream(void *dst, const void *src, size_t n);
void ldt__copy_stream_fence(void);

/* memcpy(dst, src, n) for buffers that do not overlap. */
static inline void ldt__copy(void *dst, const void *src, size_t n) {
    if (ldt__copy_aliased(dst, src, n))
        ldt__copy_blocks(dst, src, n);
    else if (n)
        memcpy(dst, src, n);
}

/* memmove(dst, src, n): ldt__copy where the two do not overlap. */
static inline void ldt__move(void *dst, const void *src, size_t n) {
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d >= s + n || s >= d + n)
        ldt__copy(dst, src, n);
    else if (d != s)
        memmove(dst, src, n);
}

#endif
