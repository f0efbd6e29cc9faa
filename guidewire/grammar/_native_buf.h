/* Buffer-protocol helpers shared by the C sources of guidewire.grammar._native. */
#ifndef GUIDEWIRE_NATIVE_BUF_H
#define GUIDEWIRE_NATIVE_BUF_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static inline int get_buf(PyObject *obj, Buf *b, const char *name, Py_ssize_t itemsize, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    b->held = 0;
    if (PyObject_GetBuffer(obj, &b->view, flags) < 0) return -1;
    b->held = 1;
    /* integers (or bools for 1-byte items) of the right width: the format's last character */
    const char *f = b->view.format ? b->view.format : "B";
    char c = f[strlen(f) > 0 ? strlen(f) - 1 : 0];
    int ok = b->view.itemsize == itemsize && b->view.ndim <= 2;
    if (itemsize == 8) ok = ok && (c == 'q' || c == 'l' || c == 'Q' || c == 'L');
    else if (itemsize == 4) ok = ok && (c == 'i' || c == 'I' || c == 'l' || c == 'L');
    else if (itemsize == 2) ok = ok && (c == 'h' || c == 'H');
    else ok = ok && (c == '?' || c == 'B' || c == 'b');
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous array of %zd-byte integers, got format '%s'",
                     name, itemsize, f);
        return -1;
    }
    return 0;
}

static inline void release(Buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

#define LEN(b, sz) ((b).view.len / (sz))

/* qsort's comparison of int64 values, ascending (shared by the C sources). */
static inline int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Sorting int64 values ascending in place, with the comparison inlined (qsort's call through
 * cmp_i64 per comparison was most of the sorting time of a lazy lexer's rows): an introsort,
 * median-of-three quicksort on the smaller side first, insertion sort for short runs, heapsort past
 * a depth limit (so O(n log n) on any input). sort_i64_depth takes the depth limit (0: heapsort
 * alone; the tests reach that path through int_key). */
static inline void isort_i64(int64_t *v, size_t n) {
    for (size_t i = 1; i < n; i++) {
        int64_t x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) { v[j] = v[j - 1]; j--; }
        v[j] = x;
    }
}

static inline void sift_i64(int64_t *v, size_t root, size_t n) {
    int64_t x = v[root];
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n) break;
        if (c + 1 < n && v[c + 1] > v[c]) c++;
        if (v[c] <= x) break;
        v[root] = v[c];
        root = c;
    }
    v[root] = x;
}

static inline void heapsort_i64(int64_t *v, size_t n) {
    if (n < 2) return;
    for (size_t i = n / 2; i-- > 0;) sift_i64(v, i, n);
    for (size_t end = n - 1; end > 0; end--) {
        int64_t t = v[0]; v[0] = v[end]; v[end] = t;
        sift_i64(v, 0, end);
    }
}

static inline void sort_i64_depth(int64_t *v, size_t n, int depth) {
    while (n > 16) {
        if (depth-- <= 0) { heapsort_i64(v, n); return; }
        size_t mid = n / 2;   /* the median of three to v[0]: the pivot of Hoare's partition */
        int64_t a = v[0], b = v[mid], c = v[n - 1];
        size_t m = (a < b) ? ((b < c) ? mid : ((a < c) ? n - 1 : 0)) : ((a < c) ? 0 : ((b < c) ? n - 1 : mid));
        int64_t t = v[0]; v[0] = v[m]; v[m] = t;
        int64_t p = v[0];
        ptrdiff_t i = -1, j = (ptrdiff_t)n;
        for (;;) {   /* Hoare's partition with the pivot at v[0]: the split j is in [0, n - 2] */
            do j--; while (v[j] > p);
            do i++; while (v[i] < p);
            if (i >= j) break;
            t = v[i]; v[i] = v[j]; v[j] = t;
        }
        /* v[0..j] <= p <= v[j+1..n-1] */
        size_t left = (size_t)j + 1, right = n - left;
        if (left < right) { sort_i64_depth(v, left, depth); v += left; n = right; }
        else { sort_i64_depth(v + left, right, depth); n = left; }
    }
    isort_i64(v, n);
}

static inline void sort_i64(int64_t *v, size_t n) {
    int depth = 0;
    for (size_t k = n; k > 1; k >>= 1) depth += 2;
    sort_i64_depth(v, n, depth);
}

/* A tuple of ints alone can be in no reference cycle, so the tuples of ints made here leave the
 * cyclic collector at once (CPython's collector untracks such tuples too, but only once it has
 * walked them in a collection): a young collection no longer walks each new Earley set or lexer
 * state, and a dict holding only such tuples and ints is never tracked (a full collection skips
 * it). Anything but an exact tuple of exact ints is left as it is. */
static inline void untrack_int_tuple(PyObject *t) {
    if (!PyTuple_CheckExact(t) || !PyObject_GC_IsTracked(t)) return;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(t, i))) return;
    PyObject_GC_UnTrack(t);
}

/* A new tuple of the ints v[0..n), untracked by the cyclic collector; NULL with an exception set. */
static inline PyObject *int_tuple(const int64_t *v, size_t n) {
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    if (!t) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
    }
    untrack_int_tuple(t);
    return t;
}

#endif
