/* A bump allocator in chunks: many small objects with one owner, freed all at once. */
#ifndef LDT_CORE_ARENA_H
#define LDT_CORE_ARENA_H

#include <stddef.h>

typedef struct ldt__arena_chunk ldt__arena_chunk;

typedef struct ldt__arena {
    ldt__arena_chunk *head; /* chunk being filled; older ones follow */
    ldt__arena_chunk *spare; /* chunks kept by reset, reused before allocating */
    char *cur, *end;
    size_t chunk_size;
} ldt__arena;

void ldt__arena_init(ldt__arena *a, size_t chunk_size);
/* Zeroed memory of `size` bytes aligned to 16; NULL when out of memory. */
void *ldt__arena_alloc(ldt__arena *a, size_t size);
/* The same, not zeroed (for objects the caller fills entirely). */
void *ldt__arena_alloc_raw(ldt__arena *a, size_t size);

/* ldt__arena_alloc_raw inlined for the common case that the current chunk has room: the
 * trace records every node through here. */
static inline void *ldt__arena_alloc_fast(ldt__arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (a->cur && (size_t)(a->end - a->cur) >= size) {
        void *p = a->cur;
        a->cur += size;
        return p;
    }
    return ldt__arena_alloc_raw(a, size);
}
/* Frees every object; the chunks are kept for reuse. */
void ldt__arena_reset(ldt__arena *a);
void ldt__arena_destroy(ldt__arena *a);

#endif
