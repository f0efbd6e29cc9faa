/* guidewire.grammar._native: the closure of an Earley set's core and its split by next symbol.
 *
 * Items are ints (earley.EarleyAutomaton): (origin + 1) << shift | dotted, where the dotted rules
 * of every rule are numbered consecutively, so advancing the dot adds 1. nxt[dotted] is the
 * symbol after the dot (-1 at a rule's end), lhs[dotted] the rule's left-hand side, and
 * nullable[sym] whether a symbol derives the empty string. Terminals are 0..T-1.
 *
 * earley_close(kernel, predicts, nxt, lhs, nullable, T, shift, n_sym, advanced, advanced_fn, limit)
 *     -> (core, predicted) or None
 *
 * The core grown from kernel: a nonterminal after a dot is predicted (and stepped over when
 * nullable), a completed item (lhs, origin o) adds the items of set o waiting for lhs, advanced
 * over it, once per (lhs, o): advanced[(o + 1) * n_sym + lhs], made by advanced_fn(o, lhs) and
 * stored there on a miss. core is the sorted tuple of item codes, predicted the frozenset of
 * nonterminals predicted (predicts included). None: more than limit items.
 *
 * earley_predict(closures, nxt, lhs, T, shift, start) -> (items, waiting, by_terminal, terminals, accepts_start):
 * the same for a set's predicted part (see below).
 *
 * earley_split(core, nxt, lhs, T, shift, start, done) -> (waiting, by_terminal, terminals, accepting)
 *
 * The core by the symbol after each item's dot: waiting[sym] the items before a nonterminal sym,
 * advanced over it (tuples), by_terminal[t] the items before terminal t (tuples), terminals
 * those t in order of first appearance, accepting whether an item completes `start` with origin
 * code `done` ((initial set + 1) << shift).
 *
 * The reference is earley.EarleyAutomaton's Python path; the tests run both.
 */
#include "_native_buf.h"
#include <stdlib.h>

typedef struct {
    int64_t *slot;
    size_t cap, n;
} I64Set;      /* open addressing over int64 >= 0; -1 empty */

static int iset_init(I64Set *s, size_t hint) {
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
static int iset_add(I64Set *s, int64_t x) {
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

static int ivec_push(I64Vec *a, int64_t x) {
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

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* the members of s in ascending order, in a new malloc'd array (NULL with MemoryError set) */
static int64_t *iset_sorted(const I64Set *s) {
    int64_t *all = malloc((s->n ? s->n : 1) * sizeof(int64_t));
    if (!all) { PyErr_NoMemory(); return NULL; }
    size_t k = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slot[i] >= 0) all[k++] = s->slot[i];
    qsort(all, k, sizeof(int64_t), cmp_i64);
    return all;
}

/* a new tuple of the ints v[0..n), untracked by the cyclic collector */
static PyObject *int_tuple(const int64_t *v, size_t n) {
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

/* add x to items (and the agenda) if new; -1 on error */
static inline int grow(I64Set *items, I64Vec *agenda, int64_t x) {
    int r = iset_add(items, x);
    if (r < 0) return -1;
    if (r && ivec_push(agenda, x) < 0) return -1;
    return 0;
}

PyObject *native_earley_close(PyObject *self, PyObject *args) {
    PyObject *o_kernel, *o_predicts, *o_nxt, *o_lhs, *o_null, *advanced, *advanced_fn;
    long long T, shift, n_sym, limit;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOLLLO!OL", &o_kernel, &o_predicts, &o_nxt, &o_lhs, &o_null, &T, &shift, &n_sym,
                          &PyDict_Type, &advanced, &advanced_fn, &limit))
        return NULL;
    Buf nxt = {0}, lhs = {0}, nul = {0};
    I64Set items = {0}, completed = {0}, predicted = {0};
    I64Vec agenda = {0};
    PyObject *result = NULL, *kernel = NULL, *predicts = NULL, *core = NULL, *pred = NULL;
    if (get_buf(o_nxt, &nxt, "nxt", 4, 0) || get_buf(o_lhs, &lhs, "lhs", 4, 0) || get_buf(o_null, &nul, "nullable", 1, 0))
        goto done;
    Py_ssize_t n_dotted = LEN(nxt, 4);
    if (LEN(lhs, 4) != n_dotted || LEN(nul, 1) < n_sym || shift < 1 || shift > 40 || n_sym < T || T < 0 ||
        ((long long)1 << shift) < n_dotted) {
        PyErr_SetString(PyExc_ValueError, "earley_close: array sizes do not match");
        goto done;
    }
    const int32_t *NXT = nxt.view.buf, *LHS = lhs.view.buf;
    const uint8_t *NUL = nul.view.buf;
    const int64_t mask = ((int64_t)1 << shift) - 1;
    kernel = PySequence_Fast(o_kernel, "earley_close: kernel must be a sequence");
    if (!kernel) goto done;
    predicts = PySequence_Fast(o_predicts, "earley_close: predicts must be a sequence");
    if (!predicts) goto done;
    Py_ssize_t nk = PySequence_Fast_GET_SIZE(kernel);
    if (iset_init(&items, (size_t)nk * 4 + 16) || iset_init(&completed, 64) || iset_init(&predicted, 64)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(predicts); i++) {
        long long p = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(predicts, i));
        if (p == -1 && PyErr_Occurred()) goto done;
        if (p < 0) { PyErr_SetString(PyExc_ValueError, "earley_close: a negative symbol"); goto done; }
        if (iset_add(&predicted, p) < 0) { PyErr_NoMemory(); goto done; }
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        long long it = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(kernel, i));
        if (it == -1 && PyErr_Occurred()) goto done;
        if (it < 0 || (it & mask) >= n_dotted) { PyErr_SetString(PyExc_ValueError, "earley_close: a bad item"); goto done; }
        if (grow(&items, &agenda, it) < 0) { PyErr_NoMemory(); goto done; }
    }
    while (agenda.n) {
        int64_t it = agenda.v[--agenda.n];
        int64_t dotted = it & mask;
        int64_t sym = NXT[dotted];
        if (sym >= T) {
            if (sym >= n_sym) { PyErr_SetString(PyExc_ValueError, "earley_close: a symbol out of range"); goto done; }
            if (iset_add(&predicted, sym) < 0) { PyErr_NoMemory(); goto done; }
            if (NUL[sym] && grow(&items, &agenda, it + 1) < 0) { PyErr_NoMemory(); goto done; }   /* dotted + 1: this rule's next position */
        } else if (sym < 0) {
            int64_t l = LHS[dotted];
            int64_t origin = it >> shift;        /* origin + 1 */
            int64_t ck = origin * n_sym + l;
            int r = iset_add(&completed, ck);
            if (r < 0) { PyErr_NoMemory(); goto done; }
            if (!r) continue;
            PyObject *key = PyLong_FromLongLong(ck);
            if (!key) goto done;
            PyObject *moved = PyDict_GetItemWithError(advanced, key);   /* borrowed */
            if (moved) {
                Py_INCREF(moved);
            } else if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            } else {
                moved = PyObject_CallFunction(advanced_fn, "LL", (long long)(origin - 1), (long long)l);
                if (moved) untrack_int_tuple(moved);
                if (!moved || PyDict_SetItem(advanced, key, moved) < 0) {
                    Py_XDECREF(moved);
                    Py_DECREF(key);
                    goto done;
                }
            }
            Py_DECREF(key);
            PyObject *seq = PySequence_Fast(moved, "earley_close: advanced items must be a sequence");
            Py_DECREF(moved);
            if (!seq) goto done;
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
                long long it2 = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
                if ((it2 == -1 && PyErr_Occurred())) { Py_DECREF(seq); goto done; }
                if (it2 < 0 || (it2 & mask) >= n_dotted) {
                    Py_DECREF(seq);
                    PyErr_SetString(PyExc_ValueError, "earley_close: a bad advanced item");
                    goto done;
                }
                if (grow(&items, &agenda, it2) < 0) { Py_DECREF(seq); PyErr_NoMemory(); goto done; }
            }
            Py_DECREF(seq);
            if ((long long)items.n > limit) { result = Py_None; Py_INCREF(result); goto done; }
        }
    }
    /* the core, sorted */
    int64_t *all = iset_sorted(&items);
    if (!all) goto done;
    core = int_tuple(all, items.n);
    free(all);
    if (!core) goto done;
    pred = PyFrozenSet_New(NULL);
    if (!pred) goto done;
    for (size_t i = 0; i < predicted.cap; i++) {
        if (predicted.slot[i] < 0) continue;
        PyObject *v = PyLong_FromLongLong(predicted.slot[i]);
        if (!v || PySet_Add(pred, v) < 0) { Py_XDECREF(v); goto done; }
        Py_DECREF(v);
    }
    result = PyTuple_Pack(2, core, pred);
done:
    Py_XDECREF(core);
    Py_XDECREF(pred);
    Py_XDECREF(kernel);
    Py_XDECREF(predicts);
    free(items.slot); free(completed.slot); free(predicted.slot); free(agenda.v);
    release(&nxt); release(&lhs); release(&nul);
    return result;
}

/* append v to the list under key sym in d (made if missing); -1 on error */
static int dict_append(PyObject *d, int64_t sym, int64_t v) {
    PyObject *key = PyLong_FromLongLong(sym);
    if (!key) return -1;
    PyObject *lst = PyDict_GetItemWithError(d, key);
    if (!lst) {
        if (PyErr_Occurred()) { Py_DECREF(key); return -1; }
        lst = PyList_New(0);
        if (!lst || PyDict_SetItem(d, key, lst) < 0) { Py_XDECREF(lst); Py_DECREF(key); return -1; }
        Py_DECREF(lst);   /* the dict holds it */
    }
    Py_DECREF(key);
    PyObject *x = PyLong_FromLongLong(v);
    if (!x) return -1;
    int r = PyList_Append(lst, x);
    Py_DECREF(x);
    return r;
}

/* a new dict of d's keys, each list value made an untracked tuple of ints (so the dict is
 * never tracked either); NULL on error */
static PyObject *as_tuples(PyObject *d) {
    PyObject *out = PyDict_New(), *key, *value;
    Py_ssize_t pos = 0;
    if (!out) return NULL;
    while (PyDict_Next(d, &pos, &key, &value)) {
        PyObject *t = PyList_AsTuple(value);
        if (!t) { Py_DECREF(out); return NULL; }
        untrack_int_tuple(t);
        int r = PyDict_SetItem(out, key, t);
        Py_DECREF(t);
        if (r < 0) { Py_DECREF(out); return NULL; }
    }
    return out;
}

/* (waiting, by_terminal, terminals, accepting) of the items its[0..n) (see earley_split) */
static PyObject *split_items(const int64_t *its, Py_ssize_t n, const int32_t *NXT, const int32_t *LHS, Py_ssize_t n_dotted,
                             long long T, int64_t mask, long long start, long long done_code) {
    PyObject *waiting = PyDict_New(), *by_terminal = PyDict_New(), *terms = PyList_New(0), *result = NULL;
    if (!waiting || !by_terminal || !terms) goto done;
    int accepting = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t it = its[i];
        if (it < 0 || (it & mask) >= n_dotted) { PyErr_SetString(PyExc_ValueError, "earley_split: a bad item"); goto done; }
        int64_t sym = NXT[it & mask];
        if (sym >= T) {
            if (dict_append(waiting, sym, it + 1) < 0) goto done;
        } else if (sym >= 0) {
            PyObject *key = PyLong_FromLongLong(sym);
            if (!key) goto done;
            int had = PyDict_Contains(by_terminal, key);
            if (had < 0 || (!had && PyList_Append(terms, key) < 0)) { Py_DECREF(key); goto done; }
            Py_DECREF(key);
            if (dict_append(by_terminal, sym, it) < 0) goto done;
        } else if (LHS[it & mask] == start && (it & ~mask) == done_code) {
            accepting = 1;
        }
    }
    PyObject *w = as_tuples(waiting), *b = w ? as_tuples(by_terminal) : NULL;
    if (!b) { Py_XDECREF(w); goto done; }
    result = Py_BuildValue("(NNON)", w, b, terms, PyBool_FromLong(accepting));
done:
    Py_XDECREF(waiting);
    Py_XDECREF(by_terminal);
    Py_XDECREF(terms);
    return result;
}

/* the dotted-rule arrays nxt and lhs (int32, one length, within 1 << shift); -1 with an error set */
static int dotted_arrays(PyObject *o_nxt, PyObject *o_lhs, Buf *nxt, Buf *lhs, long long shift, const char *name,
                         Py_ssize_t *n_dotted) {
    if (get_buf(o_nxt, nxt, "nxt", 4, 0) || get_buf(o_lhs, lhs, "lhs", 4, 0)) return -1;
    *n_dotted = LEN(*nxt, 4);
    if (LEN(*lhs, 4) != *n_dotted || shift < 1 || shift > 40 || ((long long)1 << shift) < *n_dotted) {
        PyErr_Format(PyExc_ValueError, "%s: array sizes do not match", name);
        return -1;
    }
    return 0;
}

PyObject *native_earley_split(PyObject *self, PyObject *args) {
    PyObject *o_core, *o_nxt, *o_lhs;
    long long T, shift, start, done_code;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!OOLLLL", &PyTuple_Type, &o_core, &o_nxt, &o_lhs, &T, &shift, &start, &done_code))
        return NULL;
    Buf nxt = {0}, lhs = {0};
    PyObject *result = NULL;
    int64_t *its = NULL;
    Py_ssize_t n_dotted;
    if (dotted_arrays(o_nxt, o_lhs, &nxt, &lhs, shift, "earley_split", &n_dotted)) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(o_core);
    its = malloc((n ? n : 1) * sizeof(int64_t));
    if (!its) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        its[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(o_core, i));
        if (its[i] == -1 && PyErr_Occurred()) goto done;
    }
    result = split_items(its, n, nxt.view.buf, lhs.view.buf, n_dotted, T, ((int64_t)1 << shift) - 1, start, done_code);
done:
    free(its);
    release(&nxt); release(&lhs);
    return result;
}

/* earley_predict(closures, nxt, lhs, T, shift, start) -> (items, waiting, by_terminal, terminals, accepts_start)
 *
 * The predicted part of a set from the closures (iterables of item codes with origin -1, that is
 * dotted rules) of its predicted nonterminals: their union as a sorted tuple, split as by
 * earley_split, and whether an item completes `start` (an empty derivation of the start symbol). */
PyObject *native_earley_predict(PyObject *self, PyObject *args) {
    PyObject *o_closures, *o_nxt, *o_lhs;
    long long T, shift, start;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOLLL", &o_closures, &o_nxt, &o_lhs, &T, &shift, &start))
        return NULL;
    Buf nxt = {0}, lhs = {0};
    PyObject *result = NULL, *closures = NULL, *items_t = NULL, *split = NULL;
    I64Set items = {0};
    int64_t *all = NULL;
    Py_ssize_t n_dotted;
    if (dotted_arrays(o_nxt, o_lhs, &nxt, &lhs, shift, "earley_predict", &n_dotted)) goto done;
    closures = PySequence_Fast(o_closures, "earley_predict: closures must be a sequence");
    if (!closures || iset_init(&items, 64)) { if (closures) PyErr_NoMemory(); goto done; }
    for (Py_ssize_t c = 0; c < PySequence_Fast_GET_SIZE(closures); c++) {
        PyObject *iter = PyObject_GetIter(PySequence_Fast_GET_ITEM(closures, c));
        if (!iter) goto done;
        PyObject *v;
        while ((v = PyIter_Next(iter))) {
            long long it = PyLong_AsLongLong(v);
            Py_DECREF(v);
            if (it == -1 && PyErr_Occurred()) { Py_DECREF(iter); goto done; }
            if (it < 0 || it >= n_dotted) {
                Py_DECREF(iter);
                PyErr_SetString(PyExc_ValueError, "earley_predict: a bad predicted item");
                goto done;
            }
            if (iset_add(&items, it) < 0) { Py_DECREF(iter); PyErr_NoMemory(); goto done; }
        }
        Py_DECREF(iter);
        if (PyErr_Occurred()) goto done;
    }
    all = iset_sorted(&items);
    if (!all) goto done;
    items_t = int_tuple(all, items.n);
    if (!items_t) goto done;
    split = split_items(all, (Py_ssize_t)items.n, nxt.view.buf, lhs.view.buf, n_dotted, T, ((int64_t)1 << shift) - 1, start, 0);
    if (!split) goto done;
    result = Py_BuildValue("(OOOOO)", items_t, PyTuple_GET_ITEM(split, 0), PyTuple_GET_ITEM(split, 1),
                           PyTuple_GET_ITEM(split, 2), PyTuple_GET_ITEM(split, 3));
done:
    Py_XDECREF(split);
    Py_XDECREF(items_t);
    Py_XDECREF(closures);
    free(items.slot);
    free(all);
    release(&nxt); release(&lhs);
    return result;
}
