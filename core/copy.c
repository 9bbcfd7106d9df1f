/* The copy that steers clear of memcpy's slow aliased case (core/copy.h). */
#include "core/copy.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* 64 bytes an iteration, loaded unaligned, stored plainly or (nt) non-temporally, the
 * destination then 16-byte aligned; the rest by memcpy (under 64 bytes: no rep movsb). The
 * empty asm keeps the compiler from turning the loop back into a memcpy call. */
static inline void blocks(char *d, const char *s, size_t n, int nt) {
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        if (nt) {
            _mm_stream_si128((__m128i *)(void *)(d + i), a);
            _mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
            _mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
            _mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
        } else {
            _mm_storeu_si128((__m128i *)(void *)(d + i), a);
            _mm_storeu_si128((__m128i *)(void *)(d + i + 16), b);
            _mm_storeu_si128((__m128i *)(void *)(d + i + 32), c);
            _mm_storeu_si128((__m128i *)(void *)(d + i + 48), e);
        }
        __asm__ volatile("" ::: "memory");
    }
#else
    (void)nt;
    for (; i + 64 <= n; i += 64) {
        memcpy(d + i, s + i, 64);
        __asm__ volatile("" ::: "memory");
    }
#endif
    if (i < n) memcpy(d + i, s + i, n - i);
}

void ldt__copy_blocks(void *dst, const void *src, size_t n) { blocks(dst, src, n, 0); }

void ldt__copy_stream(void *dst, const void *src, size_t n) {
#if defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    blocks(d + head, s + head, n - head, 1);
#else
    ldt__copy(dst, src, n);
#endif
}

void ldt__copy_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
