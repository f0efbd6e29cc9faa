/* guidewire.grammar._native: the walk ahead of stopped tokens through a lazy lexer's own rows
 * (tablewalk.TokenWalker._build_ahead), so that the rows they will reach are built in batches.
 *
 * ahead(trans, row_done, emit, flat, active, q, p, count, idle, layer, max_tracked, idle_max,
 *       max_layers, dead, start) -> (passed, stopped)
 *
 * trans: the lexer's rows (int32, rows x 256); row_done (uint8): whether a row is built; emit (int64):
 * each state's emitted set (-1: none), at least as long as the states reached; flat: the layout's
 * uint16 bytes (sentinel 256). Per token (int64 arrays, in/out): its state q, the flat position p of
 * its next byte, count (lexemes ended so far), idle (bytes since it last met a row not built; -1:
 * the row it sits at was just built), layer (states it has passed). Only the tokens listed in
 * ``active`` move. A token is followed state by state: a state whose row is not built stops it
 * (listed as stopped, idle set to -1: Python builds the row and calls again); else the state counts as
 * passed (after the first), idle grows by one (or restarts at 0 on a row just built), and the
 * token ends at its sentinel, past ``idle_max`` idle bytes, past ``max_layers`` states,
 * at a dead end, or past ``max_tracked`` lexemes; a lexeme's end restarts it from ``start``, as the
 * walk does. Returns the distinct states passed (int64 bytes, any order) and the indices of the
 * stopped tokens (int64 bytes). The reference is the numpy layer loop of _build_ahead.
 */
#include "_native_iset.h"

PyObject *native_ahead(PyObject *self, PyObject *args) {
    PyObject *o_trans, *o_done, *o_emit, *o_flat, *o_active, *o_q, *o_p, *o_count, *o_idle, *o_layer;
    int max_tracked, idle_max, max_layers;
    long long dead, start;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOiiiLL", &o_trans, &o_done, &o_emit, &o_flat, &o_active, &o_q, &o_p,
                          &o_count, &o_idle, &o_layer, &max_tracked, &idle_max, &max_layers, &dead,
                          &start))
        return NULL;
    Buf trans = {0}, done_ = {0}, emit = {0}, flat = {0}, active = {0}, qb = {0}, pb = {0}, cb = {0}, ib = {0},
        lb = {0};
    I64Set passed = {0};
    I64Vec stopped = {0};
    PyObject *result = NULL;
    if (get_buf(o_trans, &trans, "trans", 4, 0) || get_buf(o_done, &done_, "row_done", 1, 0) ||
        get_buf(o_emit, &emit, "emit", 8, 0) || get_buf(o_flat, &flat, "flat", 2, 0) ||
        get_buf(o_active, &active, "active", 8, 0) || get_buf(o_q, &qb, "q", 8, 1) || get_buf(o_p, &pb, "p", 8, 1) ||
        get_buf(o_count, &cb, "count", 8, 1) || get_buf(o_idle, &ib, "idle", 8, 1) ||
        get_buf(o_layer, &lb, "layer", 8, 1))
        goto done;
    Py_ssize_t n = LEN(qb, 8), n_rows = LEN(trans, 4) / 256, n_done = LEN(done_, 1), n_emit = LEN(emit, 8),
               n_flat = LEN(flat, 2), n_active = LEN(active, 8);
    if (LEN(pb, 8) != n || LEN(cb, 8) != n || LEN(ib, 8) != n || LEN(lb, 8) != n ||
        LEN(trans, 4) % 256 || n_done > n_rows) {
        PyErr_SetString(PyExc_ValueError, "ahead: array sizes do not match");
        goto done;
    }
    if (start <= dead || start >= n_done || start >= n_emit || !((const uint8_t *)done_.view.buf)[start]) {
        PyErr_SetString(PyExc_ValueError, "ahead: the start state's row must be built");
        goto done;
    }
    if (iset_init(&passed, 256)) { PyErr_NoMemory(); goto done; }
    const int32_t *T = trans.view.buf;
    const uint8_t *DONE = done_.view.buf;
    const int64_t *EMIT = emit.view.buf, *ACT = active.view.buf;
    const uint16_t *FLAT = flat.view.buf;
    int64_t *Q = qb.view.buf, *P = pb.view.buf, *C = cb.view.buf, *I = ib.view.buf, *L = lb.view.buf;
    for (Py_ssize_t k = 0; k < n_active; k++) {
        int64_t i = ACT[k];
        if (i < 0 || i >= n) {
            PyErr_Format(PyExc_IndexError, "ahead: token %lld out of range", (long long)i);
            goto done;
        }
        int64_t q = Q[i], p = P[i], count = C[i], idle = I[i], layer = L[i];
        for (;;) {
            if (q <= dead || q >= n_done || q >= n_emit) {
                PyErr_Format(PyExc_IndexError, "ahead: state %lld out of range", (long long)q);
                goto done;
            }
            if (!DONE[q]) {             /* stop here: Python builds the row */
                idle = -1;
                if (ivec_push(&stopped, i)) { PyErr_NoMemory(); goto done; }
                break;
            }
            idle = idle < 0 ? 0 : idle + 1;
            if (layer > 0 && iset_add(&passed, q) < 0) { PyErr_NoMemory(); goto done; }
            layer++;
            if (p < 0 || p >= n_flat) {
                PyErr_Format(PyExc_IndexError, "ahead: token %lld runs past the flat layout", (long long)i);
                goto done;
            }
            int64_t b = FLAT[p];
            if (b >= 256 || idle > idle_max || layer >= max_layers) break;
            int64_t t = T[q * 256 + b];
            if (t == dead) {            /* a lexeme ends before b: restart at start if it emits */
                if (EMIT[q] < 0) break;
                t = T[start * 256 + b];
                count++;
                if (count > max_tracked || t == dead) break;
            }
            q = t;
            p++;
        }
        Q[i] = q; P[i] = p; C[i] = count; I[i] = idle; L[i] = layer;
    }
    {
        int64_t *all = malloc((passed.n ? passed.n : 1) * sizeof(int64_t));
        if (!all) { PyErr_NoMemory(); goto done; }
        size_t m = 0;
        for (size_t j = 0; j < passed.cap; j++)
            if (passed.slot[j] >= 0) all[m++] = passed.slot[j];
        PyObject *a = PyBytes_FromStringAndSize((const char *)all, (Py_ssize_t)(m * sizeof(int64_t)));
        free(all);
        if (!a) goto done;
        PyObject *b = PyBytes_FromStringAndSize((const char *)stopped.v, (Py_ssize_t)(stopped.n * sizeof(int64_t)));
        if (!b) { Py_DECREF(a); goto done; }
        result = PyTuple_Pack(2, a, b);
        Py_DECREF(a);
        Py_DECREF(b);
    }
done:
    free(passed.slot);
    free(stopped.v);
    release(&trans); release(&done_); release(&emit); release(&flat); release(&active); release(&qb);
    release(&pb); release(&cb); release(&ib); release(&lb);
    return result;
}
