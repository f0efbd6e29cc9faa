/* Buffer-protocol helpers shared by the C sources of guidewire.grammar._native. */
#ifndef GUIDEWIRE_NATIVE_BUF_H
#define GUIDEWIRE_NATIVE_BUF_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
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
