/* guidewire.grammar._native: the lexer's subset construction (lexer.ByteDFA).
 *
 * determinize(offsets, lo, end, dst, eps_off, eps_dst, live, owner, lazy_tid, accept_tid, univ_off, univ_dst,
 *             start_set, limit, max_states, work) -> (sets, rows, n_rows, stopped, readings, reading_of)
 *
 * Subset construction of a fresh lexer DFA, as ByteDFA.build_all does it in Python: states are
 * processed in id order (0 = DEAD = the empty set, 1 = START = ``start_set``), each row's byte
 * ranges in ascending order, and a new NFA-state set (the epsilon closure, through live states
 * only, of a range's targets) gets the next id, so the numbering is the Python one. A state
 * holding the accepting NFA state of a lazy terminal (lazy_tid[s] >= 0) does not move that
 * terminal's NFA states. Edges: state s owns edges offsets[s]..offsets[s+1]-1, each covering
 * bytes lo..end-1 (end exclusive) towards dst; epsilon moves: state s owns eps_dst[eps_off[s] ..
 * eps_off[s+1]-1]. A closure holding a universal NFA state s (univ_dst[univ_off[s] .. univ_off[s+1]-1], its own
 * closure, is not empty) keeps of s's terminal only that closure, for the least such s (drop_dominated,
 * ByteDFA._drop_dominated in Python). ``sets``: the NFA sets of the states after START, sorted tuples in id order;
 * ``rows``: bytes of n_rows x 256 int32 (the rows of states 0 .. n_rows-1); ``stopped``: None,
 * "limit" (a state numbered ``limit`` would need its row), "states" (more than ``max_states``
 * states interned) or "work" (a row would start with more than ``work`` units spent; < 0: no
 * bound). Work is counted as core.limits.Fuel is charged by compute_row and _intern: a row costs
 * 1 + the movers' edges, a new state 1 + its NFA states; so the budget stops the build at the same
 * row on every machine and on both paths.
 * Readings of the states in ``sets`` (what ByteDFA._intern reads off a new state's NFA set), interned:
 * ``readings`` lists each distinct (accepting, growing) pair, ``accepting`` the sorted distinct
 * accept_tid of the set's states that accept a terminal (accept_tid[s] >= 0), ``growing`` the
 * sorted distinct owners of its states other than accepting states without edges (finished
 * lexemes); ``reading_of``: bytes of int32, the index into ``readings`` of each state of ``sets``.
 *
 * lazy_rows(offsets, lo, end, dst, eps_off, eps_dst, live, owner, lazy_tid, accept_tid, univ_off, univ_dst, states,
 *           index, memo,
 *           trans, row_done, sids, n_states, max_states, fuel_left, bytes_left, state_bytes)
 *     -> (n_done, n_new, spent, nbytes, stopped, readings, reading_of)
 *
 * The rows of existing states ``sids`` (in that order) of a lexer being built lazily, as
 * ByteDFA.compute_row computes them one by one in Python; the lexer's own dicts are read and
 * extended in place: ``states`` (id -> sorted NFA-set tuple) and ``index`` (NFA-set tuple -> id).
 * ``memo`` (from subset_memo(n_nfa), one per lexer) holds the scratch space and the target cache
 * (sorted target set of a byte range -> id; the Python path's is ByteDFA._target_cache), so a range
 * met before costs no Python object. A new state gets id n_states, n_states + 1, ... and goes into
 * both dicts; tuples made here are untracked by the cyclic collector. Limits are
 * taken where compute_row and _intern take them, in the same order: a row is charged 1 + its
 * movers' edges before it interns anything; a new state is refused past ``max_states`` states
 * ("states"), then charged 1 + its NFA states, then refused past ``bytes_left`` bytes of
 * ``state_bytes`` + 32 per NFA state ("bytes"); work past ``fuel_left`` stops with "fuel" (< 0: no
 * bound on fuel or bytes). A stop leaves the row it happened in undone and the states made before
 * it in place. The rows of sids[:n_done] are written into ``trans`` (the lexer's int32 table, 256
 * wide) and marked in ``row_done`` (a byte per state), in place; ``spent``: the work
 * charged (the caller passes it to Fuel.spend); ``nbytes``: the bytes the new states take;
 * ``readings`` / ``reading_of``: as determinize's, for the n_new new states in id order. An error
 * (no memory, a state not in ``states``) undoes the call: its states leave the dicts and the memo,
 * its rows are marked not done; a call re-entered on the same memo is a RuntimeError.
 *
 * subset_memo(n_nfa) -> capsule: lazy_rows' memo for a lexer over an NFA of n_nfa states (its
 * scratch is sized once: ~20 bytes per NFA state; its target cache holds at most one entry per
 * byte range of a row built, so it is bounded by the lexer's own bound on states).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_native_subset.h"

static void set_index_free(SetIndex *x) {
    free(x->pool); free(x->off); free(x->len); free(x->table);
}

static uint64_t hash_set(const int64_t *m, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint64_t)m[i]) * 0x100000001B3ull;
    return h ^ (h >> 31);
}

static int set_index_grow(SetIndex *x) {
    size_t tcap = x->tcap ? x->tcap * 2 : 1024;
    int64_t *t = malloc(sizeof(int64_t) * tcap);
    if (!t) return -1;
    for (size_t i = 0; i < tcap; i++) t[i] = -1;
    for (size_t id = 0; id < x->n; id++) {
        uint64_t h = hash_set(x->pool + x->off[id], x->len[id]) & (tcap - 1);
        while (t[h] >= 0) h = (h + 1) & (tcap - 1);
        t[h] = (int64_t)id;
    }
    free(x->table);
    x->table = t;
    x->tcap = tcap;
    return 0;
}

/* the id of the set m[0..n-1] (sorted), interning it when new; -1 on memory failure */
static int64_t set_index_get(SetIndex *x, const int64_t *m, int64_t n) {
    if ((x->n + 1) * 2 > x->tcap && set_index_grow(x) < 0) return -1;
    uint64_t h = hash_set(m, n) & (x->tcap - 1);
    while (x->table[h] >= 0) {
        int64_t id = x->table[h];
        if (x->len[id] == n && memcmp(x->pool + x->off[id], m, sizeof(int64_t) * (size_t)n) == 0) return id;
        h = (h + 1) & (x->tcap - 1);
    }
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 256;
        int64_t *o = realloc(x->off, sizeof(int64_t) * cap), *l;
        if (!o) return -1;
        x->off = o;
        l = realloc(x->len, sizeof(int64_t) * cap);
        if (!l) return -1;
        x->len = l;
        x->cap = cap;
    }
    if (x->pool_len + (size_t)n > x->pool_cap) {
        size_t cap = x->pool_cap ? x->pool_cap : 4096;
        while (cap < x->pool_len + (size_t)n) cap *= 2;
        int64_t *p = realloc(x->pool, sizeof(int64_t) * cap);
        if (!p) return -1;
        x->pool = p;
        x->pool_cap = cap;
    }
    memcpy(x->pool + x->pool_len, m, sizeof(int64_t) * (size_t)n);
    x->off[x->n] = (int64_t)x->pool_len;
    x->len[x->n] = n;
    x->pool_len += (size_t)n;
    x->table[h] = (int64_t)x->n;
    return (int64_t)x->n++;
}



static int scratch_init(Scratch *w, Py_ssize_t n_nfa) {
    memset(w, 0, sizeof *w);
    w->mark = calloc((size_t)n_nfa + 1, sizeof(uint32_t));
    w->stack = malloc(sizeof(int64_t) * ((size_t)n_nfa + 1));
    w->cnt = malloc(sizeof(int64_t) * 258);
    w->pos = malloc(sizeof(int64_t) * 258);
    w->stops = malloc(sizeof(int64_t) * ((size_t)n_nfa + 1));
    if (!w->mark || !w->stack || !w->cnt || !w->pos || !w->stops) { PyErr_NoMemory(); return -1; }
    return 0;
}

static void scratch_free(Scratch *w) {
    free(w->mark); free(w->stack); free(w->members); free(w->cnt); free(w->pos); free(w->tgt); free(w->movers);
    free(w->stops);
}


static void memo_free(PyObject *capsule) {
    SubsetMemo *m = PyCapsule_GetPointer(capsule, MEMO_NAME);
    if (!m) { PyErr_Clear(); return; }
    scratch_free(&m->w);
    set_index_free(&m->targets);
    free(m->target_state);
    free(m);
}

/* subset_memo(n_nfa) -> a capsule for lazy_rows over an NFA of n_nfa states */
PyObject *native_subset_memo(PyObject *self, PyObject *args) {
    Py_ssize_t n_nfa;
    if (!PyArg_ParseTuple(args, "n", &n_nfa)) return NULL;
    if (n_nfa < 0) { PyErr_SetString(PyExc_ValueError, "subset_memo: n_nfa must be >= 0"); return NULL; }
    SubsetMemo *m = calloc(1, sizeof *m);
    if (!m) return PyErr_NoMemory();
    m->n_nfa = n_nfa;
    if (scratch_init(&m->w, n_nfa) < 0) { scratch_free(&m->w); free(m); return NULL; }
    PyObject *cap = PyCapsule_New(m, MEMO_NAME, memo_free);
    if (!cap) { scratch_free(&m->w); free(m); }
    return cap;
}

/* The row of NFA set m[0..n-1]: its movers (less the states of lazy terminals accepting here), the
 * elementary byte ranges of their edges (range k covers bytes starts[k] .. starts[k+1]-1) and each
 * range's targets, sorted and distinct, in tgt[pos[k] .. cnt[k]). Returns the work of the row
 * (1 + the movers' edges), -1 with an exception set. Moves are checked as they are read. */
static long long row_targets(const Nfa *A, Scratch *w, const int64_t *m, int64_t n) {
    if ((size_t)n > w->movers_cap) {
        w->movers_cap = (size_t)n * 2;
        int64_t *mv = realloc(w->movers, sizeof(int64_t) * w->movers_cap);
        if (!mv) { PyErr_NoMemory(); return -1; }
        w->movers = mv;
    }
    int64_t n_stop = 0, n_mov = 0;
    for (int64_t j = 0; j < n; j++)
        if (A->LAZY[m[j]] >= 0) w->stops[n_stop++] = A->LAZY[m[j]];
    for (int64_t j = 0; j < n; j++) {
        int64_t s = m[j], o = A->OWN[s];
        int stop = 0;
        for (int64_t q = 0; q < n_stop && !stop; q++) stop = w->stops[q] == o;
        if (!stop) w->movers[n_mov++] = s;
    }
    unsigned char point[258];
    memset(point, 0, sizeof point);
    long long work = 1;
    for (int64_t j = 0; j < n_mov; j++) {
        int64_t s = w->movers[j];
        if (A->OFF[s] < 0 || A->OFF[s] > A->OFF[s + 1] || A->OFF[s + 1] > A->n_edges) {
            PyErr_Format(PyExc_ValueError, "bad edge offsets of NFA state %lld", (long long)s);
            return -1;
        }
        work += A->OFF[s + 1] - A->OFF[s];
        for (int64_t e = A->OFF[s]; e < A->OFF[s + 1]; e++) {
            if (A->LO[e] < 0 || A->END[e] > 256 || A->LO[e] >= A->END[e] || A->DST[e] < 0 || A->DST[e] >= A->n_nfa) {
                PyErr_Format(PyExc_ValueError, "bad edge %lld", (long long)e);
                return -1;
            }
            point[A->LO[e]] = 1;
            point[A->END[e]] = 1;
        }
    }
    int range_of[257], n_ranges = 0;
    for (int p = 0; p <= 256; p++) {
        range_of[p] = -1;
        if (point[p]) { range_of[p] = n_ranges; w->starts[n_ranges++] = p; }
    }
    int n_el = w->n_el = n_ranges > 0 ? n_ranges - 1 : 0;
    size_t total = 0;
    for (int k = 0; k <= n_el; k++) w->cnt[k] = 0;
    for (int64_t j = 0; j < n_mov; j++)
        for (int64_t e = A->OFF[w->movers[j]]; e < A->OFF[w->movers[j] + 1]; e++) {
            int f = range_of[A->LO[e]], l = range_of[A->END[e]];
            for (int k = f; k < l; k++) w->cnt[k]++;
            total += (size_t)(l - f);
        }
    if (total > w->tgt_cap) {
        w->tgt_cap = total * 2;
        int64_t *t = realloc(w->tgt, sizeof(int64_t) * w->tgt_cap);
        if (!t) { PyErr_NoMemory(); return -1; }
        w->tgt = t;
    }
    int64_t acc = 0;
    for (int k = 0; k < n_el; k++) { w->pos[k] = acc; acc += w->cnt[k]; w->cnt[k] = w->pos[k]; }
    w->pos[n_el] = acc;
    for (int64_t j = 0; j < n_mov; j++)
        for (int64_t e = A->OFF[w->movers[j]]; e < A->OFF[w->movers[j] + 1]; e++) {
            int f = range_of[A->LO[e]], l = range_of[A->END[e]];
            for (int k = f; k < l; k++) w->tgt[w->cnt[k]++] = A->DST[e];
        }
    for (int k = 0; k < n_el; k++) {   /* sort and deduplicate; cnt[k] becomes the range's end */
        int64_t a = w->pos[k], b = w->cnt[k];
        if (a == b) continue;
        sort_i64(w->tgt + a, (size_t)(b - a));
        int64_t q = a + 1;
        for (int64_t j = a + 1; j < b; j++)
            if (w->tgt[j] != w->tgt[q - 1]) w->tgt[q++] = w->tgt[j];
        w->cnt[k] = q;
    }
    return work;
}

/* ByteDFA._drop_dominated on the sorted set w->members[0..n-1]: for each terminal holding a
 * universal NFA state (UOFF[s] < UOFF[s + 1]: its closure is UDST[UOFF[s] .. UOFF[s + 1]-1]), its
 * states outside the closure of the least one are dropped. Returns the new size (order kept),
 * -1 with an exception set. */
static int64_t drop_dominated(const Nfa *A, Scratch *w, int64_t n) {
    int64_t *m = w->members, n_own = 0;
    int any = 0;
    for (int64_t j = 0; j < n && !any; j++) any = A->UOFF[m[j] + 1] > A->UOFF[m[j]];
    if (!any) return n;
    if (++w->stamp == 0) { memset(w->mark, 0, sizeof(uint32_t) * ((size_t)A->n_nfa + 1)); w->stamp = 1; }
    uint32_t stamp = w->stamp;
    int64_t *owners = w->stack;         /* free after the closure's search; n_nfa + 1 entries */
    for (int64_t j = 0; j < n; j++) {
        int64_t s = m[j], a = A->UOFF[s], b = A->UOFF[s + 1], o = A->OWN[s], i;
        if (a == b) continue;
        for (i = 0; i < n_own && owners[i] != o; i++) {}
        if (i < n_own) continue;        /* this terminal's least universal state came first */
        owners[n_own++] = o;
        if (a < 0 || a > b || b > A->n_univ) { PyErr_SetString(PyExc_ValueError, "bad universal offsets"); return -1; }
        for (int64_t e = a; e < b; e++) {
            int64_t t = A->UDST[e];
            if (t < 0 || t >= A->n_nfa) { PyErr_SetString(PyExc_ValueError, "bad universal closure member"); return -1; }
            w->mark[t] = stamp;
        }
    }
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t s = m[j], i = 0;
        if (w->mark[s] != stamp)
            for (i = 0; i < n_own && owners[i] != A->OWN[s]; i++) {}
        if (w->mark[s] == stamp || i == n_own) m[k++] = s;
    }
    return k;
}

/* The epsilon closure, through live states only, of seeds[0..n-1], sorted into w->members;
 * returns its size, -1 with an exception set. */
static int64_t closure(const Nfa *A, Scratch *w, const int64_t *seeds, int64_t n) {
    if (++w->stamp == 0) { memset(w->mark, 0, sizeof(uint32_t) * ((size_t)A->n_nfa + 1)); w->stamp = 1; }
    uint32_t stamp = w->stamp;
    int64_t n_mem = 0, sp = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t seed = seeds[j];
        if (!A->LIVE[seed] || w->mark[seed] == stamp) continue;
        w->mark[seed] = stamp;
        w->stack[sp++] = seed;
        while (sp) {
            int64_t s = w->stack[--sp];
            if ((size_t)n_mem >= w->members_cap) {
                w->members_cap = w->members_cap ? w->members_cap * 2 : 256;
                int64_t *mm = realloc(w->members, sizeof(int64_t) * w->members_cap);
                if (!mm) { PyErr_NoMemory(); return -1; }
                w->members = mm;
            }
            w->members[n_mem++] = s;
            if (A->EOFF[s] < 0 || A->EOFF[s] > A->EOFF[s + 1] || A->EOFF[s + 1] > A->n_eps) {
                PyErr_Format(PyExc_ValueError, "bad epsilon offsets of NFA state %lld", (long long)s);
                return -1;
            }
            for (int64_t e = A->EOFF[s]; e < A->EOFF[s + 1]; e++) {
                int64_t t = A->EDST[e];
                if (t < 0 || t >= A->n_nfa) {
                    PyErr_Format(PyExc_ValueError, "bad epsilon target %lld", (long long)e);
                    return -1;
                }
                if (A->LIVE[t] && w->mark[t] != stamp) { w->mark[t] = stamp; w->stack[sp++] = t; }
            }
        }
    }
    sort_i64(w->members, (size_t)(n_mem));
    return drop_dominated(A, w, n_mem);
}

/* The reading of NFA set m[0..n-1] interned in RD: key = [n accepting, accepting..., growing...],
 * both parts sorted and distinct (``key`` holds 2n + 1). Its id, -1 on memory failure. */
static int64_t reading_id(const Nfa *A, SetIndex *RD, int64_t *key, const int64_t *m, int64_t n) {
    int64_t n_acc = 0, n_grow = 0;
    int64_t *a = key + 1, *g = key + 1 + n;
    for (int64_t j = 0; j < n; j++) {
        int64_t s = m[j], t = A->ACC[s];
        if (t >= 0) a[n_acc++] = t;
        if (t < 0 || A->OFF[s + 1] > A->OFF[s]) g[n_grow++] = A->OWN[s];
    }
    sort_i64(a, (size_t)(n_acc));
    sort_i64(g, (size_t)(n_grow));
    int64_t k = 1;
    for (int64_t j = 0; j < n_acc; j++) if (k == 1 || a[j] != key[k - 1]) key[k++] = a[j];
    key[0] = k - 1;
    int64_t first_g = k;
    for (int64_t j = 0; j < n_grow; j++) if (k == first_g || g[j] != key[k - 1]) key[k++] = g[j];
    return set_index_get(RD, key, k);
}

/* The readings list of RD: (accepting, growing) tuple pairs; NULL with an exception set. */
static PyObject *readings_list(const SetIndex *RD) {
    PyObject *readings = PyList_New((Py_ssize_t)RD->n);
    if (!readings) return NULL;
    for (size_t r = 0; r < RD->n; r++) {
        const int64_t *m = RD->pool + RD->off[r];
        int64_t n_acc = m[0], n_grow = RD->len[r] - 1 - n_acc;
        PyObject *ta = PyTuple_New((Py_ssize_t)n_acc), *tg = PyTuple_New((Py_ssize_t)n_grow), *pair;
        if (!ta || !tg) { Py_XDECREF(ta); Py_XDECREF(tg); Py_DECREF(readings); return NULL; }
        for (int64_t j = 0; j < n_acc + n_grow; j++) {
            PyObject *v = PyLong_FromLongLong(m[1 + j]);
            if (!v) { Py_DECREF(ta); Py_DECREF(tg); Py_DECREF(readings); return NULL; }
            if (j < n_acc) PyTuple_SET_ITEM(ta, j, v); else PyTuple_SET_ITEM(tg, j - n_acc, v);
        }
        pair = PyTuple_Pack(2, ta, tg);
        Py_DECREF(ta); Py_DECREF(tg);
        if (!pair) { Py_DECREF(readings); return NULL; }
        PyList_SET_ITEM(readings, (Py_ssize_t)r, pair);
    }
    return readings;
}

/* The NFA arrays from twelve buffers, their lengths checked against each other; -1 with an exception. */
static int nfa_from(Nfa *A, Buf *b, const char *who) {
    A->OFF = b[0].view.buf; A->LO = b[1].view.buf; A->END = b[2].view.buf; A->DST = b[3].view.buf;
    A->EOFF = b[4].view.buf; A->EDST = b[5].view.buf; A->LIVE = b[6].view.buf; A->OWN = b[7].view.buf;
    A->LAZY = b[8].view.buf; A->ACC = b[9].view.buf; A->UOFF = b[10].view.buf; A->UDST = b[11].view.buf;
    A->n_nfa = LEN(b[0], 8) - 1; A->n_edges = LEN(b[1], 8); A->n_eps = LEN(b[5], 8); A->n_univ = LEN(b[11], 8);
    if (A->n_nfa < 0 || LEN(b[2], 8) != A->n_edges || LEN(b[3], 8) != A->n_edges || LEN(b[4], 8) != A->n_nfa + 1 ||
        LEN(b[6], 1) != A->n_nfa || LEN(b[7], 8) != A->n_nfa || LEN(b[8], 8) != A->n_nfa || LEN(b[9], 8) != A->n_nfa ||
        LEN(b[10], 8) != A->n_nfa + 1) {
        PyErr_Format(PyExc_ValueError, "%s: NFA arrays differ in length", who);
        return -1;
    }
    return 0;
}

static const char *NFA_NAMES[NFA_ARRAYS] = {"offsets", "lo", "end", "dst", "eps_off", "eps_dst", "live", "owner",
                                            "lazy_tid", "accept_tid", "univ_off", "univ_dst"};

static int nfa_bufs(PyObject **objs, Buf *b) {
    for (int i = 0; i < NFA_ARRAYS; i++)
        if (get_buf(objs[i], &b[i], NFA_NAMES[i], i == 6 ? 1 : 8, 0)) return -1;
    return 0;
}

static void nfa_release(Buf *b) {
    for (int i = 0; i < NFA_ARRAYS; i++) release(&b[i]);
}

PyObject *native_determinize(PyObject *self, PyObject *args) {
    PyObject *o[NFA_ARRAYS], *o_start;
    Py_ssize_t limit, max_states;
    long long work;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOnnL", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &o[11], &o_start, &limit, &max_states, &work))
        return NULL;
    Buf b[NFA_ARRAYS], start = {0};
    memset(b, 0, sizeof b);
    Nfa A;
    Scratch w;
    memset(&w, 0, sizeof w);
    PyObject *result = NULL, *sets = NULL, *rows_obj = NULL, *readings = NULL, *reading_obj = NULL;
    SetIndex X = {0}, RD = {0}, TG = {0};   /* TG: the target sets met, whose states are target_state */
    int32_t *reading_of = NULL;
    int64_t *key = NULL, *target_state = NULL;
    size_t ts_cap = 0;
    int32_t *rows = NULL;
    size_t rows_cap = 0;
    if (nfa_bufs(o, b) || get_buf(o_start, &start, "start_set", 8, 0) || nfa_from(&A, b, "determinize")) goto done;
    const int64_t *ST = start.view.buf;
    for (Py_ssize_t s = 0; s < A.n_nfa; s++) {
        if (A.OFF[s] < 0 || A.OFF[s] > A.OFF[s + 1] || A.OFF[s + 1] > A.n_edges || A.EOFF[s] < 0 ||
            A.EOFF[s] > A.EOFF[s + 1] || A.EOFF[s + 1] > A.n_eps) {
            PyErr_Format(PyExc_ValueError, "determinize: bad edge offsets of NFA state %zd", s);
            goto done;
        }
    }
    for (Py_ssize_t e = 0; e < A.n_edges; e++)
        if (A.LO[e] < 0 || A.END[e] > 256 || A.LO[e] >= A.END[e] || A.DST[e] < 0 || A.DST[e] >= A.n_nfa) {
            PyErr_Format(PyExc_ValueError, "determinize: bad edge %zd", e);
            goto done;
        }
    for (Py_ssize_t e = 0; e < A.n_eps; e++)
        if (A.EDST[e] < 0 || A.EDST[e] >= A.n_nfa) {
            PyErr_Format(PyExc_ValueError, "determinize: bad epsilon target %zd", e);
            goto done;
        }
    for (Py_ssize_t i = 0; i < LEN(start, 8); i++)
        if (ST[i] < 0 || ST[i] >= A.n_nfa || (i > 0 && ST[i] <= ST[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "determinize: start_set must be sorted NFA states");
            goto done;
        }
    if (limit < 1) limit = 1;
    if (scratch_init(&w, A.n_nfa) < 0) goto done;
    if (set_index_get(&X, NULL, 0) != 0 || set_index_get(&X, ST, LEN(start, 8)) != 1) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "determinize: start_set must not be empty");
        goto done;
    }
    const char *stopped = NULL;
    long long spent = 0;   /* work units, as Fuel counts them */
    size_t n_rows = 1;   /* DEAD's row: all DEAD */
    rows_cap = 1024;
    rows = calloc(rows_cap * 256, sizeof(int32_t));
    if (!rows) { PyErr_NoMemory(); goto done; }
    for (size_t sid = 1; sid < X.n; sid++) {
        if ((Py_ssize_t)sid >= limit) {   /* rows of states 0 .. limit-1 only, as build_all */
            stopped = "limit";
            break;
        }
        if (work >= 0 && spent > work) {   /* where build_all looks at its tally */
            stopped = "work";
            break;
        }
        if (sid >= rows_cap) {
            int32_t *r = realloc(rows, sizeof(int32_t) * 256 * rows_cap * 2);
            if (!r) { PyErr_NoMemory(); goto done; }
            rows = r;
            memset(rows + 256 * rows_cap, 0, sizeof(int32_t) * 256 * rows_cap);
            rows_cap *= 2;
        }
        int32_t *row = rows + 256 * sid;
        long long cost = row_targets(&A, &w, X.pool + X.off[sid], X.len[sid]);
        if (cost < 0) goto done;
        spent += cost;
        int64_t prev_a = -1, prev_n = 0, prev_id = 0;
        for (int k = 0; k < w.n_el; k++) {
            int64_t a = w.pos[k], m = w.cnt[k];
            if (a == m) continue;
            int64_t nt = m - a, id;
            if (prev_a >= 0 && prev_n == nt && memcmp(w.tgt + prev_a, w.tgt + a, sizeof(int64_t) * (size_t)nt) == 0) {
                id = prev_id;   /* the same targets as the range before: the same state */
            } else {
                /* a target set met before (in any row) leads to the state it led to then: its
                 * closure is not taken again (the state it finds is the one the closure would) */
                size_t met = TG.n;
                int64_t tid = set_index_get(&TG, w.tgt + a, nt);
                if (tid < 0) { PyErr_NoMemory(); goto done; }
                if ((size_t)tid < met) {
                    id = target_state[tid];
                } else {
                    int64_t n_mem = closure(&A, &w, w.tgt + a, nt);
                    if (n_mem < 0) goto done;
                    size_t before = X.n;
                    id = set_index_get(&X, w.members, n_mem);
                    if (id < 0) { PyErr_NoMemory(); goto done; }
                    if (X.n > before) spent += 1 + n_mem;   /* a new state, as _intern charges it */
                    if ((Py_ssize_t)X.n > max_states) stopped = "states";
                    if ((size_t)tid >= ts_cap) {
                        size_t cap = ts_cap ? ts_cap * 2 : 1024;
                        int64_t *t = realloc(target_state, sizeof(int64_t) * cap);
                        if (!t) { PyErr_NoMemory(); goto done; }
                        target_state = t;
                        ts_cap = cap;
                    }
                    target_state[tid] = id;
                }
            }
            for (int byte = w.starts[k]; byte < w.starts[k + 1]; byte++) row[byte] = (int32_t)id;
            prev_a = a; prev_n = nt; prev_id = id;
        }
        n_rows = sid + 1;
        if (stopped) break;
    }
    sets = PyList_New(0);
    if (!sets) goto done;
    for (size_t id = 2; id < X.n; id++) {
        PyObject *t = int_tuple(X.pool + X.off[id], (size_t)X.len[id]);   /* a key of the lexer's state index */
        if (!t) goto done;
        if (PyList_Append(sets, t) < 0) { Py_DECREF(t); goto done; }
        Py_DECREF(t);
    }
    rows_obj = PyBytes_FromStringAndSize((const char *)rows, (Py_ssize_t)(sizeof(int32_t) * 256 * n_rows));
    if (!rows_obj) goto done;
    size_t n_new = X.n > 2 ? X.n - 2 : 0, widest = 0;
    for (size_t id = 2; id < X.n; id++) if ((size_t)X.len[id] > widest) widest = (size_t)X.len[id];
    reading_of = malloc(sizeof(int32_t) * (n_new ? n_new : 1));
    key = malloc(sizeof(int64_t) * (2 * widest + 1));
    if (!reading_of || !key) { PyErr_NoMemory(); goto done; }
    for (size_t id = 2; id < X.n; id++) {
        int64_t rid = reading_id(&A, &RD, key, X.pool + X.off[id], X.len[id]);
        if (rid < 0) { PyErr_NoMemory(); goto done; }
        reading_of[id - 2] = (int32_t)rid;
    }
    readings = readings_list(&RD);
    if (!readings) goto done;
    reading_obj = PyBytes_FromStringAndSize((const char *)reading_of, (Py_ssize_t)(sizeof(int32_t) * n_new));
    if (!reading_obj) goto done;
    result = Py_BuildValue("(OOnsOO)", sets, rows_obj, (Py_ssize_t)n_rows, stopped, readings, reading_obj);
done:
    Py_XDECREF(sets); Py_XDECREF(rows_obj); Py_XDECREF(readings); Py_XDECREF(reading_obj);
    set_index_free(&RD); set_index_free(&X); set_index_free(&TG);
    free(reading_of); free(key); free(rows); free(target_state);
    scratch_free(&w);
    nfa_release(b); release(&start);
    return result;
}

/* The sorted NFA set of lexer state ``sid`` from the ``states`` dict, into *buf (grown); its size,
 * -1 with an exception set. */
static int64_t state_set(PyObject *states, PyObject *sid, const Nfa *A, int64_t **buf, size_t *cap, const char *who) {
    PyObject *t = PyDict_GetItemWithError(states, sid);
    if (!t) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "%s: no lexer state %R", who, sid);
        return -1;
    }
    if (!PyTuple_Check(t)) {
        PyErr_Format(PyExc_TypeError, "%s: a lexer state's NFA set must be a tuple", who);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    if ((size_t)n + 1 > *cap) {
        size_t c = (size_t)n * 2 + 1;
        int64_t *p = realloc(*buf, sizeof(int64_t) * c);
        if (!p) { PyErr_NoMemory(); return -1; }
        *buf = p;
        *cap = c;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, j));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || v >= A->n_nfa || (j > 0 && v <= (*buf)[j - 1])) {
            PyErr_Format(PyExc_ValueError, "%s: a lexer state's NFA set must be sorted NFA states", who);
            return -1;
        }
        (*buf)[j] = v;
    }
    return (int64_t)n;
}

/* the lexer state id an ``index`` or ``cache`` value names; -1 with an exception set */
static int64_t state_id(PyObject *v, int64_t n_states, const char *who) {
    long long id = PyLong_AsLongLong(v);
    if (id == -1 && PyErr_Occurred()) return -1;
    if (id < 0 || id >= n_states) {
        PyErr_Format(PyExc_ValueError, "%s: lexer state %lld out of range", who, id);
        return -1;
    }
    return (int64_t)id;
}

/* Undo a failed batch: the states it made leave ``states`` and ``index`` and the memo's target
 * cache, the rows it finished are marked not done again (the error is kept). */
static void lazy_batch_undo(LazyBatch *L) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    for (int64_t id = L->n_states; id < L->n_states + L->n_new; id++) {
        PyObject *k = PyLong_FromLongLong(id), *mk = k ? PyDict_GetItemWithError(L->states, k) : NULL;
        if (mk) {
            Py_INCREF(mk);
            if (PyDict_DelItem(L->index, mk) < 0) PyErr_Clear();
            Py_DECREF(mk);
            if (PyDict_DelItem(L->states, k) < 0) PyErr_Clear();
        }
        PyErr_Clear();
        Py_XDECREF(k);
    }
    SubsetMemo *memo = L->memo;
    for (size_t slot = 0; slot < memo->targets.n && slot < memo->ts_cap; slot++)
        if (memo->target_state[slot] >= L->n_states) memo->target_state[slot] = -1;
    for (size_t i = 0; i < L->n_done; i++) ((unsigned char *)L->row_done.view.buf)[L->done[i]] = 0;
    PyErr_Restore(et, ev, tb);
}

/* Open a batch: the NFA arrays (twelve objects), the lexer's dicts, memo, int32 table and row_done
 * bytes, checked; the memo is held until lazy_batch_close. 0, or -1 with an exception set. */
int lazy_batch_open(LazyBatch *L, PyObject **nfa, PyObject *states, PyObject *index, PyObject *o_memo, PyObject *o_trans,
                    PyObject *o_done, Py_ssize_t n_states, Py_ssize_t max_states, long long fuel_left,
                    long long bytes_left, Py_ssize_t state_bytes, const char *who) {
    memset(L, 0, sizeof *L);
    L->who = who; L->states = states; L->index = index; L->n_states = n_states; L->max_states = max_states;
    L->fuel_left = fuel_left; L->bytes_left = bytes_left; L->state_bytes = state_bytes;
    L->memo = PyCapsule_GetPointer(o_memo, MEMO_NAME);
    if (!L->memo) return -1;
    if (nfa_bufs(nfa, L->b) || nfa_from(&L->A, L->b, who) || get_buf(o_trans, &L->trans, "trans", 4, 1) ||
        get_buf(o_done, &L->row_done, "row_done", 1, 1))
        return -1;
    L->n_rows = LEN(L->trans, 4) / 256;
    if (LEN(L->row_done, 1) < L->n_rows) L->n_rows = LEN(L->row_done, 1);
    if (L->memo->n_nfa != L->A.n_nfa) {
        PyErr_Format(PyExc_ValueError, "%s: the memo was made for another NFA", who);
        return -1;
    }
    if (L->memo->busy) {   /* re-entered on the same lexer (a finalizer run by the collector) */
        PyErr_Format(PyExc_RuntimeError, "%s: re-entered on a lexer whose rows are being built", who);
        return -1;
    }
    L->memo->busy = L->took = 1;
    return 0;
}

/* A new state of NFA set w->members[0..n_mem-1] (tuple ``mk``), refused or charged as _intern
 * does: its id (or -2 where a limit stops the batch; -1 with an exception set). */
static int64_t lazy_batch_intern(LazyBatch *L, PyObject *mk, int64_t n_mem) {
    const int64_t *members = L->memo->w.members;
    long long size = (long long)L->state_bytes + 32LL * n_mem;
    if (L->n_states + L->n_new >= L->max_states) L->stopped = "states";
    else if ((L->spent += 1 + n_mem), L->fuel_left >= 0 && L->spent > L->fuel_left) L->stopped = "fuel";
    else if (L->bytes_left >= 0 && L->nbytes + size > L->bytes_left) L->stopped = "bytes";
    if (L->stopped) return -2;
    L->nbytes += size;
    int64_t id = L->n_states + L->n_new;
    if ((size_t)L->n_new + 1 > L->reading_cap) {
        size_t cap = L->reading_cap ? L->reading_cap * 2 : 64;
        int32_t *r = realloc(L->reading_of, sizeof(int32_t) * cap);
        if (!r) { PyErr_NoMemory(); return -1; }
        L->reading_of = r;
        unsigned char *a = realloc(L->accepting, cap);
        if (!a) { PyErr_NoMemory(); return -1; }
        L->accepting = a;
        L->reading_cap = cap;
    }
    if ((size_t)(2 * n_mem + 1) > L->key_cap) {
        L->key_cap = (size_t)(2 * n_mem + 1) * 2;
        int64_t *kk = realloc(L->key, sizeof(int64_t) * L->key_cap);
        if (!kk) { PyErr_NoMemory(); return -1; }
        L->key = kk;
    }
    int64_t rid = reading_id(&L->A, &L->RD, L->key, members, n_mem);
    PyObject *idv = rid < 0 ? NULL : PyLong_FromLongLong(id);
    if (!idv || PyDict_SetItem(L->states, idv, mk) < 0 || PyDict_SetItem(L->index, mk, idv) < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        Py_XDECREF(idv);
        return -1;
    }
    Py_DECREF(idv);
    L->accepting[L->n_new] = L->key[0] > 0;     /* the reading's accepting terminals, counted */
    L->reading_of[L->n_new++] = (int32_t)rid;
    return id;
}

/* The rows of existing states sids[0..n-1] (in that order), as lazy_rows documents: written into
 * the table, marked done and listed in L->done. Stops early with L->stopped set where a limit
 * refuses (the row it happened in stays undone). 0, or -1 with an exception set. */
int lazy_batch_rows(LazyBatch *L, const int64_t *sids, Py_ssize_t n_sids) {
    int32_t row[256];
    const Nfa *A = &L->A;
    SubsetMemo *memo = L->memo;
    Scratch *wp = &memo->w;
    for (Py_ssize_t i = 0; i < n_sids && !L->stopped; i++) {
        PyObject *sid = PyLong_FromLongLong(sids[i]);
        if (!sid) return -1;
        int64_t n = state_set(L->states, sid, A, &L->set, &L->set_cap, L->who);
        Py_DECREF(sid);
        if (n < 0) return -1;
        int64_t at = sids[i];
        if (at < 0 || at >= L->n_rows) {
            PyErr_Format(PyExc_IndexError, "%s: state %lld has no row in the table", L->who, (long long)at);
            return -1;
        }
        long long cost = row_targets(A, wp, L->set, n);
        if (cost < 0) return -1;
        L->spent += cost;
        if (L->fuel_left >= 0 && L->spent > L->fuel_left) { L->stopped = "fuel"; break; }
        memset(row, 0, sizeof row);
        int64_t prev_a = -1, prev_n = 0, prev_id = 0;
        for (int k = 0; k < wp->n_el; k++) {
            int64_t a = wp->pos[k], m = wp->cnt[k];
            if (a == m) continue;
            int64_t nt = m - a, id;
            if (prev_a >= 0 && prev_n == nt && memcmp(wp->tgt + prev_a, wp->tgt + a, sizeof(int64_t) * (size_t)nt) == 0) {
                id = prev_id;
            } else {
                size_t known = memo->targets.n;
                if (known + 1 > memo->ts_cap) {   /* room for a new slot's state before it is made */
                    size_t c = memo->ts_cap ? memo->ts_cap * 2 : 1024;
                    int64_t *p = realloc(memo->target_state, sizeof(int64_t) * c);
                    if (!p) { PyErr_NoMemory(); return -1; }
                    memo->target_state = p;
                    memo->ts_cap = c;
                }
                int64_t slot = set_index_get(&memo->targets, wp->tgt + a, nt);
                if (slot < 0) { PyErr_NoMemory(); return -1; }
                if ((size_t)slot < known && memo->target_state[slot] >= 0) {   /* met before: its state */
                    id = memo->target_state[slot];
                    if (id < 0 || id >= L->n_states + L->n_new) {
                        PyErr_Format(PyExc_ValueError, "%s: the memo names a state the lexer does not have", L->who);
                        return -1;
                    }
                } else {
                    memo->target_state[slot] = -1;   /* not known yet (a refusal below leaves it so) */
                    int64_t n_mem = closure(A, wp, wp->tgt + a, nt);
                    PyObject *mk = n_mem < 0 ? NULL : int_tuple(wp->members, (size_t)n_mem);
                    if (!mk) return -1;
                    PyObject *v = PyDict_GetItemWithError(L->index, mk);
                    if (v) id = state_id(v, L->n_states + L->n_new, L->who);
                    else if (PyErr_Occurred()) id = -1;
                    else id = lazy_batch_intern(L, mk, n_mem);
                    Py_DECREF(mk);
                    if (id == -2) break;     /* refused: the row stays undone */
                    if (id < 0) return -1;
                    memo->target_state[slot] = id;
                }
            }
            for (int byte = wp->starts[k]; byte < wp->starts[k + 1]; byte++) row[byte] = (int32_t)id;
            prev_a = a; prev_n = nt; prev_id = id;
        }
        if (L->stopped) break;
        if (L->n_done == L->done_cap) {
            size_t c = L->done_cap ? L->done_cap * 2 : 64;
            int64_t *d = realloc(L->done, sizeof(int64_t) * c);
            if (!d) { PyErr_NoMemory(); return -1; }
            L->done = d;
            L->done_cap = c;
        }
        memcpy((int32_t *)L->trans.view.buf + 256 * (size_t)at, row, sizeof row);
        ((unsigned char *)L->row_done.view.buf)[at] = 1;
        L->done[L->n_done++] = at;
    }
    return 0;
}

/* The batch's readings list and the reading of each new state (bytes of int32); -1 with an exception. */
int lazy_batch_readings(LazyBatch *L, PyObject **readings, PyObject **reading_of) {
    *readings = readings_list(&L->RD);
    *reading_of = *readings ? PyBytes_FromStringAndSize((const char *)L->reading_of,
                                                        (Py_ssize_t)(sizeof(int32_t) * L->n_new)) : NULL;
    if (*reading_of) return 0;
    Py_CLEAR(*readings);
    return -1;
}

/* Close a batch: a failed one is undone (the lexer as before it was opened); the memo is let go. */
void lazy_batch_close(LazyBatch *L, int failed) {
    if (failed && L->took && (L->n_new || L->n_done)) lazy_batch_undo(L);
    set_index_free(&L->RD);
    free(L->reading_of); free(L->accepting); free(L->set); free(L->key); free(L->done);
    release(&L->trans); release(&L->row_done);
    if (L->took) L->memo->busy = 0;
    nfa_release(L->b);
}

PyObject *native_lazy_rows(PyObject *self, PyObject *args) {
    PyObject *o[NFA_ARRAYS], *states, *index, *o_memo, *o_trans, *o_done, *o_sids;
    Py_ssize_t n_states, max_states, state_bytes;
    long long fuel_left, bytes_left;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO!O!OOOOnnLLn", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &PyDict_Type, &states, &PyDict_Type, &index, &o_memo, &o_trans, &o_done,
                          &o_sids, &n_states, &max_states, &fuel_left, &bytes_left, &state_bytes))
        return NULL;
    LazyBatch L;
    PyObject *result = NULL, *seq = NULL, *readings = NULL, *reading_obj = NULL;
    int64_t *sids = NULL;
    if (lazy_batch_open(&L, o, states, index, o_memo, o_trans, o_done, n_states, max_states, fuel_left, bytes_left,
                        state_bytes, "lazy_rows"))
        goto done;
    seq = PySequence_Fast(o_sids, "lazy_rows: sids must be a sequence of lexer states");
    if (!seq) goto done;
    Py_ssize_t n_sids = PySequence_Fast_GET_SIZE(seq);
    sids = malloc(sizeof(int64_t) * (size_t)(n_sids ? n_sids : 1));
    if (!sids) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n_sids; i++) {
        sids[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (sids[i] == -1 && PyErr_Occurred()) goto done;
    }
    if (lazy_batch_rows(&L, sids, n_sids) || lazy_batch_readings(&L, &readings, &reading_obj)) goto done;
    result = Py_BuildValue("(nLLLsOO)", (Py_ssize_t)L.n_done, (long long)L.n_new, L.spent, L.nbytes, L.stopped,
                           readings, reading_obj);
done:
    lazy_batch_close(&L, result == NULL);   /* an error mid-batch: undone (the lexer as before the call) */
    Py_XDECREF(seq); Py_XDECREF(readings); Py_XDECREF(reading_obj);
    free(sids);
    return result;
}
