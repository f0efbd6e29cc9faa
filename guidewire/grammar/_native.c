/* guidewire.grammar._native: compiled inner loops of the lexer and the token-table walk.
 *
 * Optional: every function here has a pure Python/numpy reference (lexer.ByteDFA._sweep and
 * tablewalk.TokenWalker._walk) that gives the same results and is used when this module is
 * not built or GUIDEWIRE_NATIVE=0. The tests compare the two on random inputs.
 *
 * Arrays come in through the buffer protocol (numpy int64 / int32 / bool, C-contiguous);
 * nothing here keeps a reference to them after it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_native_buf.h"

/* the trie walk of a token table (_native_trie.c) */
PyObject *native_trie_walk(PyObject *self, PyObject *args);
PyObject *native_earley_make(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *native_pick_groups(PyObject *self, PyObject *args);
PyObject *native_earley_predict(PyObject *self, PyObject *args);
PyObject *native_earley_closure(PyObject *self, PyObject *args);
PyObject *native_eps_closure(PyObject *self, PyObject *args);
PyObject *native_slice_members(PyObject *self, PyObject *args);
PyObject *native_slice_rows(PyObject *self, PyObject *args);
PyObject *native_slice_trie(PyObject *self, PyObject *args);
PyObject *native_byte_row(PyObject *self, PyObject *args);
PyObject *native_first_outside(PyObject *self, PyObject *args);
PyObject *native_ahead(PyObject *self, PyObject *args);
PyObject *native_ahead_rows(PyObject *self, PyObject *args);
PyObject *native_utf8_lands(PyObject *self, PyObject *args);
PyObject *native_byte_words(PyObject *self, PyObject *args);
PyObject *native_trie_refs(PyObject *self, PyObject *args);
PyObject *native_reusable_hubs(PyObject *self, PyObject *args);
PyObject *native_splice(PyObject *self, PyObject *args);
PyObject *native_grow_states(PyObject *self, PyObject *args);
PyObject *native_template_into(PyObject *self, PyObject *args);
PyObject *native_refine(PyObject *self, PyObject *args);
PyObject *native_refine_split(PyObject *self, PyObject *args);
PyObject *native_freeze_lists(PyObject *self, PyObject *lists);
PyObject *native_untrack_nested(PyObject *self, PyObject *obj);
PyObject *native_gc_free_list(PyObject *self, PyObject *unused);
PyObject *native_fragment_facts(PyObject *self, PyObject *args);
PyObject *native_nfa_arrays(PyObject *self, PyObject *args);
PyObject *native_byte_classes(PyObject *self, PyObject *args);
/* the lexer's subset construction, whole and row by row (_native_subset.c) */
PyObject *native_determinize(PyObject *self, PyObject *args);
PyObject *native_lazy_rows(PyObject *self, PyObject *args);
PyObject *native_subset_memo(PyObject *self, PyObject *args);


/* ---------------------------------------------------------------------------------------------
 * walk(trans, emit, row_done, hub, busy, loops, flat (uint16), state, ptr, origin, ends, fin, nb, lex,
 *      pending, met_on, max_tracked, dead, start) -> (steps, n_pending)
 *
 * Walks each token from ``state[i]`` at flat position ``ptr[i]`` to ``ends[i]`` through the
 * extended transition table ``trans`` (rows of ROW = 257 int64; column 256 is the sentinel, sent
 * to -1 - state), as tablewalk.TokenWalker._walk does, one token at a time. In/out per token:
 * state, ptr, nb (completed lexemes), lex (max_tracked x n, the first lexemes), fin (final
 * state; DEAD if unlexable or too many lexemes). ``pending[i]`` is set to 1 when the token
 * stopped at a state whose row is not built yet (``row_done`` 0): state/ptr/nb/lex then hold
 * where to resume. With ``met_on``, a token that sits in a hub state h (hub[h] = slot >= 0)
 * having ended no lexeme and read only loop bytes of that slot since ``origin[i]``, h not ``busy``,
 * leaves the walk: pending[i] = 2, state[i] = h. ``loops`` (uint8, n_slots x 256) holds each hub
 * slot's loop bytes (nonzero: the byte loops); a hub state skips the run of its loop bytes in one
 * scan (its row is not read for them). Run ends precomputed over the whole layout cost 9 MB and
 * ~15 ms per new hub on Gemma-3's vocabulary, for runs a token crosses once.
 */
static PyObject *native_walk(PyObject *self, PyObject *args) {
    PyObject *o_trans, *o_emit, *o_done, *o_hub, *o_busy, *o_loops, *o_flat, *o_state, *o_ptr, *o_origin,
        *o_ends, *o_fin, *o_nb, *o_lex, *o_pending;
    int met_on, max_tracked;
    long long dead, start;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOiiLL", &o_trans, &o_emit, &o_done, &o_hub, &o_busy, &o_loops,
                          &o_flat, &o_state, &o_ptr, &o_origin, &o_ends, &o_fin, &o_nb, &o_lex, &o_pending,
                          &met_on, &max_tracked, &dead, &start))
        return NULL;
    Buf trans = {0}, emit = {0}, done_ = {0}, hub = {0}, busy = {0}, flat = {0}, state = {0}, ptr = {0},
        origin = {0}, ends = {0}, fin = {0}, nb = {0}, lex = {0}, pending = {0}, loops = {0};
    PyObject *result = NULL;
    if (get_buf(o_trans, &trans, "trans", 8, 0) || get_buf(o_emit, &emit, "emit", 8, 0) ||
        get_buf(o_done, &done_, "row_done", 1, 0) || get_buf(o_hub, &hub, "hub", 8, 0) ||
        get_buf(o_busy, &busy, "busy", 1, 0) || get_buf(o_flat, &flat, "flat", 2, 0) ||
        get_buf(o_state, &state, "state", 8, 1) || get_buf(o_ptr, &ptr, "ptr", 8, 1) ||
        get_buf(o_origin, &origin, "origin", 8, 0) || get_buf(o_ends, &ends, "ends", 8, 0) ||
        get_buf(o_fin, &fin, "fin", 8, 1) || get_buf(o_nb, &nb, "nb", 8, 1) || get_buf(o_lex, &lex, "lex", 8, 1) ||
        get_buf(o_pending, &pending, "pending", 1, 1) || get_buf(o_loops, &loops, "loops", 1, 0))
        goto done;
    if (LEN(loops, 1) % 256) {
        PyErr_SetString(PyExc_ValueError, "walk: loops must be n_slots x 256 bytes");
        goto done;
    }
    const Py_ssize_t n_slots = LEN(loops, 1) / 256;
    const uint8_t *LOOPS = loops.view.buf;
    const Py_ssize_t ROW = 257;
    const uint16_t *FLAT = flat.view.buf;
    const int64_t *T = trans.view.buf, *EMIT = emit.view.buf, *HUB = hub.view.buf,
                  *ORIGIN = origin.view.buf, *ENDS = ends.view.buf;
    const unsigned char *DONE = done_.view.buf, *BUSY = busy.view.buf;
    int64_t *S = state.view.buf, *P = ptr.view.buf, *FIN = fin.view.buf, *NB = nb.view.buf, *LEX = lex.view.buf;
    unsigned char *PEND = pending.view.buf;
    Py_ssize_t n = LEN(state, 8), n_rows = LEN(trans, 8) / ROW, n_flat = LEN(flat, 2);
    Py_ssize_t n_emit = LEN(emit, 8), n_done = LEN(done_, 1), n_hub = LEN(hub, 8), n_busy = LEN(busy, 1);
    if (LEN(ptr, 8) != n || LEN(origin, 8) != n || LEN(ends, 8) != n || LEN(fin, 8) != n || LEN(nb, 8) != n ||
        LEN(pending, 1) != n || LEN(lex, 8) != (Py_ssize_t)max_tracked * n || max_tracked < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: per-token arrays differ in length");
        goto done;
    }
    if (n_emit < n_rows || n_done < n_rows || n_hub < n_rows || n_busy < n_rows || start < 0 || start >= n_rows) {
        PyErr_SetString(PyExc_ValueError, "walk: state arrays shorter than the transition table");
        goto done;
    }
    int64_t steps = 0, n_pending = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t q = S[i], p = P[i], count = NB[i];
        const int64_t org = ORIGIN[i], e_end = ENDS[i];
        PEND[i] = 0;
        if (p < 0 || e_end >= n_flat || p > e_end || org < 0 || org >= n_flat) {
            PyErr_Format(PyExc_IndexError, "walk: token %zd: bad position", i);
            goto done;
        }
        for (;;) {
            if (q <= dead || q >= n_rows) {   /* a state outside the table: not built yet */
                if (q > dead) { PEND[i] = 1; n_pending++; break; }
                FIN[i] = dead; break;
            }
            if (!DONE[q]) { PEND[i] = 1; n_pending++; break; }
            steps++;
            int64_t slot = HUB[q];
            if (slot >= 0) {
                if (slot >= n_slots) {
                    PyErr_Format(PyExc_ValueError, "walk: hub slot %lld has no loop bytes", (long long)slot);
                    goto done;
                }
                const uint8_t *LP = LOOPS + slot * 256;
                if (met_on && count == 0 && !BUSY[q]) {   /* read only loop bytes since the first? */
                    int64_t r = org;
                    while (r < p && FLAT[r] < 256 && LP[FLAT[r]]) r++;
                    if (r >= p) { PEND[i] = 2; n_pending++; break; }
                }
                while (p < n_flat && FLAT[p] < 256 && LP[FLAT[p]]) p++;
            }
            if (p >= n_flat) {
                PyErr_Format(PyExc_IndexError, "walk: token %zd runs past the flat layout", i);
                goto done;
            }
            int64_t b = FLAT[p];
            if (b < 0 || b >= ROW) {
                PyErr_Format(PyExc_ValueError, "walk: byte %lld is not in 0..256", (long long)b);
                goto done;
            }
            int64_t nxt = T[q * ROW + b];
            if (nxt <= dead) {
                if (nxt < dead) { FIN[i] = -1 - nxt; break; }   /* the sentinel: the token ended */
                int64_t e = EMIT[q];
                int64_t restart = T[start * ROW + b];
                if (e < 0 || restart <= dead) { FIN[i] = dead; break; }
                if (count < max_tracked) LEX[count * n + i] = e;
                count++;
                if (count > max_tracked) { FIN[i] = dead; break; }   /* regrouped exactly later */
                nxt = restart;
            }
            q = nxt;
            p++;
        }
        S[i] = q;
        P[i] = p;
        NB[i] = count;
    }
    result = Py_BuildValue("(LL)", (long long)steps, (long long)n_pending);
done:
    release(&trans); release(&emit); release(&done_); release(&hub); release(&busy); release(&flat);
    release(&state); release(&ptr); release(&origin); release(&ends); release(&fin); release(&nb);
    release(&lex); release(&pending); release(&loops);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * group(tokens, fin, nb, lex, alive_id, gid, keys) -> n_groups
 *
 * Groups walked tokens by (completed lexemes, alive set), as tablegroups.TokenGrouping._group_keys
 * does: a token is grouped when alive_id[fin[i]] >= 0 and nb[i] <= max_tracked (lex rows hold its
 * lexemes, -1 padded). Writes gid[i] (the token's group, -1 if not grouped) and, per group in order
 * of first appearance, keys[g] = (nb, lex_0, ..., lex_{max_tracked-1}, alive id), a row of
 * max_tracked + 2 int64. ``tokens`` are the token ids (used by scatter below, not here).
 */
typedef struct { int64_t h; int64_t g; } Slot;

static PyObject *native_group(PyObject *self, PyObject *args) {
    PyObject *o_fin, *o_nb, *o_lex, *o_alive, *o_gid, *o_keys;
    int max_tracked;
    if (!PyArg_ParseTuple(args, "OOOOOOi", &o_fin, &o_nb, &o_lex, &o_alive, &o_gid, &o_keys, &max_tracked))
        return NULL;
    Buf fin = {0}, nb = {0}, lex = {0}, alive = {0}, gid = {0}, keys = {0};
    Slot *table = NULL;
    PyObject *result = NULL;
    if (get_buf(o_fin, &fin, "fin", 8, 0) || get_buf(o_nb, &nb, "nb", 8, 0) || get_buf(o_lex, &lex, "lex", 8, 0) ||
        get_buf(o_alive, &alive, "alive_id", 8, 0) || get_buf(o_gid, &gid, "gid", 8, 1) ||
        get_buf(o_keys, &keys, "keys", 8, 1))
        goto done;
    Py_ssize_t n = LEN(fin, 8), n_alive = LEN(alive, 8), width = (Py_ssize_t)max_tracked + 2;
    if (max_tracked < 0 || LEN(nb, 8) != n || LEN(gid, 8) != n || LEN(lex, 8) != (Py_ssize_t)max_tracked * n ||
        LEN(keys, 8) < n * width) {
        PyErr_SetString(PyExc_ValueError, "group: array sizes do not match");
        goto done;
    }
    const int64_t *FIN = fin.view.buf, *NB = nb.view.buf, *LEX = lex.view.buf, *ALIVE = alive.view.buf;
    int64_t *GID = gid.view.buf, *KEYS = keys.view.buf;
    /* open addressing, grown (rehashed) at half load: tables hold tens of groups, not n */
    size_t cap = 256;
    table = malloc(cap * sizeof(Slot));
    if (!table) { PyErr_NoMemory(); goto done; }
    for (size_t k = 0; k < cap; k++) table[k].g = -1;
    int64_t n_groups = 0, last = -1;   /* last: the previous grouped token's group (runs share keys) */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t f = FIN[i], c = NB[i];
        GID[i] = -1;
        if (f < 0 || f >= n_alive) {
            PyErr_Format(PyExc_IndexError, "group: final state %lld out of range", (long long)f);
            goto done;
        }
        int64_t a = ALIVE[f];
        if (a < 0 || c > max_tracked) continue;
        if (last >= 0) {
            const int64_t *key = KEYS + last * width;
            int same = key[0] == c && key[1 + max_tracked] == a;
            for (int k = 0; k < max_tracked && same; k++) same = key[1 + k] == LEX[(Py_ssize_t)k * n + i];
            if (same) { GID[i] = last; continue; }
        }
        uint64_t h = 1469598103934665603ULL;
        h = (h ^ (uint64_t)c) * 1099511628211ULL;
        for (int k = 0; k < max_tracked; k++) h = (h ^ (uint64_t)(LEX[(Py_ssize_t)k * n + i] + 1)) * 1099511628211ULL;
        h = (h ^ (uint64_t)a) * 1099511628211ULL;
        size_t at = (size_t)(h ^ (h >> 29)) & (cap - 1);
        for (;;) {
            Slot *sl = &table[at];
            if (sl->g < 0) {   /* a new group */
                int64_t *key = KEYS + n_groups * width;
                key[0] = c;
                for (int k = 0; k < max_tracked; k++) key[1 + k] = LEX[(Py_ssize_t)k * n + i];
                key[1 + max_tracked] = a;
                sl->h = (int64_t)h;
                sl->g = n_groups++;
                GID[i] = sl->g;
                break;
            }
            if (sl->h == (int64_t)h) {
                const int64_t *key = KEYS + sl->g * width;
                int same = key[0] == c && key[1 + max_tracked] == a;
                for (int k = 0; k < max_tracked && same; k++) same = key[1 + k] == LEX[(Py_ssize_t)k * n + i];
                if (same) { GID[i] = sl->g; break; }
            }
            at = (at + 1) & (cap - 1);
        }
        last = GID[i];
        if ((size_t)n_groups * 2 > cap) {   /* rehash into twice the slots */
            size_t ncap = cap * 2;
            Slot *grown = malloc(ncap * sizeof(Slot));
            if (!grown) { PyErr_NoMemory(); goto done; }
            for (size_t k = 0; k < ncap; k++) grown[k].g = -1;
            for (size_t k = 0; k < cap; k++) {
                if (table[k].g < 0) continue;
                uint64_t hh = (uint64_t)table[k].h;
                size_t to = (size_t)(hh ^ (hh >> 29)) & (ncap - 1);
                while (grown[to].g >= 0) to = (to + 1) & (ncap - 1);
                grown[to] = table[k];
            }
            free(table);
            table = grown;
            cap = ncap;
        }
    }
    result = PyLong_FromLongLong(n_groups);
done:
    free(table);
    release(&fin); release(&nb); release(&lex); release(&alive); release(&gid); release(&keys);
    return result;
}

/* scatter(rows, gid, tokens, words): set bit tokens[i] in row gid[i] of the (groups x words) int32
 * bitmask ``rows`` for every i with gid[i] >= 0. */
static PyObject *native_scatter(PyObject *self, PyObject *args) {
    PyObject *o_rows, *o_gid, *o_tok;
    Py_ssize_t words;
    if (!PyArg_ParseTuple(args, "OOOn", &o_rows, &o_gid, &o_tok, &words)) return NULL;
    Buf rows = {0}, gid = {0}, tok = {0};
    PyObject *result = NULL;
    if (get_buf(o_rows, &rows, "rows", 4, 1) || get_buf(o_gid, &gid, "gid", 8, 0) || get_buf(o_tok, &tok, "tokens", 8, 0))
        goto done;
    Py_ssize_t n = LEN(gid, 8), n_rows = words > 0 ? LEN(rows, 4) / words : 0;
    if (LEN(tok, 8) != n || words <= 0) {
        PyErr_SetString(PyExc_ValueError, "scatter: array sizes do not match");
        goto done;
    }
    uint32_t *R = rows.view.buf;
    const int64_t *G = gid.view.buf, *T = tok.view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t g = G[i], t = T[i];
        if (g < 0) continue;
        if (g >= n_rows || t < 0 || (t >> 5) >= words) {
            PyErr_Format(PyExc_IndexError, "scatter: token %lld or group %lld out of range", (long long)t, (long long)g);
            goto done;
        }
        R[g * words + (t >> 5)] |= (uint32_t)1 << (t & 31);
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&rows); release(&gid); release(&tok);
    return result;
}

/* or_rows(out, rows, sel): out = OR of rows[sel[0]], rows[sel[1]], ... (rows: groups x words int32;
 * out: words int32, overwritten). The mask of a parser state is such an OR over a table's chosen
 * groups; numpy would first copy the chosen rows out (a fancy index), then reduce. */
static PyObject *native_or_rows(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_rows, *o_sel;
    if (!PyArg_ParseTuple(args, "OOO", &o_out, &o_rows, &o_sel)) return NULL;
    Buf out = {0}, rows = {0}, sel = {0};
    PyObject *result = NULL;
    if (get_buf(o_out, &out, "out", 4, 1) || get_buf(o_rows, &rows, "rows", 4, 0) || get_buf(o_sel, &sel, "sel", 8, 0))
        goto done;
    Py_ssize_t words = LEN(out, 4), n_sel = LEN(sel, 8);
    Py_ssize_t n_rows = words > 0 ? LEN(rows, 4) / words : 0;
    if (words <= 0 || LEN(rows, 4) != n_rows * words) {
        PyErr_SetString(PyExc_ValueError, "or_rows: rows are not groups x len(out)");
        goto done;
    }
    uint32_t *O = out.view.buf;
    const uint32_t *R = rows.view.buf;
    const int64_t *S = sel.view.buf;
    for (Py_ssize_t k = 0; k < n_sel; k++)
        if (S[k] < 0 || S[k] >= n_rows) {
            PyErr_Format(PyExc_IndexError, "or_rows: group %lld out of range", (long long)S[k]);
            goto done;
        }
    memset(O, 0, (size_t)words * 4);
    for (Py_ssize_t k = 0; k < n_sel; k++) {
        const uint32_t *r = R + S[k] * words;
        for (Py_ssize_t w = 0; w < words; w++) O[w] |= r[w];
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&out); release(&rows); release(&sel);
    return result;
}

/* Set bits of words[0:n] (int32 words read as uint32). The hardware popcount where the CPU has
 * one (x86: chosen at run time, the build targets baseline x86-64, whose __builtin_popcount is a
 * libgcc call ~10x slower); zero words, most of a sparse row, cost a test each. */
static int64_t count_bits_generic(const uint32_t *w, Py_ssize_t n) {
    int64_t c = 0;
    for (Py_ssize_t i = 0; i < n; i++) if (w[i]) c += __builtin_popcount(w[i]);
    return c;
}
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
__attribute__((target("popcnt"))) static int64_t count_bits_popcnt(const uint32_t *w, Py_ssize_t n) {
    int64_t c = 0;
    Py_ssize_t i = 0;
    for (; i + 2 <= n; i += 2) {
        uint64_t x;
        memcpy(&x, w + i, 8);
        if (x) c += __builtin_popcountll(x);
    }
    for (; i < n; i++) if (w[i]) c += __builtin_popcount(w[i]);
    return c;
}
static int64_t count_bits(const uint32_t *w, Py_ssize_t n) {
    static int has = -1;
    if (has < 0) { __builtin_cpu_init(); has = __builtin_cpu_supports("popcnt") ? 1 : 0; }
    return has ? count_bits_popcnt(w, n) : count_bits_generic(w, n);
}
#else
static int64_t count_bits(const uint32_t *w, Py_ssize_t n) { return count_bits_generic(w, n); }
#endif

/* row_counts(rows, counts[, groups]): counts[k] = number of set bits of row k of rows
 * (groups x words int32), or with groups (int64) of row groups[k] (no copy of the rows taken). */
static PyObject *native_row_counts(PyObject *self, PyObject *args) {
    PyObject *o_rows, *o_counts, *o_groups = Py_None;
    Py_ssize_t words = 0;
    if (!PyArg_ParseTuple(args, "OO|On", &o_rows, &o_counts, &o_groups, &words)) return NULL;
    Buf rows = {0}, counts = {0}, groups = {0};
    PyObject *result = NULL;
    if (get_buf(o_rows, &rows, "rows", 4, 0) || get_buf(o_counts, &counts, "counts", 8, 1)) goto done;
    Py_ssize_t n = LEN(counts, 8);
    const uint32_t *R = rows.view.buf;
    int64_t *C = counts.view.buf;
    if (o_groups == Py_None) {
        if (n <= 0 || LEN(rows, 4) % n) {
            PyErr_SetString(PyExc_ValueError, "row_counts: rows are not len(counts) x words");
            goto done;
        }
        words = LEN(rows, 4) / n;
        for (Py_ssize_t g = 0; g < n; g++) C[g] = count_bits(R + g * words, words);
    } else {
        if (get_buf(o_groups, &groups, "groups", 8, 0)) goto done;
        Py_ssize_t n_rows = words > 0 ? LEN(rows, 4) / words : 0;
        if (words <= 0 || LEN(rows, 4) % words || LEN(groups, 8) != n) {
            PyErr_SetString(PyExc_ValueError, "row_counts: rows are not a multiple of words, or groups and counts differ in length");
            goto done;
        }
        const int64_t *G = groups.view.buf;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (G[k] < 0 || G[k] >= n_rows) {
                PyErr_Format(PyExc_IndexError, "row_counts: group %lld out of range", (long long)G[k]);
                goto done;
            }
            C[k] = count_bits(R + G[k] * words, words);
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&rows); release(&counts); release(&groups);
    return result;
}

/* row_form_grow(rows, slot, sel, words, small_below, n_slots) -> (counts, ids)
 * A table's row form (CompiledGrammar._row_form) grown by the groups of ``sel`` not looked at yet
 * (slot[g] == -2), ascending and distinct: a group with at least small_below set bits becomes dense
 * (slot -1); the others, in that order, get slots n_slots, n_slots + 1, ... and their token ids.
 * ``counts``: bytes of int64, the sparse groups' bit counts; ``ids``: bytes of int32, their token
 * ids back to back (ascending per group). ``slot`` (int64, one per row) is written in place. The
 * reference is tablearrays.grow_row_form_numpy. */
static PyObject *native_row_form_grow(PyObject *self, PyObject *args) {
    PyObject *o_rows, *o_slot, *o_sel;
    Py_ssize_t words, small_below, n_slots;
    if (!PyArg_ParseTuple(args, "OOOnnn", &o_rows, &o_slot, &o_sel, &words, &small_below, &n_slots)) return NULL;
    Buf rows = {0}, slot = {0}, sel = {0};
    PyObject *result = NULL, *o_counts = NULL, *o_ids = NULL;
    int64_t *groups = NULL, *counts = NULL;
    if (get_buf(o_rows, &rows, "rows", 4, 0) || get_buf(o_slot, &slot, "slot", 8, 1) || get_buf(o_sel, &sel, "sel", 8, 0))
        goto done;
    Py_ssize_t n_rows = words > 0 ? LEN(rows, 4) / words : 0, n_sel = LEN(sel, 8);
    if (words <= 0 || LEN(rows, 4) != n_rows * words || LEN(slot, 8) != n_rows) {
        PyErr_SetString(PyExc_ValueError, "row_form_grow: rows are not len(slot) x words");
        goto done;
    }
    const uint32_t *R = rows.view.buf;
    int64_t *SLOT = slot.view.buf;
    const int64_t *S = sel.view.buf;
    groups = malloc(sizeof(int64_t) * (size_t)(n_sel ? n_sel : 1));
    if (!groups) { PyErr_NoMemory(); goto done; }
    Py_ssize_t n_new = 0;
    for (Py_ssize_t k = 0; k < n_sel; k++) {
        if (S[k] < 0 || S[k] >= n_rows) {
            PyErr_Format(PyExc_IndexError, "row_form_grow: group %lld out of range", (long long)S[k]);
            goto done;
        }
        if (SLOT[S[k]] == -2) groups[n_new++] = S[k];
    }
    sort_i64(groups, (size_t)(n_new));
    Py_ssize_t m = 0, n_sparse = 0;
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n_new; k++)
        if (!m || groups[k] != groups[m - 1]) groups[m++] = groups[k];
    /* counts first (the sparse groups compacted to the front of groups) */
    counts = malloc(sizeof(int64_t) * (size_t)(m ? m : 1));
    if (!counts) { PyErr_NoMemory(); goto done; }
    int64_t *C = counts;
    for (Py_ssize_t k = 0; k < m; k++) {
        int64_t g = groups[k], c = count_bits(R + g * words, words);
        if (c >= small_below) { SLOT[g] = -1; continue; }
        groups[n_sparse] = g;
        C[n_sparse++] = c;
        total += c;
    }
    o_counts = PyBytes_FromStringAndSize((const char *)counts, (Py_ssize_t)(8 * n_sparse));
    if (!o_counts) goto done;
    o_ids = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * total));
    if (!o_ids) goto done;
    int32_t *I = (int32_t *)PyBytes_AS_STRING(o_ids);
    int64_t at = 0;
    for (Py_ssize_t k = 0; k < n_sparse; k++) {
        int64_t g = groups[k];
        for (Py_ssize_t w = 0; w < words; w++) {
            uint32_t bits = R[g * words + w];
            while (bits) {
                I[at++] = (int32_t)(w * 32 + __builtin_ctz(bits));
                bits &= bits - 1;
            }
        }
        SLOT[g] = n_slots + k;
    }
    result = PyTuple_Pack(2, o_counts, o_ids);
done:
    Py_XDECREF(o_counts); Py_XDECREF(o_ids);
    free(groups); free(counts);
    release(&rows); release(&slot); release(&sel);
    return result;
}

/* row_ids(rows, groups, offsets, ids): the token ids of rows[groups[k]] (ascending) into
 * ids[offsets[k]:offsets[k+1]] (offsets from row_counts; len(offsets) = len(groups) + 1). */
static PyObject *native_row_ids(PyObject *self, PyObject *args) {
    PyObject *o_rows, *o_groups, *o_off, *o_ids;
    Py_ssize_t words;
    if (!PyArg_ParseTuple(args, "OOOOn", &o_rows, &o_groups, &o_off, &o_ids, &words)) return NULL;
    Buf rows = {0}, groups = {0}, off = {0}, ids = {0};
    PyObject *result = NULL;
    if (get_buf(o_rows, &rows, "rows", 4, 0) || get_buf(o_groups, &groups, "groups", 8, 0) ||
        get_buf(o_off, &off, "offsets", 8, 0) || get_buf(o_ids, &ids, "ids", 4, 1))
        goto done;
    Py_ssize_t k_n = LEN(groups, 8), n_rows = words > 0 ? LEN(rows, 4) / words : 0, n_ids = LEN(ids, 4);
    if (words <= 0 || LEN(off, 8) != k_n + 1) {
        PyErr_SetString(PyExc_ValueError, "row_ids: offsets must be one longer than groups");
        goto done;
    }
    const uint32_t *R = rows.view.buf;
    const int64_t *G = groups.view.buf, *OFF = off.view.buf;
    int32_t *I = ids.view.buf;
    for (Py_ssize_t k = 0; k < k_n; k++) {
        int64_t g = G[k], at = OFF[k];
        if (g < 0 || g >= n_rows || at < 0) {
            PyErr_Format(PyExc_IndexError, "row_ids: group %lld out of range", (long long)g);
            goto done;
        }
        for (Py_ssize_t w = 0; w < words; w++) {
            uint32_t bits = R[g * words + w];
            while (bits) {
                if (at >= OFF[k + 1] || at >= n_ids) {
                    PyErr_SetString(PyExc_ValueError, "row_ids: a row holds more bits than its offsets allow");
                    goto done;
                }
                I[at++] = (int32_t)(w * 32 + __builtin_ctz(bits));
                bits &= bits - 1;
            }
        }
        if (at != OFF[k + 1]) {
            PyErr_SetString(PyExc_ValueError, "row_ids: a row holds fewer bits than its offsets say");
            goto done;
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&rows); release(&groups); release(&off); release(&ids);
    return result;
}

/* or_groups(out, rows, sel, slot, offsets, ids): out = OR over g in sel of group g, where a group
 * with slot[g] >= 0 is the sparse id list ids[offsets[slot[g]]:offsets[slot[g]+1]] and any other
 * is the dense row rows[g] (rows: groups x words int32; out: words int32, overwritten). */
static PyObject *native_or_groups(PyObject *self, PyObject *args) {
    PyObject *o_out, *o_rows, *o_sel, *o_slot, *o_off, *o_ids;
    if (!PyArg_ParseTuple(args, "OOOOOO", &o_out, &o_rows, &o_sel, &o_slot, &o_off, &o_ids)) return NULL;
    Buf out = {0}, rows = {0}, sel = {0}, slot = {0}, off = {0}, ids = {0};
    PyObject *result = NULL;
    if (get_buf(o_out, &out, "out", 4, 1) || get_buf(o_rows, &rows, "rows", 4, 0) || get_buf(o_sel, &sel, "sel", 8, 0) ||
        get_buf(o_slot, &slot, "slot", 8, 0) || get_buf(o_off, &off, "offsets", 8, 0) || get_buf(o_ids, &ids, "ids", 4, 0))
        goto done;
    Py_ssize_t words = LEN(out, 4), n_sel = LEN(sel, 8), n_rows = words > 0 ? LEN(rows, 4) / words : 0;
    Py_ssize_t n_slots = LEN(off, 8) - 1, n_ids = LEN(ids, 4);
    if (words <= 0 || LEN(rows, 4) != n_rows * words || LEN(slot, 8) != n_rows || n_slots < 0) {
        PyErr_SetString(PyExc_ValueError, "or_groups: array sizes do not match");
        goto done;
    }
    uint32_t *O = out.view.buf;
    const uint32_t *R = rows.view.buf;
    const int64_t *S = sel.view.buf, *SLOT = slot.view.buf, *OFF = off.view.buf;
    const int32_t *I = ids.view.buf;
    const int64_t limit = (int64_t)words * 32;
    for (Py_ssize_t k = 0; k < n_sel; k++) {
        int64_t g = S[k];
        if (g < 0 || g >= n_rows) {
            PyErr_Format(PyExc_IndexError, "or_groups: group %lld out of range", (long long)g);
            goto done;
        }
        int64_t sl = SLOT[g];
        if (sl >= n_slots || (sl >= 0 && (OFF[sl] < 0 || OFF[sl] > OFF[sl + 1] || OFF[sl + 1] > n_ids))) {
            PyErr_Format(PyExc_IndexError, "or_groups: bad sparse slot %lld", (long long)sl);
            goto done;
        }
    }
    memset(O, 0, (size_t)words * 4);
    for (Py_ssize_t k = 0; k < n_sel; k++) {
        int64_t g = S[k], sl = SLOT[g];
        if (sl < 0) {
            const uint32_t *r = R + g * words;
            for (Py_ssize_t w = 0; w < words; w++) O[w] |= r[w];
        } else {
            for (int64_t j = OFF[sl]; j < OFF[sl + 1]; j++) {
                int64_t t = I[j];
                if (t < 0 || t >= limit) {
                    PyErr_Format(PyExc_IndexError, "or_groups: token %lld out of range", (long long)t);
                    goto done;
                }
                O[t >> 5] |= (uint32_t)1 << (t & 31);
            }
        }
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&out); release(&rows); release(&sel); release(&slot); release(&off); release(&ids);
    return result;
}

/* int_key(states) -> the distinct ints of an iterable, as a sorted tuple the cyclic collector
 * does not track (a lexer state's key: see untrack_int_tuple). The reference is
 * tuple(sorted(set(states))). */
static PyObject *native_int_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    int depth = -1;   /* the sort's depth limit, for the tests (0: heapsort alone); -1: sort_i64's */
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "int_key takes an iterable of ints and an optional sort depth");
        return NULL;
    }
    if (nargs == 2) {
        depth = (int)PyLong_AsLong(args[1]);
        if (depth == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject *arg = args[0];
    PyObject *seq = PySequence_Fast(arg, "int_key: an iterable of ints is needed"), *t = NULL;
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), m = 0;
    int64_t *v = malloc((n ? n : 1) * sizeof(int64_t));
    if (!v) { Py_DECREF(seq); return PyErr_NoMemory(); }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(x)) { PyErr_SetString(PyExc_TypeError, "int_key: an iterable of ints is needed"); goto done; }
        v[i] = PyLong_AsLongLong(x);
        if (v[i] == -1 && PyErr_Occurred()) goto done;
    }
    if (depth < 0) sort_i64(v, (size_t)n);
    else sort_i64_depth(v, (size_t)n, depth);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!m || v[i] != v[m - 1]) v[m++] = v[i];
    t = PyTuple_New(m);
    if (!t) goto done;
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) { Py_CLEAR(t); goto done; }
        PyTuple_SET_ITEM(t, i, x);
    }
    untrack_int_tuple(t);
done:
    free(v);
    Py_DECREF(seq);
    return t;
}


/* ---------------------------------------------------------------------------------------------
 * slice_scan(member, chars, cand, limit) -> (count, max_chars)
 *
 * Over the candidate tokens ``cand`` (layout indexes): how many are members (``member[t]``, bool)
 * of fewer than ``limit`` characters (``chars[t]``, int64), and the most characters among them
 * (0 when there is none). numpy would first take both arrays at ``cand``: two copies of a
 * vocabulary-sized array per table (see tableslices._utf8_slice).
 */
static int slice_bufs(PyObject *o_member, PyObject *o_chars, PyObject *o_cand, Buf *member, Buf *chars, Buf *cand,
                      const char *fn) {
    if (get_buf(o_member, member, "member", 1, 0) || get_buf(o_chars, chars, "chars", 8, 0) ||
        get_buf(o_cand, cand, "cand", 8, 0))
        return -1;
    if (LEN(*member, 1) != LEN(*chars, 8)) {
        PyErr_Format(PyExc_ValueError, "%s: member and chars differ in length", fn);
        return -1;
    }
    Py_ssize_t n = LEN(*cand, 8), size = LEN(*member, 1);
    const int64_t *C = cand->view.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (C[i] < 0 || C[i] >= size) {
            PyErr_Format(PyExc_IndexError, "%s: candidate %lld out of range", fn, (long long)C[i]);
            return -1;
        }
    return 0;
}

static PyObject *native_slice_scan(PyObject *self, PyObject *args) {
    PyObject *o_member, *o_chars, *o_cand;
    long long limit;
    if (!PyArg_ParseTuple(args, "OOOL", &o_member, &o_chars, &o_cand, &limit)) return NULL;
    Buf member = {0}, chars = {0}, cand = {0};
    PyObject *result = NULL;
    if (slice_bufs(o_member, o_chars, o_cand, &member, &chars, &cand, "slice_scan")) goto done;
    const uint8_t *M = member.view.buf;
    const int64_t *K = chars.view.buf;
    const int64_t *C = cand.view.buf;
    Py_ssize_t n = LEN(cand, 8), count = 0;
    long long most = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t t = C[i];
        if (M[t] && K[t] < limit) {
            count++;
            if (K[t] > most) most = K[t];
        }
    }
    result = Py_BuildValue("nL", count, most);
done:
    release(&member); release(&chars); release(&cand);
    return result;
}

/* slice_drop(member, chars, limit, cand, first, ptr, out_cand, out_first, out_ptr) -> kept
 *
 * The candidates that are *not* members of fewer than ``limit`` characters, in order, with their
 * first bytes and pointers (int64 each), written to the ``out_`` arrays (as long as ``cand``);
 * returns how many. */
static PyObject *native_slice_drop(PyObject *self, PyObject *args) {
    PyObject *o_member, *o_chars, *o_cand, *o_first, *o_ptr, *o_oc, *o_of, *o_op;
    long long limit;
    if (!PyArg_ParseTuple(args, "OOLOOOOOO", &o_member, &o_chars, &limit, &o_cand, &o_first, &o_ptr,
                          &o_oc, &o_of, &o_op))
        return NULL;
    Buf member = {0}, chars = {0}, cand = {0}, first = {0}, ptr = {0}, oc = {0}, of = {0}, op = {0};
    PyObject *result = NULL;
    if (slice_bufs(o_member, o_chars, o_cand, &member, &chars, &cand, "slice_drop") ||
        get_buf(o_first, &first, "first", 8, 0) || get_buf(o_ptr, &ptr, "ptr", 8, 0) ||
        get_buf(o_oc, &oc, "out_cand", 8, 1) || get_buf(o_of, &of, "out_first", 8, 1) ||
        get_buf(o_op, &op, "out_ptr", 8, 1))
        goto done;
    Py_ssize_t n = LEN(cand, 8);
    if (LEN(first, 8) != n || LEN(ptr, 8) != n || LEN(oc, 8) < n || LEN(of, 8) < n || LEN(op, 8) < n) {
        PyErr_SetString(PyExc_ValueError, "slice_drop: array sizes do not match");
        goto done;
    }
    const uint8_t *M = member.view.buf;
    const int64_t *K = chars.view.buf;
    const int64_t *C = cand.view.buf, *F = first.view.buf, *P = ptr.view.buf;
    int64_t *OC = oc.view.buf, *OF = of.view.buf, *OP = op.view.buf;
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t t = C[i];
        if (M[t] && K[t] < limit) continue;
        OC[kept] = t; OF[kept] = F[i]; OP[kept] = P[i];
        kept++;
    }
    result = PyLong_FromSsize_t(kept);
done:
    release(&member); release(&chars); release(&cand); release(&first); release(&ptr);
    release(&oc); release(&of); release(&op);
    return result;
}

/* chain_scan(tails, lens, cand, state, q1) -> (entering, pure, longest): over the candidates,
 * how many enter the counter chain (state[i] == q1), how many of those are pure (tails[cand[i]]:
 * every byte after the first in the chain's byte set), and the longest pure one (lens[cand[i]]).
 * See InheritanceShortcuts._counter_chain; its numpy lines are the reference. */
static PyObject *native_chain_scan(PyObject *self, PyObject *args) {
    PyObject *o_tails, *o_lens, *o_cand, *o_state;
    long long q1;
    if (!PyArg_ParseTuple(args, "OOOOL", &o_tails, &o_lens, &o_cand, &o_state, &q1)) return NULL;
    Buf tails = {0}, lens = {0}, cand = {0}, state = {0};
    PyObject *result = NULL;
    if (slice_bufs(o_tails, o_lens, o_cand, &tails, &lens, &cand, "chain_scan") ||
        get_buf(o_state, &state, "state", 8, 0))
        goto done;
    Py_ssize_t n = LEN(cand, 8);
    if (LEN(state, 8) != n) {
        PyErr_SetString(PyExc_ValueError, "chain_scan: cand and state differ in length");
        goto done;
    }
    const uint8_t *T = tails.view.buf;
    const int64_t *L = lens.view.buf, *C = cand.view.buf, *S = state.view.buf;
    Py_ssize_t entering = 0, pure = 0;
    long long longest = 0;
    for (Py_ssize_t i = 0; i < n; i++) {   /* branch-free: entrants and tails mix unpredictably */
        int64_t t = C[i];
        int e = S[i] == q1;
        int p = e & (T[t] != 0);
        entering += e;
        pure += p;
        long long l = p ? L[t] : 0;
        longest = l > longest ? l : longest;
    }
    result = Py_BuildValue("nnL", entering, pure, longest);
done:
    release(&tails); release(&lens); release(&cand); release(&state);
    return result;
}

/* chain_split(tails, lens, cand, state, ptr, q1, chain, out_cand, out_state, out_ptr, split_tok,
 * split_fin) -> (kept, split): the pure chain entrants no longer than the chain (lens[t] <=
 * len(chain)) go to split_tok / split_fin (their final state chain[lens[t] - 1]), every other
 * candidate to out_cand / out_state / out_ptr, both in candidate order. */
static PyObject *native_chain_split(PyObject *self, PyObject *args) {
    PyObject *o_tails, *o_lens, *o_cand, *o_state, *o_ptr, *o_chain, *o_oc, *o_os, *o_op, *o_st, *o_sf;
    long long q1;
    if (!PyArg_ParseTuple(args, "OOOOOLOOOOOO", &o_tails, &o_lens, &o_cand, &o_state, &o_ptr, &q1, &o_chain,
                          &o_oc, &o_os, &o_op, &o_st, &o_sf))
        return NULL;
    Buf tails = {0}, lens = {0}, cand = {0}, state = {0}, ptr = {0}, chain = {0};
    Buf oc = {0}, os_ = {0}, op = {0}, st = {0}, sf = {0};
    PyObject *result = NULL;
    if (slice_bufs(o_tails, o_lens, o_cand, &tails, &lens, &cand, "chain_split") ||
        get_buf(o_state, &state, "state", 8, 0) || get_buf(o_ptr, &ptr, "ptr", 8, 0) ||
        get_buf(o_chain, &chain, "chain", 8, 0) || get_buf(o_oc, &oc, "out_cand", 8, 1) ||
        get_buf(o_os, &os_, "out_state", 8, 1) || get_buf(o_op, &op, "out_ptr", 8, 1) ||
        get_buf(o_st, &st, "split_tok", 8, 1) || get_buf(o_sf, &sf, "split_fin", 8, 1))
        goto done;
    Py_ssize_t n = LEN(cand, 8), reach = LEN(chain, 8);
    if (LEN(state, 8) != n || LEN(ptr, 8) != n || LEN(oc, 8) < n || LEN(os_, 8) < n || LEN(op, 8) < n ||
        LEN(st, 8) < n || LEN(sf, 8) < n) {
        PyErr_SetString(PyExc_ValueError, "chain_split: array sizes do not match");
        goto done;
    }
    const uint8_t *T = tails.view.buf;
    const int64_t *L = lens.view.buf, *C = cand.view.buf, *S = state.view.buf, *P = ptr.view.buf;
    const int64_t *CH = chain.view.buf;
    int64_t *OC = oc.view.buf, *OS = os_.view.buf, *OP = op.view.buf, *ST = st.view.buf, *SF = sf.view.buf;
    Py_ssize_t kept = 0, split = 0;
    for (Py_ssize_t i = 0; i < n; i++) {   /* branch-free: both outputs written, one advanced */
        int64_t t = C[i], l = L[t];
        int ok = (l >= 1) & (l <= reach);
        int f = (S[i] == q1) & (T[t] != 0) & ok;
        ST[split] = t; SF[split] = CH[ok ? l - 1 : 0];
        OC[kept] = t; OS[kept] = S[i]; OP[kept] = P[i];
        split += f;
        kept += 1 - f;
    }
    result = Py_BuildValue("nn", kept, split);
done:
    release(&tails); release(&lens); release(&cand); release(&state); release(&ptr); release(&chain);
    release(&oc); release(&os_); release(&op); release(&st); release(&sf);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", native_walk, METH_VARARGS, "Walk tokens through the extended lexer table (see tablewalk)."},
    {"group", native_group, METH_VARARGS, "Group walked tokens by (lexemes, alive set); returns the group count."},
    {"scatter", native_scatter, METH_VARARGS, "Set token bits in group bitmask rows."},
    {"chain_scan", native_chain_scan, METH_VARARGS, "Counts of a counter chain's entrants and pure entrants, and the longest."},
    {"chain_split", native_chain_split, METH_VARARGS, "Split a counter chain's pure entrants off the candidates."},
    {"or_rows", native_or_rows, METH_VARARGS, "OR the selected rows of a (groups x words) bitmask into out."},
    {"row_counts", native_row_counts, METH_VARARGS, "Set bits per row of a (groups x words) bitmask, or of the rows groups[k]."},
    {"row_ids", native_row_ids, METH_VARARGS, "Token ids of chosen rows, packed by offsets."},
    {"row_form_grow", native_row_form_grow, METH_VARARGS, "A table's row form grown by newly chosen groups (see CompiledGrammar._row_form)."},
    {"or_groups", native_or_groups, METH_VARARGS, "OR chosen groups, dense rows or sparse id lists, into out."},
    {"determinize", native_determinize, METH_VARARGS, "Subset construction of a fresh lexer DFA (see ByteDFA.build_all)."},
    {"lazy_rows", native_lazy_rows, METH_VARARGS, "Rows of a lazily built lexer's states, new states interned (see ByteDFA.compute_row)."},
    {"subset_memo", native_subset_memo, METH_VARARGS, "A lexer's memo for lazy_rows (scratch and target cache)."},
    {"slice_scan", native_slice_scan, METH_VARARGS, "Count (and longest) of the candidates that are short slice members."},
    {"slice_drop", native_slice_drop, METH_VARARGS, "The candidates that are not short slice members, compacted."},
    {"trie_walk", native_trie_walk, METH_VARARGS, "Walk a token trie from a lexer state: groups, inherited rows (see _native_trie.c)."},
    {"trie_refs", native_trie_refs, METH_VARARGS, "The hubs one or two bytes from a lexer state, then START (see _native_trie.c)."},
    {"gc_free_list", native_gc_free_list, METH_NOARGS, "A new empty list untracked by the cyclic GC (see _native_nfa.c)."},
    {"untrack_nested", native_untrack_nested, METH_O, "Untrack nested tuples of atoms from the cyclic GC; returns the argument (see _native_nfa.c)."},
    {"grow_states", native_grow_states, METH_VARARGS, "Append n fresh NFA states' lists, untracked by the cyclic GC (see _native_nfa.c)."},
    {"freeze_lists", native_freeze_lists, METH_O, "A tuple of tuples of a list of lists, untracked where it can be (see _native_nfa.c)."},
    {"template_into", native_template_into, METH_VARARGS, "Copy an acyclic byte automaton between two NFA states (see _native_nfa.c)."},
    {"splice", native_splice, METH_VARARGS, "Append a stored NFA fragment's states, shifted, to an NFA's lists (see _native_nfa.c)."},
    {"fragment_facts", native_fragment_facts, METH_VARARGS, "Liveness, cycle and path count of a closed NFA fragment (see _native_nfa.c)."},
    {"nfa_arrays", native_nfa_arrays, METH_VARARGS, "An NFA's edges and epsilon moves as int64 arrays (see _native_nfa.c)."},
    {"byte_classes", native_byte_classes, METH_VARARGS, "The first byte of each class of identical columns of a lexer table (see _native_nfa.c)."},
    {"reusable_hubs", native_reusable_hubs, METH_VARARGS, "The hubs a new token table reuses, with their first-byte selectors (see _native_hubs.c)."},
    {"pick_groups", native_pick_groups, METH_VARARGS, "The groups a mask chooses from a table's lexeme parts (see _native_mask.c)."},
    {"earley_make", (PyCFunction)(void (*)(void))native_earley_make, METH_FASTCALL,
     "A new Earley set's core from its kernel, and its split by next symbol (see _native_earley.c)."},
    {"earley_predict", native_earley_predict, METH_VARARGS, "The predicted part of an Earley set from its nonterminals' closures."},
    {"earley_closure", native_earley_closure, METH_VARARGS, "The dotted rules predicting a set of nonterminals adds to an Earley set (see _native_earley.c)."},
    {"slice_members", native_slice_members, METH_VARARGS, "A UTF-8 slice's members, per-first-byte counts and longest members (see _native_slice.c)."},
    {"slice_rows", native_slice_rows, METH_VARARGS, "A UTF-8 slice's row and rows by characters (see _native_slice.c)."},
    {"slice_trie", native_slice_trie, METH_VARARGS, "A UTF-8 slice's members in trie order and their non-member prefix counts (see _native_slice.c)."},
    {"byte_row", native_byte_row, METH_VARARGS, "The bitmask row of the token ids whose first byte is in a set (see _native_slice.c)."},
    {"ahead", native_ahead, METH_VARARGS, "Walk stopped tokens on through a lazy lexer's built rows (see _native_ahead.c)."},
    {"utf8_lands", native_utf8_lands, METH_VARARGS, "Whether UTF-8 characters finish from lexer states into a target, for many pairs (see _native_ahead.c)."},
    {"ahead_rows", native_ahead_rows, METH_VARARGS, "A trie walk's rows ahead: the byte layers below a frontier, their lexer rows built (see _native_ahead.c)."},
    {"first_outside", native_first_outside, METH_VARARGS, "Per position, the first one on whose byte is not a loop byte (see _native_vocab.c)."},
    {"byte_words", native_byte_words, METH_VARARGS, "Per token, its set of bytes as 4 uint64 words (see _native_vocab.c)."},
    {"eps_closure", native_eps_closure, METH_VARARGS, "The live epsilon closure of NFA states as a sorted, untracked tuple (see _native_eps.c)."},
    {"int_key", (PyCFunction)(void (*)(void))native_int_key, METH_FASTCALL, "The distinct ints of an iterable as a sorted tuple the cyclic collector does not track."},
    {"refine", native_refine, METH_VARARGS, "Exact Moore refinement of DFA states; returns (classes, stable) (see _native_refine.c)."},
    {"refine_split", native_refine_split, METH_VARARGS, "Moore's refinement by splitters, the largest part skipped (see _native_refine.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "Compiled inner loops of guidewire's lexer and token-table walk.", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
