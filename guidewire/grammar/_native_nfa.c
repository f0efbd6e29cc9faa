/* guidewire.grammar._native: the compile's per-terminal NFA work (frontend, fragments, lexer).
 *
 * splice(eps, edges, stored_eps, stored_edges, off) -> None
 *     Appends to the lists ``eps`` and ``edges`` (an NFA being built) one fresh list per state of
 *     a stored fragment: ``[t + off for t in stored_eps[i]]`` and ``[(lo, hi, t + off) for lo, hi, t
 *     in stored_edges[i]]``. The reference is fragments.splice_lists. The new lists are untracked
 *     by the cyclic collector, as grow_states' are.
 *
 * grow_states(eps, edges, n) -> None
 *     Appends ``n`` fresh empty lists to each of ``eps`` and ``edges`` (new NFA states), untracking
 *     them and the two outer lists from the cyclic collector. An NFA's per-state lists hold only
 *     ints and tuples of ints, which can be in no reference cycle; tracked, the hundreds of
 *     thousands of lists of a large terminal's automaton were walked by every full collection that
 *     ran during its compile (up to ~340 ms each in a long-lived process). The reference (no
 *     compiled module) appends ordinary lists.
 *
 * template_into(edges, src, dst, base, template) -> None
 *     A copy of an acyclic byte automaton (charset.Template: node i's edges (lo, hi, child), child
 *     -1 for the exit) from state ``src`` to ``dst``: node 0's edges are appended to edges[src],
 *     node i's (i >= 1) to edges[base + i - 1] (states the caller has grown), child c >= 1 is state
 *     base + c - 1 (0: src) and -1 is dst. The new edge tuples are untracked as splice's are. The
 *     reference is regex.NFA._add_template_python.
 *
 * freeze_lists(lists) -> tuple
 *     ``tuple(tuple(x) for x in lists)`` with every tuple of atoms (or of such tuples) in it
 *     untracked as untrack_nested does: a frozen NFA's hundreds of thousands of per-state lists in
 *     one pass. The reference is the generator in regex.NFA.freeze.
 *
 * gc_free_list() -> list
 *     A new empty list untracked by the cyclic collector, for the append-only per-state arrays of a
 *     grammar (Earley sets, lexer states) that hold only atoms, untracked tuples and acyclic
 *     objects: tracked, each such list is walked element by element by every full collection
 *     for as long as its grammar lives (a cached grammar: for the life of a server). An object
 *     held only by such a list is never freed by the collector, so nothing that can be in a
 *     reference cycle may go into one.
 *
 * untrack_nested(obj) -> obj
 *     Untracks from the cyclic collector every exact tuple in ``obj`` (nested up to 16 deep) whose
 *     items are all atoms (objects the collector never tracks: ints, bytes, str, None, ...) or such
 *     tuples, innermost first. CPython untracks a tuple of atoms when a collection walks it, but a
 *     tuple of tuples only one nesting level per collection of its generation (the collection
 *     examines the outer tuple before its items are untracked): a frozen NFA or a stored fragment
 *     is one tracked tuple of thousands of references through its first full collections.
 *
 * fragment_facts(eps, edges, first, start, end, cap, count_states) -> (live, infinite, strings) | None
 *     fragments.analyse over states ``first ..`` of an NFA (sequences of sequences): None unless
 *     every move of those states stays among them and start and end are among them; else the
 *     liveness bytes (state reaches end), whether the live part reachable from start has a
 *     cycle, and count_strings' path count (cap when infinite or more than count_states states,
 *     and with count_strings' own cut-off, the same depth-first order). The reference is
 *     fragments.analyse_python.
 *
 * nfa_arrays(eps, edges) -> (offsets, lo, end, dst, eps_offsets, eps_dst)
 *     The NFA's moves as bytearrays of int64 (edge ranges' ends exclusive), what
 *     ByteDFA._edges_np / _eps_np make with numpy.
 *
 * byte_classes(trans) -> bytes of int64: the first byte (column) of each class of bytes whose
 *     columns of the (n, 256) int32 table are identical, ascending; the reference is
 *     refine.byte_classes_numpy.
 */
#include "_native_buf.h"

/* 0 if ``o`` is a list or tuple, else -1 with a TypeError naming ``what`` */
static int seq_ok(PyObject *o, const char *what) {
    if (PyList_Check(o) || PyTuple_Check(o)) return 0;
    PyErr_Format(PyExc_TypeError, "%s: expected a list or tuple, got %.100s", what, Py_TYPE(o)->tp_name);
    return -1;
}

#define SEQ_LEN(o) (PyList_Check(o) ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o))
#define SEQ_ITEM(o, i) (PyList_Check(o) ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i))

static int get_ll(PyObject *o, long long *v, const char *what) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int, got %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    *v = PyLong_AsLongLong(o);
    return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* an edge (lo, hi, t) of a sequence of edges */
static int get_edge(PyObject *e, long long *lo, long long *hi, long long *t) {
    if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 3) {
        PyErr_SetString(PyExc_TypeError, "an NFA edge must be a (lo, hi, target) tuple");
        return -1;
    }
    return get_ll(PyTuple_GET_ITEM(e, 0), lo, "edge lo") || get_ll(PyTuple_GET_ITEM(e, 1), hi, "edge hi") ||
           get_ll(PyTuple_GET_ITEM(e, 2), t, "edge target") ? -1 : 0;
}

/* a new untracked edge tuple (e's lo, e's hi, target): steals ``target``; NULL on failure */
static PyObject *edge_to(PyObject *e, PyObject *target) {
    if (!target) return NULL;
    PyObject *tup = PyTuple_New(3);
    if (!tup) { Py_DECREF(target); return NULL; }
    PyObject *a = PyTuple_GET_ITEM(e, 0), *b = PyTuple_GET_ITEM(e, 1);
    Py_INCREF(a); Py_INCREF(b);
    PyTuple_SET_ITEM(tup, 0, a);
    PyTuple_SET_ITEM(tup, 1, b);
    PyTuple_SET_ITEM(tup, 2, target);
    untrack_int_tuple(tup);   /* ints only: in no cycle, so no collection need walk it */
    return tup;
}

PyObject *native_splice(PyObject *self, PyObject *args) {
    PyObject *eps, *edges, *s_eps, *s_edges;
    long long off;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!OOL", &PyList_Type, &eps, &PyList_Type, &edges, &s_eps, &s_edges, &off))
        return NULL;
    if (seq_ok(s_eps, "splice: stored_eps") || seq_ok(s_edges, "splice: stored_edges")) return NULL;
    Py_ssize_t n = SEQ_LEN(s_eps);
    if (SEQ_LEN(s_edges) != n) {
        PyErr_SetString(PyExc_ValueError, "splice: stored_eps and stored_edges differ in length");
        return NULL;
    }
    /* build every new list first, so a bad item leaves the NFA unchanged */
    PyObject *new_eps = PyList_New(n), *new_edges = PyList_New(n);
    if (!new_eps || !new_edges) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *src = SEQ_ITEM(s_eps, i);
        if (seq_ok(src, "splice: a state's epsilon moves")) goto fail;
        Py_ssize_t k = SEQ_LEN(src);
        PyObject *lst = PyList_New(k);
        if (!lst) goto fail;
        PyObject_GC_UnTrack(lst);   /* ints only (see grow_states) */
        PyList_SET_ITEM(new_eps, i, lst);
        for (Py_ssize_t j = 0; j < k; j++) {
            long long t;
            if (get_ll(SEQ_ITEM(src, j), &t, "splice: epsilon target")) goto fail;
            PyObject *v = PyLong_FromLongLong(t + off);
            if (!v) goto fail;
            PyList_SET_ITEM(lst, j, v);
        }
        src = SEQ_ITEM(s_edges, i);
        if (seq_ok(src, "splice: a state's edges")) goto fail;
        k = SEQ_LEN(src);
        lst = PyList_New(k);
        if (!lst) goto fail;
        PyObject_GC_UnTrack(lst);   /* untracked tuples of ints only (see grow_states) */
        PyList_SET_ITEM(new_edges, i, lst);
        for (Py_ssize_t j = 0; j < k; j++) {
            PyObject *e = SEQ_ITEM(src, j);
            long long lo, hi, t;
            if (get_edge(e, &lo, &hi, &t)) goto fail;
            PyObject *tup = edge_to(e, PyLong_FromLongLong(t + off));
            if (!tup) goto fail;
            PyList_SET_ITEM(lst, j, tup);
        }
    }
    Py_ssize_t at = PyList_GET_SIZE(eps);
    if (PyList_SetSlice(eps, at, at, new_eps) < 0) goto fail;
    at = PyList_GET_SIZE(edges);
    if (PyList_SetSlice(edges, at, at, new_edges) < 0) {
        PyList_SetSlice(eps, PyList_GET_SIZE(eps) - n, PyList_GET_SIZE(eps), NULL);
        goto fail;
    }
    Py_DECREF(new_eps); Py_DECREF(new_edges);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(new_eps); Py_XDECREF(new_edges);
    return NULL;
}

PyObject *native_template_into(PyObject *self, PyObject *args) {
    PyObject *edges, *tmpl;
    long long src, dst, base;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!LLLO", &PyList_Type, &edges, &src, &dst, &base, &tmpl)) return NULL;
    if (seq_ok(tmpl, "template_into: template")) return NULL;
    Py_ssize_t n = SEQ_LEN(tmpl), have = PyList_GET_SIZE(edges);
    if (src < 0 || src >= have || dst < 0 || dst >= have || (n > 1 && (base < 0 || base + n - 1 > have))) {
        PyErr_SetString(PyExc_IndexError, "template_into: a state is out of range");
        return NULL;
    }
    PyObject *dst_obj = PyLong_FromLongLong(dst);
    if (!dst_obj) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = SEQ_ITEM(tmpl, i);
        if (seq_ok(node, "template_into: a node")) goto fail;
        PyObject *out = PyList_GET_ITEM(edges, i == 0 ? (Py_ssize_t)src : (Py_ssize_t)(base + i - 1));
        if (!PyList_Check(out)) {
            PyErr_SetString(PyExc_TypeError, "template_into: a state's edges must be a list");
            goto fail;
        }
        for (Py_ssize_t j = 0; j < SEQ_LEN(node); j++) {
            PyObject *e = SEQ_ITEM(node, j);
            long long lo, hi, child;
            if (get_edge(e, &lo, &hi, &child)) goto fail;
            if (child >= n) {
                PyErr_SetString(PyExc_IndexError, "template_into: a child is out of range");
                goto fail;
            }
            PyObject *tup = edge_to(e, child < 0 ? (Py_INCREF(dst_obj), dst_obj)
                                                 : PyLong_FromLongLong(child == 0 ? src : base + child - 1));
            if (!tup) goto fail;
            int rc = PyList_Append(out, tup);
            Py_DECREF(tup);
            if (rc < 0) goto fail;
        }
    }
    Py_DECREF(dst_obj);
    Py_RETURN_NONE;
fail:
    Py_DECREF(dst_obj);
    return NULL;
}

/* 1 when ``o`` is not tracked on return (untracked here if it qualifies) */
static int untrack_nested_rec(PyObject *o, int depth) {
    if (!PyObject_IS_GC(o)) return 1;
    if (!PyTuple_CheckExact(o) || depth > 16) return 0;
    if (!PyObject_GC_IsTracked(o)) return 1;
    int all = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
        if (!untrack_nested_rec(PyTuple_GET_ITEM(o, i), depth + 1)) all = 0;
    if (all) PyObject_GC_UnTrack(o);
    return all;
}

PyObject *native_untrack_nested(PyObject *self, PyObject *obj) {
    (void)self;
    untrack_nested_rec(obj, 0);
    Py_INCREF(obj);
    return obj;
}

PyObject *native_freeze_lists(PyObject *self, PyObject *lists) {
    (void)self;
    if (seq_ok(lists, "freeze_lists")) return NULL;
    Py_ssize_t n = SEQ_LEN(lists);
    PyObject *out = PyTuple_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = SEQ_ITEM(lists, i);
        PyObject *t = PySequence_Tuple(item);
        if (!t) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, i, t);
    }
    untrack_nested_rec(out, 0);
    return out;
}

PyObject *native_gc_free_list(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    PyObject *lst = PyList_New(0);
    if (lst) PyObject_GC_UnTrack(lst);
    return lst;
}

PyObject *native_grow_states(PyObject *self, PyObject *args) {
    PyObject *eps, *edges;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!n", &PyList_Type, &eps, &PyList_Type, &edges, &n)) return NULL;
    if (n < 0 || n > ((Py_ssize_t)1 << 28)) {
        PyErr_Format(PyExc_ValueError, "grow_states: count %zd out of range", n);
        return NULL;
    }
    /* both runs of fresh lists first, so that a failed allocation leaves the NFA unchanged */
    PyObject *fresh[2] = {PyList_New(n), PyList_New(n)};
    if (!fresh[0] || !fresh[1]) goto fail;
    for (int w = 0; w < 2; w++)
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *lst = PyList_New(0);
            if (!lst) goto fail;
            PyObject_GC_UnTrack(lst);
            PyList_SET_ITEM(fresh[w], i, lst);
        }
    Py_ssize_t at = PyList_GET_SIZE(eps);
    if (PyList_SetSlice(eps, at, at, fresh[0]) < 0) goto fail;
    if (PyList_SetSlice(edges, PyList_GET_SIZE(edges), PyList_GET_SIZE(edges), fresh[1]) < 0) {
        if (PyList_SetSlice(eps, at, PyList_GET_SIZE(eps), NULL) < 0)
            Py_FatalError("grow_states: could not undo a half-grown NFA");
        goto fail;
    }
    Py_DECREF(fresh[0]); Py_DECREF(fresh[1]);
    if (PyObject_GC_IsTracked(eps)) PyObject_GC_UnTrack(eps);
    if (PyObject_GC_IsTracked(edges)) PyObject_GC_UnTrack(edges);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(fresh[0]); Py_XDECREF(fresh[1]);
    return NULL;
}

/* the fragment's moves in CSR form, relative ids: succ[soff[i] .. soff[i+1]-1] (epsilon targets
 * first, then edge targets, in list order) and each move's byte count (1 for epsilon moves) */
typedef struct {
    int64_t n;
    int64_t *soff, *succ, *width;
} Moves;

static void moves_free(Moves *m) { free(m->soff); free(m->succ); free(m->width); }

/* 1: built; 0: not closed (a move leaves the fragment); -1: error set */
static int moves_build(PyObject *eps, PyObject *edges, int64_t first, Moves *m) {
    Py_ssize_t total_n = SEQ_LEN(eps);
    if (SEQ_LEN(edges) != total_n) {
        PyErr_SetString(PyExc_ValueError, "fragment_facts: eps and edges differ in length");
        return -1;
    }
    int64_t n = total_n - first, total = 0;
    m->n = n;
    m->soff = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!m->soff) { PyErr_NoMemory(); return -1; }
    m->soff[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        PyObject *a = SEQ_ITEM(eps, first + i), *b = SEQ_ITEM(edges, first + i);
        if (seq_ok(a, "fragment_facts: a state's epsilon moves") || seq_ok(b, "fragment_facts: a state's edges"))
            return -1;
        total += SEQ_LEN(a) + SEQ_LEN(b);
        m->soff[i + 1] = total;
    }
    m->succ = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    m->width = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    if (!m->succ || !m->width) { PyErr_NoMemory(); return -1; }
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        PyObject *a = SEQ_ITEM(eps, first + i), *b = SEQ_ITEM(edges, first + i);
        for (Py_ssize_t j = 0; j < SEQ_LEN(a); j++) {
            long long t;
            if (get_ll(SEQ_ITEM(a, j), &t, "epsilon target")) return -1;
            if (t < first || t >= first + n) return 0;
            m->succ[k] = t - first;
            m->width[k++] = 1;
        }
        for (Py_ssize_t j = 0; j < SEQ_LEN(b); j++) {
            long long lo, hi, t;
            if (get_edge(SEQ_ITEM(b, j), &lo, &hi, &t)) return -1;
            if (t < first || t >= first + n) return 0;
            m->succ[k] = t - first;
            m->width[k++] = hi - lo + 1;
        }
    }
    return 1;
}

PyObject *native_fragment_facts(PyObject *self, PyObject *args) {
    PyObject *eps, *edges;
    long long first, start, end, cap, count_states;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOLLLLL", &eps, &edges, &first, &start, &end, &cap, &count_states)) return NULL;
    if (seq_ok(eps, "fragment_facts: eps") || seq_ok(edges, "fragment_facts: edges")) return NULL;
    if (first < 0 || first > SEQ_LEN(eps)) {
        PyErr_SetString(PyExc_ValueError, "fragment_facts: first is out of range");
        return NULL;
    }
    Moves m = {0};
    unsigned char *live = NULL, *color = NULL;
    int64_t *rev_off = NULL, *rev = NULL, *stack = NULL, *pos = NULL, *count = NULL;
    PyObject *result = NULL;
    int built = moves_build(eps, edges, first, &m);
    if (built < 0) goto done;
    int64_t n = m.n;
    start -= first;
    end -= first;
    if (!built || end < 0 || end >= n || start < 0 || start >= n) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    /* liveness: reverse reachability from end */
    live = calloc((size_t)n, 1);
    color = calloc((size_t)n, 1);
    rev_off = calloc((size_t)n + 1, sizeof(int64_t));
    rev = malloc(sizeof(int64_t) * (size_t)(m.soff[n] ? m.soff[n] : 1));
    stack = malloc(sizeof(int64_t) * (size_t)(m.soff[n] + n + 2));
    pos = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!live || !color || !rev_off || !rev || !stack || !pos) { PyErr_NoMemory(); goto done; }
    for (int64_t k = 0; k < m.soff[n]; k++) rev_off[m.succ[k] + 1]++;
    for (int64_t i = 0; i < n; i++) rev_off[i + 1] += rev_off[i];
    for (int64_t i = 0; i < n; i++) pos[i] = rev_off[i];
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = m.soff[i]; k < m.soff[i + 1]; k++) rev[pos[m.succ[k]]++] = i;
    int64_t sp = 0;
    live[end] = 1;
    stack[sp++] = end;
    while (sp) {
        int64_t s = stack[--sp];
        for (int64_t k = rev_off[s]; k < rev_off[s + 1]; k++)
            if (!live[rev[k]]) { live[rev[k]] = 1; stack[sp++] = rev[k]; }
    }
    /* a cycle among the live states reachable from start (iterative DFS, colours 1 open, 2 done) */
    int infinite = 0;
    if (live[start]) {
        sp = 0;
        stack[sp] = start; pos[sp++] = m.soff[start];
        color[start] = 1;
        while (sp && !infinite) {
            int64_t s = stack[sp - 1], k = pos[sp - 1];
            if (k == m.soff[s + 1]) { color[s] = 2; sp--; continue; }
            pos[sp - 1] = k + 1;
            int64_t t = m.succ[k];
            if (!live[t]) continue;
            if (color[t] == 1) infinite = 1;
            else if (color[t] == 0) { color[t] = 1; stack[sp] = t; pos[sp++] = m.soff[t]; }
        }
    }
    long long strings;
    if (infinite || n > count_states) {
        strings = cap;
    } else if (!live[start]) {
        strings = 0;
    } else {
        /* count_strings' depth-first order: a stack of (state, done), successors pushed in order,
         * cut off at cap once the counted states plus the stack exceed count_states */
        size_t scap = (size_t)(2 * n + 16), ssz = 0;
        int64_t *st = malloc(sizeof(int64_t) * scap);
        count = malloc(sizeof(int64_t) * (size_t)n);
        unsigned char *have = calloc((size_t)n, 1);
        if (!st || !count || !have) { free(st); free(have); PyErr_NoMemory(); goto done; }
        int64_t n_counted = 0;
        int cut = 0;
        st[ssz++] = start * 2;
        while (ssz) {
            int64_t item = st[--ssz], s = item >> 1;
            if (item & 1) {
                long long c = s == end ? 1 : 0;
                for (int64_t k = m.soff[s]; k < m.soff[s + 1]; k++)
                    if (live[m.succ[k]]) c += m.width[k] * count[m.succ[k]];
                if (!have[s]) n_counted++;
                have[s] = 1;
                count[s] = c < cap ? c : cap;
                continue;
            }
            if (have[s]) continue;
            if (n_counted + (int64_t)ssz > count_states) { cut = 1; break; }
            size_t need = ssz + 1 + (size_t)(m.soff[s + 1] - m.soff[s]);
            if (need > scap) {
                while (scap < need) scap *= 2;
                int64_t *grown = realloc(st, sizeof(int64_t) * scap);
                if (!grown) { free(st); free(have); PyErr_NoMemory(); goto done; }
                st = grown;
            }
            st[ssz++] = s * 2 + 1;
            for (int64_t k = m.soff[s]; k < m.soff[s + 1]; k++)
                if (live[m.succ[k]] && !have[m.succ[k]]) st[ssz++] = m.succ[k] * 2;
        }
        strings = cut ? cap : count[start];
        free(st);
        free(have);
    }
    PyObject *lv = PyBytes_FromStringAndSize((const char *)live, (Py_ssize_t)n);
    if (!lv) goto done;
    result = Py_BuildValue("(NOL)", lv, infinite ? Py_True : Py_False, strings);
done:
    moves_free(&m);
    free(live); free(color); free(rev_off); free(rev); free(stack); free(pos); free(count);
    return result;
}

PyObject *native_nfa_arrays(PyObject *self, PyObject *args) {
    PyObject *eps, *edges;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &eps, &edges)) return NULL;
    if (seq_ok(eps, "nfa_arrays: eps") || seq_ok(edges, "nfa_arrays: edges")) return NULL;
    Py_ssize_t n = SEQ_LEN(eps);
    if (SEQ_LEN(edges) != n) {
        PyErr_SetString(PyExc_ValueError, "nfa_arrays: eps and edges differ in length");
        return NULL;
    }
    int64_t n_e = 0, n_x = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = SEQ_ITEM(eps, i), *b = SEQ_ITEM(edges, i);
        if (seq_ok(a, "nfa_arrays: a state's epsilon moves") || seq_ok(b, "nfa_arrays: a state's edges")) return NULL;
        n_x += SEQ_LEN(a);
        n_e += SEQ_LEN(b);
    }
    PyObject *o_off = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(8 * (n + 1)));
    PyObject *o_lo = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(8 * n_e));
    PyObject *o_end = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(8 * n_e));
    PyObject *o_dst = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(8 * n_e));
    PyObject *o_xoff = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(8 * (n + 1)));
    PyObject *o_xdst = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(8 * n_x));
    if (!o_off || !o_lo || !o_end || !o_dst || !o_xoff || !o_xdst) goto fail;
    int64_t *OFF = (int64_t *)PyByteArray_AS_STRING(o_off), *LO = (int64_t *)PyByteArray_AS_STRING(o_lo);
    int64_t *END = (int64_t *)PyByteArray_AS_STRING(o_end), *DST = (int64_t *)PyByteArray_AS_STRING(o_dst);
    int64_t *XOFF = (int64_t *)PyByteArray_AS_STRING(o_xoff), *XDST = (int64_t *)PyByteArray_AS_STRING(o_xdst);
    int64_t e = 0, x = 0;
    OFF[0] = XOFF[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = SEQ_ITEM(eps, i), *b = SEQ_ITEM(edges, i);
        for (Py_ssize_t j = 0; j < SEQ_LEN(a); j++) {
            long long t;
            if (get_ll(SEQ_ITEM(a, j), &t, "nfa_arrays: epsilon target")) goto fail;
            XDST[x++] = t;
        }
        for (Py_ssize_t j = 0; j < SEQ_LEN(b); j++) {
            long long lo, hi, t;
            if (get_edge(SEQ_ITEM(b, j), &lo, &hi, &t)) goto fail;
            LO[e] = lo; END[e] = hi + 1; DST[e++] = t;
        }
        OFF[i + 1] = e;
        XOFF[i + 1] = x;
    }
    return Py_BuildValue("(NNNNNN)", o_off, o_lo, o_end, o_dst, o_xoff, o_xdst);
fail:
    Py_XDECREF(o_off); Py_XDECREF(o_lo); Py_XDECREF(o_end); Py_XDECREF(o_dst); Py_XDECREF(o_xoff); Py_XDECREF(o_xdst);
    return NULL;
}

PyObject *native_byte_classes(PyObject *self, PyObject *args) {
    PyObject *o_trans;
    (void)self;
    if (!PyArg_ParseTuple(args, "O", &o_trans)) return NULL;
    Buf trans = {0};
    PyObject *result = NULL;
    if (get_buf(o_trans, &trans, "trans", 4, 0)) return NULL;
    if (trans.view.ndim != 2 || trans.view.shape[1] != 256) {
        PyErr_SetString(PyExc_ValueError, "byte_classes: expected an (n, 256) table");
        release(&trans);
        return NULL;
    }
    Py_ssize_t n = trans.view.shape[0];
    const int32_t *T = trans.view.buf;
    uint64_t h[256];
    for (int c = 0; c < 256; c++) h[c] = 0x9E3779B97F4A7C15ull;
    for (Py_ssize_t r = 0; r < n; r++) {   /* row by row: the table is read in memory order */
        const int32_t *row = T + r * 256;
        for (int c = 0; c < 256; c++) h[c] = (h[c] ^ (uint32_t)row[c]) * 0x100000001B3ull;
    }
    int64_t firsts[256];
    int n_cls = 0;
    for (int c = 0; c < 256; c++) {
        int same = -1;
        for (int k = 0; k < n_cls && same < 0; k++) {
            int f = (int)firsts[k];
            if (h[f] != h[c]) continue;
            Py_ssize_t r = 0;
            while (r < n && T[r * 256 + f] == T[r * 256 + c]) r++;
            if (r == n) same = k;
        }
        if (same < 0) firsts[n_cls++] = c;
    }
    result = PyBytes_FromStringAndSize((const char *)firsts, (Py_ssize_t)(8 * n_cls));
    release(&trans);
    return result;
}
