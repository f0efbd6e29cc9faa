/* guidewire.grammar._native: a new Earley set's core (its closure) and its split by next symbol.
 *
 * Items are ints (earley.EarleyAutomaton): (origin + 1) << shift | dotted, where the dotted rules
 * of every rule are numbered consecutively, so advancing the dot adds 1. nxt[dotted] is the
 * symbol after the dot (-1 at a rule's end), lhs[dotted] the rule's left-hand side, and
 * nullable[sym] whether a symbol derives the empty string. Terminals are 0..T-1.
 *
 * earley_make(kernel, predicts, nxt, lhs, nullable, T, shift, n_sym, advanced, advanced_fn, limit, start, done)
 *     -> (core, predicted, waiting, by_terminal, terminals, accepting) or None
 *
 * The core grown from kernel: a nonterminal after a dot is predicted (and stepped over when
 * nullable), a completed item (lhs, origin o) adds the items of set o waiting for lhs, advanced
 * over it, once per (lhs, o): advanced[(o + 1) * n_sym + lhs], made by advanced_fn(o, lhs) and
 * stored there on a miss. core is the sorted tuple of item codes, predicted the frozenset of
 * nonterminals predicted (predicts included). None: more than limit items. nxt and lhs are
 * bytes of int32 (here and in earley_predict) and nullable bytes (no buffer to acquire per call:
 * a set is made per new parser state, often inside a mask). Then the core by the symbol after each item's dot:
 * waiting[sym] the items before a nonterminal sym, advanced over it (tuples), by_terminal[t]
 * the items before terminal t (tuples), keys in order of first appearance, terminals those t in
 * that order, accepting whether an item completes `start` with origin code `done`
 * ((initial set + 1) << shift).
 *
 * earley_predict(closures, nxt, lhs, T, shift, start) -> (items, waiting, by_terminal, terminals, accepts_start):
 * the same split for a set's predicted part (see below).
 *
 * earley_closure(sym, nxt, first_off, first, nullable, T, limit) -> sorted tuple or None: the dotted
 * rules predicting one nonterminal adds (see below).
 *
 * The reference is earley.EarleyAutomaton's Python path; the tests run both.
 */
#include "_native_buf.h"
#include "_native_iset.h"

/* add x to items (and the agenda) if new; -1 on error */
static inline int grow(I64Set *items, I64Vec *agenda, int64_t x) {
    int r = iset_add(items, x);
    if (r < 0) return -1;
    if (r && ivec_push(agenda, x) < 0) return -1;
    return 0;
}

/* The closure of kernel (see earley_make): 0 with *core (sorted, malloc'd, *n of them) and *pred (a
 * new frozenset), 1 past limit items, -1 with an error set. */
static int close_items(PyObject *o_kernel, PyObject *o_predicts, const int32_t *NXT, const int32_t *LHS,
                       const uint8_t *NUL, Py_ssize_t n_dotted, long long T, long long shift, long long n_sym,
                       PyObject *advanced, PyObject *advanced_fn, long long limit,
                       int64_t **core, size_t *n, PyObject **pred) {
    I64Set items = {0}, completed = {0}, predicted = {0};
    I64Vec agenda = {0};
    PyObject *kernel = NULL, *predicts = NULL, *out = NULL;
    int rc = -1;
    const int64_t mask = ((int64_t)1 << shift) - 1;
    kernel = PySequence_Fast(o_kernel, "earley_make: kernel must be a sequence");
    if (!kernel) goto done;
    predicts = PySequence_Fast(o_predicts, "earley_make: predicts must be a sequence");
    if (!predicts) goto done;
    Py_ssize_t nk = PySequence_Fast_GET_SIZE(kernel);
    if (iset_init(&items, (size_t)nk * 4 + 16) || iset_init(&completed, 16) || iset_init(&predicted, 16)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(predicts); i++) {
        long long p = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(predicts, i));
        if (p == -1 && PyErr_Occurred()) goto done;
        if (p < 0) { PyErr_SetString(PyExc_ValueError, "earley_make: a negative symbol"); goto done; }
        if (iset_add(&predicted, p) < 0) { PyErr_NoMemory(); goto done; }
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        long long it = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(kernel, i));
        if (it == -1 && PyErr_Occurred()) goto done;
        if (it < 0 || (it & mask) >= n_dotted) { PyErr_SetString(PyExc_ValueError, "earley_make: a bad item"); goto done; }
        if (grow(&items, &agenda, it) < 0) { PyErr_NoMemory(); goto done; }
    }
    while (agenda.n) {
        int64_t it = agenda.v[--agenda.n];
        int64_t dotted = it & mask;
        int64_t sym = NXT[dotted];
        if (sym >= T) {
            if (sym >= n_sym) { PyErr_SetString(PyExc_ValueError, "earley_make: a symbol out of range"); goto done; }
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
            PyObject *seq = PySequence_Fast(moved, "earley_make: advanced items must be a sequence");
            Py_DECREF(moved);
            if (!seq) goto done;
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
                long long it2 = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
                if ((it2 == -1 && PyErr_Occurred())) { Py_DECREF(seq); goto done; }
                if (it2 < 0 || (it2 & mask) >= n_dotted) {
                    Py_DECREF(seq);
                    PyErr_SetString(PyExc_ValueError, "earley_make: a bad advanced item");
                    goto done;
                }
                if (grow(&items, &agenda, it2) < 0) { Py_DECREF(seq); PyErr_NoMemory(); goto done; }
            }
            Py_DECREF(seq);
            if ((long long)items.n > limit) { rc = 1; goto done; }
        }
    }
    out = PyFrozenSet_New(NULL);
    if (!out) goto done;
    for (size_t i = 0; i < predicted.cap; i++) {
        if (predicted.slot[i] < 0) continue;
        PyObject *v = PyLong_FromLongLong(predicted.slot[i]);
        if (!v || PySet_Add(out, v) < 0) { Py_XDECREF(v); goto done; }
        Py_DECREF(v);
    }
    *core = iset_sorted(&items);
    if (!*core) goto done;
    *n = items.n;
    *pred = out;
    out = NULL;
    rc = 0;
done:
    Py_XDECREF(out);
    Py_XDECREF(kernel);
    Py_XDECREF(predicts);
    free(items.slot); free(completed.slot); free(predicted.slot); free(agenda.v);
    return rc;
}

typedef struct {
    int64_t sym, idx, v;
} Pair;      /* an item's value v under symbol sym; idx its position in the set */

static int cmp_pair(const void *a, const void *b) {
    const Pair *x = a, *y = b;
    if (x->sym != y->sym) return (x->sym > y->sym) - (x->sym < y->sym);
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_first(const void *a, const void *b) {     /* runs (first idx, start, length, sym) by first idx */
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return (x > y) - (x < y);
}

/* a new dict {sym: tuple of v} of pairs p[0..n), keys in order of first appearance (tuples untracked,
 * so the dict is never tracked either), and, with terms, each key appended to it in that order */
static PyObject *group_pairs(Pair *p, size_t n, PyObject *terms) {
    PyObject *d = PyDict_New();
    int64_t *runs = NULL;
    int64_t *vals = NULL;
    if (!d) return NULL;
    if (!n) return d;
    qsort(p, n, sizeof(Pair), cmp_pair);
    runs = malloc(n * 4 * sizeof(int64_t));
    vals = malloc(n * sizeof(int64_t));
    if (!runs || !vals) { PyErr_NoMemory(); goto fail; }
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        vals[i] = p[i].v;
        if (i == 0 || p[i].sym != p[i - 1].sym) {
            runs[4 * nr] = p[i].idx; runs[4 * nr + 1] = (int64_t)i; runs[4 * nr + 2] = 0; runs[4 * nr + 3] = p[i].sym;
            nr++;
        }
        runs[4 * (nr - 1) + 2]++;
    }
    qsort(runs, nr, 4 * sizeof(int64_t), cmp_first);
    for (size_t r = 0; r < nr; r++) {
        PyObject *key = PyLong_FromLongLong(runs[4 * r + 3]);
        PyObject *t = key ? int_tuple(vals + runs[4 * r + 1], (size_t)runs[4 * r + 2]) : NULL;
        int bad = !t || PyDict_SetItem(d, key, t) < 0 || (terms && PyList_Append(terms, key) < 0);
        Py_XDECREF(key);
        Py_XDECREF(t);
        if (bad) goto fail;
    }
    free(runs); free(vals);
    return d;
fail:
    free(runs); free(vals);
    Py_DECREF(d);
    return NULL;
}

/* (waiting, by_terminal, terminals, accepting) of the items its[0..n) (see earley_make) */
static PyObject *split_items(const int64_t *its, Py_ssize_t n, const int32_t *NXT, const int32_t *LHS, Py_ssize_t n_dotted,
                             long long T, int64_t mask, long long start, long long done_code) {
    PyObject *waiting = NULL, *by_terminal = NULL, *terms = PyList_New(0), *result = NULL;
    Pair *w = malloc((n ? n : 1) * sizeof(Pair)), *b = malloc((n ? n : 1) * sizeof(Pair));
    size_t nw = 0, nb = 0;
    int accepting = 0;
    if (!terms) goto done;
    if (!w || !b) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t it = its[i];
        if (it < 0 || (it & mask) >= n_dotted) { PyErr_SetString(PyExc_ValueError, "earley_make: a bad item"); goto done; }
        int64_t sym = NXT[it & mask];
        if (sym >= T) {
            w[nw].sym = sym; w[nw].idx = i; w[nw].v = it + 1; nw++;
        } else if (sym >= 0) {
            b[nb].sym = sym; b[nb].idx = i; b[nb].v = it; nb++;
        } else if (LHS[it & mask] == start && (it & ~mask) == done_code) {
            accepting = 1;
        }
    }
    waiting = group_pairs(w, nw, NULL);
    if (!waiting) goto done;
    by_terminal = group_pairs(b, nb, terms);
    if (!by_terminal) goto done;
    result = Py_BuildValue("(OOOO)", waiting, by_terminal, terms, accepting ? Py_True : Py_False);
done:
    free(w); free(b);
    Py_XDECREF(waiting);
    Py_XDECREF(by_terminal);
    Py_XDECREF(terms);
    return result;
}

/* the dotted-rule arrays nxt and lhs: bytes of int32 (no buffer to acquire per call), one length,
 * within 1 << shift; 0, or -1 with an error set */
static int dotted_arrays(PyObject *o_nxt, PyObject *o_lhs, long long shift, const char *name,
                         const int32_t **nxt, const int32_t **lhs, Py_ssize_t *n_dotted) {
    if (!PyBytes_Check(o_nxt) || !PyBytes_Check(o_lhs) || PyBytes_GET_SIZE(o_nxt) % 4) {
        PyErr_Format(PyExc_TypeError, "%s: nxt and lhs must be bytes of int32", name);
        return -1;
    }
    *n_dotted = PyBytes_GET_SIZE(o_nxt) / 4;
    if (PyBytes_GET_SIZE(o_lhs) != PyBytes_GET_SIZE(o_nxt) || shift < 1 || shift > 40 ||
        ((long long)1 << shift) < *n_dotted) {
        PyErr_Format(PyExc_ValueError, "%s: array sizes do not match", name);
        return -1;
    }
    *nxt = (const int32_t *)PyBytes_AS_STRING(o_nxt);
    *lhs = (const int32_t *)PyBytes_AS_STRING(o_lhs);
    return 0;
}

PyObject *native_earley_make(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "earley_make takes 13 arguments");
        return NULL;
    }
    long long v[6];   /* T, shift, n_sym, limit, start, done */
    const int iv[6] = {5, 6, 7, 10, 11, 12};
    for (int i = 0; i < 6; i++) {
        v[i] = PyLong_AsLongLong(args[iv[i]]);
        if (v[i] == -1 && PyErr_Occurred()) return NULL;
    }
    long long T = v[0], shift = v[1], n_sym = v[2], limit = v[3], start = v[4], done_code = v[5];
    Py_ssize_t n_dotted;
    const int32_t *NXT, *LHS;
    if (dotted_arrays(args[2], args[3], shift, "earley_make", &NXT, &LHS, &n_dotted)) return NULL;
    if (!PyBytes_Check(args[4]) || !PyDict_Check(args[8])) {
        PyErr_SetString(PyExc_TypeError, "earley_make: nullable must be bytes, advanced a dict");
        return NULL;
    }
    const uint8_t *NUL = (const uint8_t *)PyBytes_AS_STRING(args[4]);
    if (PyBytes_GET_SIZE(args[4]) < n_sym || n_sym < T || T < 0) {
        PyErr_SetString(PyExc_ValueError, "earley_make: array sizes do not match");
        return NULL;
    }
    int64_t *core = NULL;
    size_t n = 0;
    PyObject *pred = NULL, *core_t = NULL, *split = NULL, *result = NULL;
    int rc = close_items(args[0], args[1], NXT, LHS, NUL, n_dotted, T, shift, n_sym, args[8], args[9], limit,
                         &core, &n, &pred);
    if (rc < 0) return NULL;
    if (rc > 0) Py_RETURN_NONE;
    core_t = int_tuple(core, n);
    if (!core_t) goto done;
    split = split_items(core, (Py_ssize_t)n, NXT, LHS, n_dotted, T, ((int64_t)1 << shift) - 1, start, done_code);
    if (!split) goto done;
    result = PyTuple_Pack(6, core_t, pred, PyTuple_GET_ITEM(split, 0), PyTuple_GET_ITEM(split, 1),
                          PyTuple_GET_ITEM(split, 2), PyTuple_GET_ITEM(split, 3));
done:
    free(core);
    Py_XDECREF(pred);
    Py_XDECREF(core_t);
    Py_XDECREF(split);
    return result;
}

/* earley_predict(closures, nxt, lhs, T, shift, start) -> (items, waiting, by_terminal, terminals, accepts_start)
 *
 * The predicted part of a set from the closures (iterables of item codes with origin -1, that is
 * dotted rules) of its predicted nonterminals: their union as a sorted tuple, split as by
 * earley_make, and whether an item completes `start` (an empty derivation of the start symbol). */
PyObject *native_earley_predict(PyObject *self, PyObject *args) {
    PyObject *o_closures, *o_nxt, *o_lhs;
    long long T, shift, start;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOLLL", &o_closures, &o_nxt, &o_lhs, &T, &shift, &start))
        return NULL;
    PyObject *result = NULL, *closures = NULL, *items_t = NULL, *split = NULL;
    I64Set items = {0};
    int64_t *all = NULL;
    const int32_t *NXT, *LHS;
    Py_ssize_t n_dotted;
    if (dotted_arrays(o_nxt, o_lhs, shift, "earley_predict", &NXT, &LHS, &n_dotted)) goto done;
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
    split = split_items(all, (Py_ssize_t)items.n, NXT, LHS, n_dotted, T, ((int64_t)1 << shift) - 1, start, 0);
    if (!split) goto done;
    result = Py_BuildValue("(OOOOO)", items_t, PyTuple_GET_ITEM(split, 0), PyTuple_GET_ITEM(split, 1),
                           PyTuple_GET_ITEM(split, 2), PyTuple_GET_ITEM(split, 3));
done:
    Py_XDECREF(split);
    Py_XDECREF(items_t);
    Py_XDECREF(closures);
    free(items.slot);
    free(all);
    return result;
}

/* add nonterminal s's first positions (first[first_off[s]:first_off[s+1]]) to items and the agenda;
 * -1 with an error set */
static int add_first(I64Set *items, I64Vec *agenda, int64_t s, const int32_t *OFF, const int32_t *FIRST,
                     Py_ssize_t n_first, Py_ssize_t n_dotted) {
    if (OFF[s] < 0 || OFF[s] > OFF[s + 1] || OFF[s + 1] > n_first) {
        PyErr_SetString(PyExc_ValueError, "earley_closure: bad first_off");
        return -1;
    }
    for (int32_t k = OFF[s]; k < OFF[s + 1]; k++) {
        int64_t it = FIRST[k];
        if (it < 0 || it >= n_dotted) { PyErr_SetString(PyExc_ValueError, "earley_closure: a bad item"); return -1; }
        if (grow(items, agenda, it) < 0) { PyErr_NoMemory(); return -1; }
    }
    return 0;
}

/* earley_closure(syms, nxt, first_off, first, nullable, T, limit) -> sorted tuple or None
 *
 * Every dotted rule (item with origin -1) that predicting the nonterminals syms (any iterable of
 * them) adds to a set: the first positions of their rules, then, for each item before a
 * nonterminal s, s's rules' first positions (once per s) and, when s is nullable, the item's next
 * position. One search of the union: a set predicting a chain of n nonterminals each predicting
 * the next costs O(n) items here, where a closure per nonterminal then their union cost O(n^2)
 * (eslintrc's 261 nonterminals at one key: 168k items, 16 ms, against ~1.3k). first_off
 * (n_sym + 1 int32) and first (int32) list each nonterminal's first positions; nxt is bytes of
 * int32 and nullable bytes, as in earley_make. None: more than limit items (so exactly when the
 * reference EarleyAutomaton._predicted raises: items only grow, and it checks after each one). */
PyObject *native_earley_closure(PyObject *self, PyObject *args) {
    long long T, limit;
    PyObject *o_syms, *o_nxt, *o_off, *o_first, *o_nul;
    (void)self;
    if (!PyArg_ParseTuple(args, "OSSSSLL", &o_syms, &o_nxt, &o_off, &o_first, &o_nul, &T, &limit))
        return NULL;
    Py_ssize_t n_dotted = PyBytes_GET_SIZE(o_nxt) / 4, n_off = PyBytes_GET_SIZE(o_off) / 4;
    Py_ssize_t n_first = PyBytes_GET_SIZE(o_first) / 4, n_sym = n_off - 1;
    if (PyBytes_GET_SIZE(o_nxt) % 4 || PyBytes_GET_SIZE(o_off) % 4 || PyBytes_GET_SIZE(o_first) % 4 || n_off < 1 ||
        PyBytes_GET_SIZE(o_nul) < n_sym || T < 0 || T > n_sym) {
        PyErr_SetString(PyExc_ValueError, "earley_closure: array sizes do not match");
        return NULL;
    }
    const int32_t *NXT = (const int32_t *)PyBytes_AS_STRING(o_nxt);
    const int32_t *OFF = (const int32_t *)PyBytes_AS_STRING(o_off);
    const int32_t *FIRST = (const int32_t *)PyBytes_AS_STRING(o_first);
    const uint8_t *NUL = (const uint8_t *)PyBytes_AS_STRING(o_nul);
    I64Set items = {0};
    I64Vec agenda = {0};
    uint8_t *seen = NULL;
    int64_t *sorted_items = NULL;
    PyObject *out = NULL, *syms = PySequence_Fast(o_syms, "earley_closure: syms must be an iterable of nonterminals");
    if (!syms) return NULL;
    seen = calloc((size_t)n_sym, 1);
    if (!seen || iset_init(&items, 64)) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(syms); i++) {
        long long sym = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(syms, i));
        if (sym == -1 && PyErr_Occurred()) goto done;
        if (sym < T || sym >= n_sym) {
            PyErr_SetString(PyExc_ValueError, "earley_closure: a symbol of syms is not a nonterminal");
            goto done;
        }
        if (seen[sym]) continue;
        seen[sym] = 1;
        if (add_first(&items, &agenda, sym, OFF, FIRST, n_first, n_dotted) < 0) goto done;
    }
    while (agenda.n) {
        int64_t it = agenda.v[--agenda.n];
        int64_t s = NXT[it];
        if (s >= T) {
            if (s >= n_sym) { PyErr_SetString(PyExc_ValueError, "earley_closure: a symbol out of range"); goto done; }
            if (!seen[s]) {
                seen[s] = 1;
                if (add_first(&items, &agenda, s, OFF, FIRST, n_first, n_dotted) < 0) goto done;
            }
            if (NUL[s]) {
                if (it + 1 >= n_dotted) { PyErr_SetString(PyExc_ValueError, "earley_closure: a bad item"); goto done; }
                if (grow(&items, &agenda, it + 1) < 0) { PyErr_NoMemory(); goto done; }
            }
        }
        if ((long long)items.n > limit) { out = Py_None; Py_INCREF(out); goto done; }
    }
    /* a sorted tuple of ints, untracked at birth (a frozenset stays tracked, and every full
     * collection walked each closure of a large grammar: ~340k references on one schema) */
    sorted_items = malloc((items.n ? items.n : 1) * sizeof(int64_t));
    if (!sorted_items) { PyErr_NoMemory(); goto done; }
    size_t n_items = 0;
    for (size_t i = 0; i < items.cap; i++)
        if (items.slot[i] >= 0) sorted_items[n_items++] = items.slot[i];
    sort_i64(sorted_items, n_items);
    out = PyTuple_New((Py_ssize_t)n_items);
    if (!out) goto done;
    for (size_t i = 0; i < n_items; i++) {
        PyObject *v = PyLong_FromLongLong(sorted_items[i]);
        if (!v) { Py_CLEAR(out); goto done; }
        PyTuple_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    untrack_int_tuple(out);
done:
    Py_DECREF(syms);
    free(sorted_items);
    free(seen);
    free(items.slot);
    free(agenda.v);
    return out;
}
