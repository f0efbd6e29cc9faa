/* guidewire.grammar._native: the epsilon closure of a set of NFA states (lexer.ByteDFA).
 *
 * eps_closure(eps_off, eps_dst, live, seeds) -> tuple
 *
 * The live NFA states reachable from the live states of seeds by epsilon moves (eps_dst[eps_off[s]:
 * eps_off[s + 1]] are state s's), as a sorted tuple of distinct ints that the cyclic collector does
 * not track: a new lexer state's key. A seed that is not live adds nothing. eps_off and eps_dst are
 * int64 arrays, live a byte per NFA state. The reference is ByteDFA._closure (per-seed closures
 * by a depth-first search in Python, memoised, then their union).
 */
#include "_native_buf.h"
#include "_native_iset.h"

PyObject *native_eps_closure(PyObject *self, PyObject *args) {
    PyObject *o_off, *o_dst, *o_live, *o_seeds;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &o_off, &o_dst, &o_live, &o_seeds)) return NULL;
    Buf off = {0}, dst = {0}, live = {0};
    I64Set seen = {0};
    I64Vec stack = {0};
    PyObject *seeds = NULL, *result = NULL;
    int64_t *all = NULL;
    if (get_buf(o_off, &off, "eps_off", 8, 0) || get_buf(o_dst, &dst, "eps_dst", 8, 0) ||
        get_buf(o_live, &live, "live", 1, 0))
        goto done;
    Py_ssize_t n_nfa = LEN(off, 8) - 1, n_eps = LEN(dst, 8);
    const int64_t *OFF = off.view.buf, *DST = dst.view.buf;
    const uint8_t *LIVE = live.view.buf;
    if (n_nfa < 0 || LEN(live, 1) != n_nfa || (n_nfa >= 0 && (OFF[0] < 0 || OFF[n_nfa] > n_eps))) {
        PyErr_SetString(PyExc_ValueError, "eps_closure: the epsilon arrays do not match");
        goto done;
    }
    seeds = PySequence_Fast(o_seeds, "eps_closure: seeds must be a sequence of ints");
    if (!seeds) goto done;
    Py_ssize_t n_seeds = PySequence_Fast_GET_SIZE(seeds);
    if (iset_init(&seen, (size_t)n_seeds * 4 + 16)) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n_seeds; i++) {
        long long s = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seeds, i));
        if (s == -1 && PyErr_Occurred()) goto done;
        if (s < 0 || s >= n_nfa) { PyErr_SetString(PyExc_ValueError, "eps_closure: a seed out of range"); goto done; }
        if (!LIVE[s]) continue;
        int r = iset_add(&seen, s);
        if (r < 0 || (r && ivec_push(&stack, s) < 0)) { PyErr_NoMemory(); goto done; }
    }
    while (stack.n) {
        int64_t s = stack.v[--stack.n];
        int64_t a = OFF[s], b = OFF[s + 1];
        if (a < 0 || a > b || b > n_eps) { PyErr_SetString(PyExc_ValueError, "eps_closure: bad epsilon offsets"); goto done; }
        for (int64_t e = a; e < b; e++) {
            int64_t t = DST[e];
            if (t < 0 || t >= n_nfa) { PyErr_SetString(PyExc_ValueError, "eps_closure: an epsilon target out of range"); goto done; }
            if (!LIVE[t]) continue;
            int r = iset_add(&seen, t);
            if (r < 0 || (r && ivec_push(&stack, t) < 0)) { PyErr_NoMemory(); goto done; }
        }
    }
    all = iset_sorted(&seen);
    if (!all) goto done;
    result = PyTuple_New((Py_ssize_t)seen.n);
    if (!result) goto done;
    for (size_t i = 0; i < seen.n; i++) {
        PyObject *x = PyLong_FromLongLong(all[i]);
        if (!x) { Py_CLEAR(result); goto done; }
        PyTuple_SET_ITEM(result, (Py_ssize_t)i, x);
    }
    untrack_int_tuple(result);
done:
    free(all);
    free(seen.slot);
    free(stack.v);
    Py_XDECREF(seeds);
    release(&off); release(&dst); release(&live);
    return result;
}
