/* Chunked bump allocator (see arena.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"

struct ldt__arena_chunk {
    ldt__arena_chunk *next;
    size_t size;        /* usable bytes after the header */
    _Alignas(16) char data[];
};

void ldt__arena_init(ldt__arena *a, size_t chunk_size) {
    memset(a, 0, sizeof *a);
    a->chunk_size = chunk_size < 4096 ? 4096 : chunk_size;
}

static ldt__arena_chunk *take_chunk(ldt__arena *a, size_t need) {
    ldt__arena_chunk **pp = &a->spare, *c;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->size >= need) {
            c = *pp;
            *pp = c->next;
            return c;
        }
    {
        size_t size = need > a->chunk_size ? need : a->chunk_size;
        c = malloc(sizeof *c + size);
        if (!c) return NULL;
        c->size = size;
        return c;
    }
}

void *ldt__arena_alloc(ldt__arena *a, size_t size) {
    void *p = ldt__arena_alloc_raw(a, size);
    if (p) memset(p, 0, size);
    return p;
}

void *ldt__arena_alloc_raw(ldt__arena *a, size_t size) {
    char *p;
    size = (size + 15) & ~(size_t)15;
    if ((size_t)(a->end - a->cur) < size || !a->cur) {
        ldt__arena_chunk *c = take_chunk(a, size);
        if (!c) return NULL;
        c->next = a->head;
        a->head = c;
        a->cur = c->data;
        a->end = c->data + c->size;
    }
    p = a->cur;
    a->cur += size;
    return p;
}

void ldt__arena_reset(ldt__arena *a) {
    while (a->head) {
        ldt__arena_chunk *c = a->head;
        a->head = c->next;
        c->next = a->spare;
        a->spare = c;
    }
    a->cur = a->end = NULL;
}

void ldt__arena_destroy(ldt__arena *a) {
    ldt__arena_reset(a);
    while (a->spare) {
        ldt__arena_chunk *c = a->spare;
        a->spare = c->next;
        free(c);
    }
}
