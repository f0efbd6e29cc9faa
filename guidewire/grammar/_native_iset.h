/* An open-addressing hash set and a growable vector of int64, shared by the C sources of
 * guidewire.grammar._native (static: each source gets its own copy of the few it uses). */
#ifndef GUIDEWIRE_NATIVE_ISET_H
#define GUIDEWIRE_NATIVE_ISET_H
#include "_native_buf.h"
#include <stdlib.h>

typedef struct {
    int64_t *slot;
    size_t cap, n;
} I64Set;      /* open addressing over int64 >= 0; -1 empty */

static inline int iset_init(I64Set *s, size_t hint) {
    size_t cap = 64;
    while (cap < hint * 2) cap <<= 1;
    s->slot = malloc(cap * sizeof(int64_t));
    if (!s->slot) return -1;
    memset(s->slot, 0xff, cap * sizeof(int64_t));
    s->cap = cap;
    s->n = 0;
    return 0;
}

static inline size_t ihash(int64_t x, size_t cap) {
    uint64_t h = (uint64_t)x * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* 1 if added, 0 if present, -1 out of memory */
static inline int iset_add(I64Set *s, int64_t x) {
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap * 2;
        int64_t *slot = malloc(cap * sizeof(int64_t));
        if (!slot) return -1;
        memset(slot, 0xff, cap * sizeof(int64_t));
        for (size_t i = 0; i < s->cap; i++) {
            int64_t v = s->slot[i];
            if (v < 0) continue;
            size_t at = ihash(v, cap);
            while (slot[at] >= 0) at = (at + 1) & (cap - 1);
            slot[at] = v;
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t at = ihash(x, s->cap);
    for (;;) {
        int64_t v = s->slot[at];
        if (v == x) return 0;
        if (v < 0) break;
        at = (at + 1) & (s->cap - 1);
    }
    s->slot[at] = x;
    s->n++;
    return 1;
}

typedef struct {
    int64_t *v;
    size_t n, cap;
} I64Vec;

static inline int ivec_push(I64Vec *a, int64_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int64_t *v = realloc(a->v, cap * sizeof(int64_t));
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}


/* the members of s in ascending order, in a new malloc'd array (NULL with MemoryError set) */
static inline int64_t *iset_sorted(const I64Set *s) {
    int64_t *all = malloc((s->n ? s->n : 1) * sizeof(int64_t));
    if (!all) { PyErr_NoMemory(); return NULL; }
    size_t k = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slot[i] >= 0) all[k++] = s->slot[i];
    sort_i64(all, k);
    return all;
}

#endif
