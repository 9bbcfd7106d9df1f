/* The copy that steers clear of memcpy's slow aliased case (core/copy.h). */
#include "core/copy.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void ldt__copy_blocks(void *dst, const void *src, size_t n) {
    char *d = dst;
    const char *s = src;
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        _mm_storeu_si128((__m128i *)(void *)(d + i), a);
        _mm_storeu_si128((__m128i *)(void *)(d + i + 16), b);
        _mm_storeu_si128((__m128i *)(void *)(d + i + 32), c);
        _mm_storeu_si128((__m128i *)(void *)(d + i + 48), e);
        __asm__ volatile("" ::: "memory");
    }
#else
    for (; i + 64 <= n; i += 64) {
        memcpy(d + i, s + i, 64);
        __asm__ volatile("" ::: "memory");
    }
#endif
    if (i < n) memcpy(d + i, s + i, n - i); /* under 64 bytes: no rep movsb */
}
