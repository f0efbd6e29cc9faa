/* guidewire.grammar._native: partition refinement of a DFA's states, by splitters (Hopcroft's
 * "all but the largest part" rule, kept in rounds) and by Moore's rounds (refine, at the end: the
 * reference).
 *
 * refine_split(label, trans, rounds, out) -> (n_classes, stable)
 *
 * The same contract and the same partition as refine (Moore's refinement, below): label
 * (n int64) is the initial partition, trans (n x k int32) the DFA's columns, targets in [0, n);
 * after r rounds two states are together iff they were together before and every byte column
 * takes them into one class of the round before. Stops when a round splits nothing (stable) or
 * after ``rounds`` rounds (rounds < 0: no bound). out (n int64) gets each state's class in
 * [0, n_classes); only the partition is meaningful.
 *
 * Moore's rounds touch every state and column each round: a lexer holding a long length counter
 * splits off one layer per round, for as many rounds as the token depth, and that was most of
 * such a grammar's compile. Here a round splits by the classes the round before made, each as
 * the set of its members' predecessors under each column, and of every class that split only
 * the parts but the largest: a state's membership in the largest part follows from its
 * membership in the class it came from (which every class of the round before already agrees on)
 * and in the other parts. A state is in a splitter O(log n) times, so the work is
 * O(n k log n) rather than O(n k rounds). The splitters of a round are the classes as they were
 * when it began (their members copied first), so a round yields exactly Moore's round. */
#include "_native_buf.h"

/* The arguments both refinements take, checked: n states, k columns, the rows and the labels. */
typedef struct { Buf lab, tr, out; Py_ssize_t n, k; const int32_t *T; const int64_t *L0; } RefineArgs;

static int refine_args(PyObject *args, RefineArgs *a, Py_ssize_t *rounds, const char *who) {
    PyObject *o_label, *o_trans, *o_out;
    if (!PyArg_ParseTuple(args, "OOnO", &o_label, &o_trans, rounds, &o_out)) return -1;
    if (get_buf(o_label, &a->lab, "label", 8, 0) || get_buf(o_trans, &a->tr, "trans", 4, 0) ||
        get_buf(o_out, &a->out, "out", 8, 1))
        return -1;
    a->n = LEN(a->lab, 8);
    if (LEN(a->out, 8) != a->n || a->n <= 0 || LEN(a->tr, 4) % a->n != 0) {
        PyErr_Format(PyExc_ValueError, "%s: label, out and the rows of trans differ in length", who);
        return -1;
    }
    a->k = LEN(a->tr, 4) / a->n;
    a->T = a->tr.view.buf;
    a->L0 = a->lab.view.buf;
    for (Py_ssize_t i = 0; i < a->n * a->k; i++)
        if (a->T[i] < 0 || a->T[i] >= a->n) {
            PyErr_Format(PyExc_IndexError, "%s: target %d out of range", who, (int)a->T[i]);
            return -1;
        }
    return 0;
}

static void refine_args_release(RefineArgs *a) {
    release(&a->lab); release(&a->tr); release(&a->out);
}

/* The labels numbered densely in order of first appearance (open hashing) into dense; the number
 * of classes, -1 with MemoryError set. */
static int64_t dense_labels(const int64_t *L0, Py_ssize_t n, int64_t *dense) {
    size_t cap = 1;
    while (cap < (size_t)(2 * n)) cap <<= 1;
    int64_t *table = malloc(sizeof(int64_t) * cap), count = 0;
    if (!table) { PyErr_NoMemory(); return -1; }
    for (size_t h = 0; h < cap; h++) table[h] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t h = ((uint64_t)L0[i] * 0x9E3779B97F4A7C15ull) & (cap - 1);
        while (table[h] >= 0 && L0[table[h]] != L0[i]) h = (h + 1) & (cap - 1);
        if (table[h] < 0) { table[h] = i; dense[i] = count++; }
        else dense[i] = dense[table[h]];
    }
    free(table);
    return count;
}


static void refine_clear(int64_t **ps, int n) {
    for (int i = 0; i < n; i++) { free(ps[i]); ps[i] = NULL; }
}

PyObject *native_refine_split(PyObject *self, PyObject *args) {
    RefineArgs ra = {0};
    Py_ssize_t rounds;
    PyObject *result = NULL;
    (void)self;
    /* elem: states ordered by class; loc: a state's position in elem; blk: its class;
     * bstart/bend: a class's range in elem, its marked members first (bmark of them);
     * made: the round that made a class (0: before the first); origin: the class of the round
     * before that it came from; pred_off/pred: predecessors by (target * k + column) */
    int64_t *elem = NULL, *loc = NULL, *blk = NULL, *bstart = NULL, *bend = NULL, *bmark = NULL, *made = NULL,
            *origin = NULL, *touched = NULL, *pred_off = NULL, *splitters = NULL, *next = NULL, *snap = NULL,
            *snap_off = NULL, *stamp = NULL, *best = NULL, *news = NULL;
    int32_t *pred = NULL;
    if (refine_args(args, &ra, &rounds, "refine_split") < 0) goto done;
    Py_ssize_t n = ra.n, k = ra.k;
    const int32_t *T = ra.T;
    size_t sz = sizeof(int64_t) * (size_t)n;
    elem = malloc(sz); loc = malloc(sz); blk = malloc(sz); bstart = malloc(sz); bend = malloc(sz);
    bmark = calloc((size_t)n, sizeof(int64_t)); made = calloc((size_t)n, sizeof(int64_t));
    origin = malloc(sz); touched = malloc(sz); splitters = malloc(sz); next = malloc(sz); snap = malloc(sz);
    snap_off = malloc(sizeof(int64_t) * ((size_t)n + 1)); stamp = calloc((size_t)n, sizeof(int64_t));
    best = malloc(sz); news = malloc(sz);
    pred_off = calloc((size_t)(n * k + 1), sizeof(int64_t));
    pred = malloc(sizeof(int32_t) * (size_t)(n * k > 0 ? n * k : 1));
    if (!elem || !loc || !blk || !bstart || !bend || !bmark || !made || !origin || !touched || !splitters ||
        !next || !snap || !snap_off || !stamp || !best || !news || !pred_off || !pred) {
        PyErr_NoMemory();
        goto done;
    }
    /* the initial classes: labels numbered densely, then the states placed class by class (a
     * counting sort) */
    int64_t nb = dense_labels(ra.L0, n, blk);
    if (nb < 0) goto done;
    for (int64_t b = 0; b < nb; b++) bend[b] = 0;
    for (Py_ssize_t i = 0; i < n; i++) bend[blk[i]]++;
    int64_t at = 0;
    for (int64_t b = 0; b < nb; b++) { bstart[b] = at; at += bend[b]; bend[b] = bstart[b]; }
    for (Py_ssize_t i = 0; i < n; i++) { int64_t b = blk[i]; elem[bend[b]] = i; loc[i] = bend[b]++; }
    /* predecessors: pred[pred_off[t * k + j] ..] are the states whose column j leads to t */
    for (Py_ssize_t s = 0; s < n; s++)
        for (Py_ssize_t j = 0; j < k; j++) pred_off[(int64_t)T[s * k + j] * k + j + 1]++;
    for (Py_ssize_t x = 0; x < n * k; x++) pred_off[x + 1] += pred_off[x];
    {
        int64_t *fill = malloc(sizeof(int64_t) * (size_t)(n * k > 0 ? n * k : 1));
        if (!fill) { PyErr_NoMemory(); goto done; }
        memcpy(fill, pred_off, sizeof(int64_t) * (size_t)(n * k));
        for (Py_ssize_t s = 0; s < n; s++)
            for (Py_ssize_t j = 0; j < k; j++) pred[fill[(int64_t)T[s * k + j] * k + j]++] = (int32_t)s;
        free(fill);
    }
    /* round 1 splits by every initial class but the largest (one family: all states) */
    int64_t n_split = 0, largest = 0;
    for (int64_t b = 1; b < nb; b++)
        if (bend[b] - bstart[b] > bend[largest] - bstart[largest]) largest = b;
    for (int64_t b = 0; b < nb; b++)
        if (b != largest) splitters[n_split++] = b;
    int stable = 0;
    Py_ssize_t done_rounds = 0;
    while (rounds < 0 || done_rounds < rounds) {
        int64_t round = done_rounds + 1;
        /* the splitters' members as the round begins */
        int64_t m = 0;
        for (int64_t i = 0; i < n_split; i++) {
            int64_t b = splitters[i];
            snap_off[i] = m;
            for (int64_t p = bstart[b]; p < bend[b]; p++) snap[m++] = elem[p];
        }
        snap_off[n_split] = m;
        int64_t n_news = 0;
        for (int64_t i = 0; i < n_split; i++) {
            for (Py_ssize_t j = 0; j < k; j++) {
                int64_t n_touched = 0;
                for (int64_t x = snap_off[i]; x < snap_off[i + 1]; x++) {
                    int64_t t = snap[x];
                    for (int64_t q = pred_off[t * k + j]; q < pred_off[t * k + j + 1]; q++) {
                        int64_t s = pred[q], b = blk[s], pos = loc[s], first = bstart[b] + bmark[b];
                        if (pos < first) continue;      /* marked already */
                        int64_t other = elem[first];
                        elem[first] = s; loc[s] = first;
                        elem[pos] = other; loc[other] = pos;
                        if (bmark[b]++ == 0) touched[n_touched++] = b;
                    }
                }
                for (int64_t u = 0; u < n_touched; u++) {
                    int64_t b = touched[u], size = bend[b] - bstart[b], mk = bmark[b];
                    bmark[b] = 0;
                    if (mk == size) continue;
                    /* the marked members [bstart, bstart + mk) and the rest part: the smaller
                     * side gets the new class id (fewer states relabelled) */
                    int64_t nc = nb++, lo, hi;
                    if (mk <= size - mk) { lo = bstart[b]; hi = bstart[b] + mk; bstart[b] = hi; }
                    else { lo = bstart[b] + mk; hi = bend[b]; bend[b] = lo; }
                    bstart[nc] = lo; bend[nc] = hi; bmark[nc] = 0;
                    for (int64_t p = lo; p < hi; p++) blk[elem[p]] = nc;
                    origin[nc] = made[b] == round ? origin[b] : b;
                    made[nc] = round;
                    news[n_news++] = nc;
                }
            }
        }
        done_rounds++;
        if (n_news == 0) { stable = 1; break; }
        /* the next splitters: of each class of this round's start that split, its parts but the
         * largest */
        int64_t n_next = 0, n_orig = 0;
        for (int64_t i = 0; i < n_news; i++) {
            int64_t x = news[i], o = origin[x];
            if (stamp[o] != round) { stamp[o] = round; best[o] = o; touched[n_orig++] = o; }
            if (bend[x] - bstart[x] > bend[best[o]] - bstart[best[o]]) best[o] = x;
        }
        for (int64_t i = 0; i < n_orig; i++) {
            int64_t o = touched[i];
            if (best[o] != o) next[n_next++] = o;
        }
        for (int64_t i = 0; i < n_news; i++) {
            int64_t x = news[i];
            if (best[origin[x]] != x) next[n_next++] = x;
        }
        memcpy(splitters, next, sizeof(int64_t) * (size_t)n_next);
        n_split = n_next;
    }
    memcpy(ra.out.view.buf, blk, sz);
    result = Py_BuildValue("(LO)", (long long)nb, stable ? Py_True : Py_False);
done:
    {
        int64_t *bufs[] = {elem, loc, blk, bstart, bend, bmark, made, origin, touched, pred_off, splitters, next,
                           snap, snap_off, stamp, best, news};
        refine_clear(bufs, (int)(sizeof(bufs) / sizeof(bufs[0])));
    }
    free(pred);
    refine_args_release(&ra);
    return result;
}

/* refine(label, trans, rounds, out) -> (n_classes, stable)
 *
 * Moore partition refinement of a DFA's states, exact: in each round two states stay together
 * when they had the same label and every byte column takes them to states with the same label
 * (label: n int64, the initial partition; trans: n x k int32, targets in [0, n); out: n int64).
 * Stops when a round splits nothing (stable = True) or after ``rounds`` rounds (rounds < 0: no
 * bound; stable = False when the bound stopped it). Class ids are numbered in order of first
 * appearance; only the partition is meaningful. The reference of refine_split (which
 * lexer.ByteDFA.equivalent_states runs), itself checked against the numpy refinement. */
PyObject *native_refine(PyObject *self, PyObject *args) {
    RefineArgs ra = {0};
    Py_ssize_t rounds;
    PyObject *result = NULL;
    (void)self;
    int64_t *cur = NULL, *nxt = NULL, *table = NULL;
    if (refine_args(args, &ra, &rounds, "refine") < 0) goto done;
    Py_ssize_t n = ra.n, k = ra.k;
    const int32_t *T = ra.T;
    size_t cap = 1;
    while (cap < (size_t)(2 * n)) cap <<= 1;
    cur = malloc(sizeof(int64_t) * n);
    nxt = malloc(sizeof(int64_t) * n);
    table = malloc(sizeof(int64_t) * cap);
    if (!cur || !nxt || !table) { PyErr_NoMemory(); goto done; }
    int64_t n_classes = dense_labels(ra.L0, n, nxt);
    if (n_classes < 0) goto done;
    memcpy(cur, nxt, sizeof(int64_t) * n);
    int stable = 0;
    Py_ssize_t done_rounds = 0;
    while (rounds < 0 || done_rounds < rounds) {
        for (size_t h = 0; h < cap; h++) table[h] = -1;
        int64_t count = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const int32_t *row = T + i * k;
            uint64_t h = (uint64_t)cur[i] * 0x9E3779B97F4A7C15ull;
            for (Py_ssize_t j = 0; j < k; j++) h = (h ^ (uint64_t)cur[row[j]]) * 0x100000001B3ull + 0x9E37ull;
            h ^= h >> 29;
            h &= cap - 1;
            for (;;) {
                int64_t r = table[h];
                if (r < 0) { table[h] = i; nxt[i] = count++; break; }
                int same = cur[r] == cur[i];
                const int32_t *rr = T + r * k;
                for (Py_ssize_t j = 0; same && j < k; j++) same = cur[rr[j]] == cur[row[j]];
                if (same) { nxt[i] = nxt[r]; break; }
                h = (h + 1) & (cap - 1);
            }
        }
        done_rounds++;
        int64_t *tmp = cur; cur = nxt; nxt = tmp;
        if (count == n_classes) { stable = 1; break; }
        n_classes = count;
    }
    memcpy(ra.out.view.buf, cur, sizeof(int64_t) * n);
    result = Py_BuildValue("(LO)", (long long)n_classes, stable ? Py_True : Py_False);
done:
    free(cur); free(nxt); free(table);
    refine_args_release(&ra);
    return result;
}
