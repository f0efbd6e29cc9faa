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
#include "_native_subset.h"

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

/* ahead_rows(offsets, lo, end, dst, eps_off, eps_dst, live, owner, lazy_tid, accept_tid, univ_off, univ_dst,
 *            states, index, memo, trans, row_done, n_states, max_states, fuel_left, bytes_left, state_bytes,
 *            node_byte, node_end, node_tok, emit, nodes, node_states, out_nodes, out_states, made, fresh,
 *            dead, start[, member_prefix, subtree_chars, limit])
 *     -> (n_front, n_made, n_done, n_new, spent, nbytes, stopped, readings, reading_of)
 *
 * tabletrie.TrieTables._rows_ahead in one call. From the entries (nodes[i], node_states[i]) (a
 * trie node and the lexer state its bytes reach) the children are followed a byte layer at a
 * time: every child j of a layer's node is read from its state by its byte (a dead byte after an
 * accepting state restarts at ``start``), and (j, target) goes on to the next layer where the
 * target lives and j has children of its own, unless the slice (optional) answers every token
 * below j (subtree_chars[j] < limit and no non-member below: member_prefix equal at both ends of
 * j's tokens), as the walk skips them. Each layer's distinct states (ascending) are listed in
 * ``made`` and those without a row get it, in that order, as lazy_rows builds them (the same
 * arguments before node_byte, the same limits and state numbering; one batch for the whole call).
 * A state made in this call ends a lexeme exactly when its reading has an accepting terminal
 * (ByteDFA._best is -1 for none only), which ``emit`` (int64 per state, -1: ends no lexeme) says
 * of the states below n_states. ``fresh``: the entries' rows are built and they are not listed;
 * else they are a layer an earlier call stopped at ("room"), listed and built first.
 * ``stopped``: None (no layer left; n_front = 0); "room" (a layer's new states have no row in the
 * table yet: the layer is in out_nodes/out_states[:n_front], unlisted; the caller grows the table
 * and calls again with fresh = 0); or lazy_rows' "states", "bytes" or "fuel" (the batch stops
 * there). ``made`` and the out arrays (int64) hold at least as many entries as the trie nodes
 * below the entries. Node arrays as for trie_walk (uint8 bytes, int32 ends and token offsets).
 * The reference is _rows_ahead_python with ByteDFA.ensure_rows. An error undoes the call, as
 * lazy_rows does. */
PyObject *native_ahead_rows(PyObject *self, PyObject *args) {
    PyObject *o[NFA_ARRAYS], *states, *index, *o_memo, *o_trans, *o_done;
    PyObject *o_byte, *o_end, *o_ntok, *o_emit, *o_nodes, *o_nst, *o_on, *o_os, *o_made;
    PyObject *o_mps = Py_None, *o_subc = Py_None;
    Py_ssize_t n_states, max_states, state_bytes;
    long long fuel_left, bytes_left, dead, start, limit = 0;
    int fresh;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO!O!OOOnnLLnOOOOOOOOOpLL|OOL", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &PyDict_Type, &states, &PyDict_Type,
                          &index, &o_memo, &o_trans, &o_done, &n_states, &max_states, &fuel_left, &bytes_left,
                          &state_bytes, &o_byte, &o_end, &o_ntok, &o_emit, &o_nodes, &o_nst, &o_on, &o_os, &o_made,
                          &fresh, &dead, &start, &o_mps, &o_subc, &limit))
        return NULL;
    LazyBatch L;
    Buf byte = {0}, end = {0}, ntok = {0}, emit = {0}, nodes = {0}, nst = {0}, on = {0}, os_ = {0}, made = {0},
        mps = {0}, subc = {0};
    PyObject *result = NULL, *readings = NULL, *reading_obj = NULL;
    int64_t *cur_n = NULL, *cur_s = NULL, *nxt_n = NULL, *nxt_s = NULL, *sorted = NULL, *build = NULL;
    Py_ssize_t n_front = 0, n_made = 0;
    const char *stopped = NULL;
    int sliced = o_mps != Py_None;
    if (lazy_batch_open(&L, o, states, index, o_memo, o_trans, o_done, n_states, max_states, fuel_left, bytes_left,
                        state_bytes, "ahead_rows"))
        goto done;
    if (get_buf(o_byte, &byte, "node_byte", 1, 0) || get_buf(o_end, &end, "node_end", 4, 0) ||
        get_buf(o_ntok, &ntok, "node_tok", 4, 0) || get_buf(o_emit, &emit, "emit", 8, 0) ||
        get_buf(o_nodes, &nodes, "nodes", 8, 0) || get_buf(o_nst, &nst, "node_states", 8, 0) ||
        get_buf(o_on, &on, "out_nodes", 8, 1) || get_buf(o_os, &os_, "out_states", 8, 1) ||
        get_buf(o_made, &made, "made", 8, 1))
        goto done;
    if (sliced && (get_buf(o_mps, &mps, "member_prefix", 4, 0) || get_buf(o_subc, &subc, "subtree_chars", 4, 0)))
        goto done;
    Py_ssize_t n_nodes = LEN(byte, 1), n = LEN(nodes, 8), cap = LEN(on, 8), n_made_cap = LEN(made, 8);
    if (LEN(end, 4) != n_nodes || LEN(ntok, 4) != n_nodes + 1 || LEN(nst, 8) != n || LEN(os_, 8) != cap || n > cap ||
        n_states > LEN(emit, 8) || n_states > L.n_rows || (sliced && (LEN(subc, 4) != n_nodes || LEN(mps, 4) < 1))) {
        PyErr_SetString(PyExc_ValueError, "ahead_rows: array sizes do not match");
        goto done;
    }
    const uint8_t *B = byte.view.buf;
    unsigned char *DONE = L.row_done.view.buf;
    const int32_t *E = end.view.buf, *NT = ntok.view.buf, *T = L.trans.view.buf;
    const int32_t *MPS = sliced ? mps.view.buf : NULL, *SUBC = sliced ? subc.view.buf : NULL;
    Py_ssize_t n_mps = sliced ? LEN(mps, 4) : 0;
    const int64_t *EMIT = emit.view.buf;
    int64_t *MADE = made.view.buf;
    if (start <= dead || start >= n_states || !DONE[start]) {
        PyErr_SetString(PyExc_ValueError, "ahead_rows: the start state's row must be built");
        goto done;
    }
    size_t room = (size_t)(cap ? cap : 1);
    cur_n = malloc(sizeof(int64_t) * room); cur_s = malloc(sizeof(int64_t) * room);
    nxt_n = malloc(sizeof(int64_t) * room); nxt_s = malloc(sizeof(int64_t) * room);
    sorted = malloc(sizeof(int64_t) * room); build = malloc(sizeof(int64_t) * room);
    if (!cur_n || !cur_s || !nxt_n || !nxt_s || !sorted || !build) { PyErr_NoMemory(); goto done; }
    memcpy(cur_n, nodes.view.buf, sizeof(int64_t) * (size_t)n);
    memcpy(cur_s, nst.view.buf, sizeof(int64_t) * (size_t)n);
    Py_ssize_t m = n;
    for (int first = fresh;; first = 0) {
        if (!first) {           /* the layer's distinct states are listed; those without a row get it */
            memcpy(sorted, cur_s, sizeof(int64_t) * (size_t)m);
            sort_i64(sorted, (size_t)m);
            Py_ssize_t k = 0, nb = 0;
            int full = 0;
            for (Py_ssize_t i = 0; i < m; i++) {
                int64_t s = sorted[i];
                if (i && s == sorted[i - 1]) continue;
                if (s <= dead || s >= n_states + L.n_new) {
                    PyErr_Format(PyExc_ValueError, "ahead_rows: state %lld is not a live lexer state", (long long)s);
                    goto done;
                }
                if (n_made + k == n_made_cap) {
                    PyErr_SetString(PyExc_ValueError, "ahead_rows: the made array is full");
                    goto done;
                }
                MADE[n_made + k++] = s;
                if (s >= L.n_rows) full = 1;
                else if (!DONE[s]) build[nb++] = s;
            }
            if (full) {         /* the table must grow first: the layer goes back, unlisted */
                stopped = "room";
                memcpy(on.view.buf, cur_n, sizeof(int64_t) * (size_t)m);
                memcpy(os_.view.buf, cur_s, sizeof(int64_t) * (size_t)m);
                n_front = m;
                break;
            }
            n_made += k;
            if (nb && lazy_batch_rows(&L, build, nb)) goto done;
            if (L.stopped) { stopped = L.stopped; break; }
        }
        Py_ssize_t mm = 0;
        const int32_t *srow = T + start * 256;
        for (Py_ssize_t i = 0; i < m; i++) {
            int64_t k = cur_n[i], s = cur_s[i];
            if (k < 0 || k >= n_nodes || s <= dead || s >= L.n_rows || s >= n_states + L.n_new || !DONE[s]) {
                PyErr_Format(PyExc_ValueError, "ahead_rows: entry %zd (node %lld, state %lld) is not walkable", i,
                             (long long)k, (long long)s);
                goto done;
            }
            const int32_t *row = T + s * 256;
            int ends = s < n_states ? EMIT[s] >= 0 : L.accepting[s - n_states];
            int64_t stop = E[k];
            if (stop <= k || stop > n_nodes) {
                PyErr_Format(PyExc_ValueError, "ahead_rows: node %lld is malformed", (long long)k);
                goto done;
            }
            for (int64_t j = k + 1; j < stop;) {     /* k's children: the next sibling of j is end[j] */
                int64_t stop_j = E[j];
                if (stop_j <= j || stop_j > stop) {
                    PyErr_Format(PyExc_ValueError, "ahead_rows: node %lld is malformed", (long long)j);
                    goto done;
                }
                int64_t t = row[B[j]];
                if (t == dead && ends) t = srow[B[j]];
                if (t != dead && stop_j > j + 1) {
                    int skip = 0;
                    if (sliced) {
                        int64_t a = NT[stop_j], z = NT[j + 1];
                        if (a >= n_mps || z >= n_mps || a < 0 || z < 0) {
                            PyErr_SetString(PyExc_IndexError, "ahead_rows: token offset past member_prefix");
                            goto done;
                        }
                        skip = SUBC[j] < limit && MPS[a] == MPS[z];
                    }
                    if (!skip) {
                        if (mm == cap) {
                            PyErr_SetString(PyExc_ValueError, "ahead_rows: the out arrays are full");
                            goto done;
                        }
                        nxt_n[mm] = j;
                        nxt_s[mm++] = t;
                    }
                }
                j = stop_j;
            }
        }
        if (!mm) break;
        int64_t *t;
        t = cur_n; cur_n = nxt_n; nxt_n = t;
        t = cur_s; cur_s = nxt_s; nxt_s = t;
        m = mm;
    }
    if (lazy_batch_readings(&L, &readings, &reading_obj)) goto done;
    result = Py_BuildValue("(nnnLLLzOO)", n_front, n_made, (Py_ssize_t)L.n_done, (long long)L.n_new, L.spent,
                           L.nbytes, stopped, readings, reading_obj);
done:
    lazy_batch_close(&L, result == NULL);
    Py_XDECREF(readings); Py_XDECREF(reading_obj);
    free(cur_n); free(cur_s); free(nxt_n); free(nxt_s); free(sorted); free(build);
    release(&byte); release(&end); release(&ntok); release(&emit); release(&nodes); release(&nst); release(&on);
    release(&os_); release(&made); release(&mps); release(&subc);
    return result;
}

/* utf8_lands(trans, row_done, keys, target, bound, dead, verdict) -> missing (int64 bytes)
 *
 * tableslices.SliceShortcuts._rest_lands for many pairs at once: keys[i] = p << 3 | u, a lexer
 * state p inside a UTF-8 character (acceptor state u, 1..7: the byte ranges below). verdict[i]
 * (int8, written): 1 where every way to finish the character from p reaches ``target`` with no
 * dead byte on the way (at most ``bound`` <= 64 distinct lexer states per byte range, else 0, as
 * the reference gives up), 0 where not, -1 where a row it needs is not built: the states whose rows
 * were missing come back (distinct, any order) for Python to build, then call again.
 * A pure function of the rows: the reference is _rest_lands. */
static const int U8_LO[8] = {0, 0x80, 0x80, 0x80, 0xA0, 0x80, 0x90, 0x80};
static const int U8_HI[8] = {0, 0xBF, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
static const int U8_NEXT[8] = {0, 0, 1, 2, 1, 1, 2, 2};

typedef struct {
    const int32_t *T;
    const uint8_t *DONE;
    Py_ssize_t n_done;
    int64_t target, dead;
    int bound;
    int64_t *mkey; int8_t *mval; size_t mcap, mn;   /* memo: open addressing, key -1 empty */
    I64Set *missing;
    int err;
} Lands;

static int lands_memo_grow(Lands *L) {
    size_t cap = L->mcap * 2;
    int64_t *k = malloc(cap * sizeof(int64_t));
    int8_t *v = malloc(cap);
    if (!k || !v) { free(k); free(v); return -1; }
    for (size_t i = 0; i < cap; i++) k[i] = -1;
    for (size_t i = 0; i < L->mcap; i++) {
        if (L->mkey[i] < 0) continue;
        size_t at = ((uint64_t)L->mkey[i] * 0x9E3779B97F4A7C15ULL >> 17) & (cap - 1);
        while (k[at] >= 0) at = (at + 1) & (cap - 1);
        k[at] = L->mkey[i]; v[at] = L->mval[i];
    }
    free(L->mkey); free(L->mval);
    L->mkey = k; L->mval = v; L->mcap = cap;
    return 0;
}

static int lands_one(Lands *L, int64_t p, int u) {
    int64_t key = p << 3 | u;
    size_t at = ((uint64_t)key * 0x9E3779B97F4A7C15ULL >> 17) & (L->mcap - 1);
    while (L->mkey[at] >= 0) {
        if (L->mkey[at] == key) return L->mval[at];
        at = (at + 1) & (L->mcap - 1);
    }
    int out;
    if (p <= L->dead || p >= L->n_done) {
        PyErr_Format(PyExc_IndexError, "utf8_lands: state %lld out of range", (long long)p);
        L->err = 1;
        return 0;
    }
    if (!L->DONE[p]) {
        if (iset_add(L->missing, p) < 0) { PyErr_NoMemory(); L->err = 1; return 0; }
        out = -1;
    } else {
        const int32_t *row = L->T + p * 256;
        int lo = U8_LO[u], hi = U8_HI[u], nu = U8_NEXT[u];
        out = 1;
        if (nu == 0) {
            for (int b = lo; b <= hi && out == 1; b++) if (row[b] != L->target) out = 0;
        } else {
            int64_t seen[64];
            int n_seen = 0;
            for (int b = lo; b <= hi && out == 1; b++) {
                int64_t r = row[b];
                if (r == L->dead) { out = 0; break; }
                int found = 0;
                for (int i = 0; i < n_seen; i++) if (seen[i] == r) { found = 1; break; }
                if (found) continue;
                if (n_seen == L->bound || n_seen == 64) { out = 0; break; }
                seen[n_seen++] = r;
            }
            int unknown = 0;
            for (int i = 0; i < n_seen && out == 1; i++) {
                int v = lands_one(L, seen[i], nu);
                if (L->err) return 0;
                if (v == 0) out = 0;
                else if (v < 0) unknown = 1;
            }
            if (out == 1 && unknown) out = -1;
        }
    }
    /* memoise (the table may have grown inside the recursion: look the slot up again) */
    if ((L->mn + 1) * 2 > L->mcap && lands_memo_grow(L) < 0) { PyErr_NoMemory(); L->err = 1; return 0; }
    at = ((uint64_t)key * 0x9E3779B97F4A7C15ULL >> 17) & (L->mcap - 1);
    while (L->mkey[at] >= 0) at = (at + 1) & (L->mcap - 1);
    L->mkey[at] = key; L->mval[at] = (int8_t)out; L->mn++;
    return out;
}

PyObject *native_utf8_lands(PyObject *self, PyObject *args) {
    PyObject *o_trans, *o_done, *o_keys, *o_out;
    long long target, dead;
    int bound;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOLiLO", &o_trans, &o_done, &o_keys, &target, &bound, &dead, &o_out))
        return NULL;
    Buf trans = {0}, done_ = {0}, keys = {0}, outb = {0};
    I64Set missing = {0};
    Lands L = {0};
    PyObject *result = NULL;
    if (get_buf(o_trans, &trans, "trans", 4, 0) || get_buf(o_done, &done_, "row_done", 1, 0) ||
        get_buf(o_keys, &keys, "keys", 8, 0) || get_buf(o_out, &outb, "verdict", 1, 1))
        goto done;
    Py_ssize_t n = LEN(keys, 8), n_rows = LEN(trans, 4) / 256, n_done = LEN(done_, 1);
    if (LEN(outb, 1) != n || LEN(trans, 4) % 256 || n_done > n_rows || bound < 1 || bound > 64) {
        PyErr_SetString(PyExc_ValueError, "utf8_lands: array sizes do not match");
        goto done;
    }
    L.T = trans.view.buf; L.DONE = done_.view.buf; L.n_done = n_done; L.target = target; L.dead = dead;
    L.bound = bound; L.mcap = 64;
    L.mkey = malloc(L.mcap * sizeof(int64_t)); L.mval = malloc(L.mcap);
    if (!L.mkey || !L.mval || iset_init(&missing, 64)) { PyErr_NoMemory(); goto done; }
    L.missing = &missing;
    for (size_t i = 0; i < L.mcap; i++) L.mkey[i] = -1;
    const int64_t *K = keys.view.buf;
    int8_t *V = outb.view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = K[i] >> 3;
        int u = (int)(K[i] & 7);
        if (K[i] < 0 || u < 1) {
            PyErr_Format(PyExc_ValueError, "utf8_lands: key %lld is not a state inside a character", (long long)K[i]);
            goto done;
        }
        int v = lands_one(&L, p, u);
        if (L.err) goto done;
        V[i] = (int8_t)v;
    }
    {
        int64_t *all = malloc((missing.n ? missing.n : 1) * sizeof(int64_t));
        if (!all) { PyErr_NoMemory(); goto done; }
        size_t m = 0;
        for (size_t j = 0; j < missing.cap; j++)
            if (missing.slot[j] >= 0) all[m++] = missing.slot[j];
        result = PyBytes_FromStringAndSize((const char *)all, (Py_ssize_t)(m * sizeof(int64_t)));
        free(all);
    }
done:
    free(L.mkey); free(L.mval); free(missing.slot);
    release(&trans); release(&done_); release(&keys); release(&outb);
    return result;
}
