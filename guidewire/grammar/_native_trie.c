/* guidewire.grammar._native: the token-trie walk of a lexer state's token table.
 *
 * trie_walk(node_byte, node_depth, node_end, node_tok, toks, max_depth,
 *           ext, copied, emit, alive_id, q, refs, first, inh, words,
 *           gid, tok, n0, front_in, lex_in, n_front_in, front_out, lex_out, budget, wait_refs
 *           [, member, member_prefix, chars, subtree_chars, limit])
 *     -> (status, n_tok, n_front, nodes, groups)
 *
 * The vocabulary's ordinary tokens as a trie in preorder (tabletrie.TokenTrie): node k holds
 * byte node_byte[k] at depth node_depth[k] (1 for a first byte), its subtree is k..node_end[k]-1,
 * and the tokens that end at node k are toks[node_tok[k]:node_tok[k + 1]] (so the tokens of
 * k's subtree are toks[node_tok[k]:node_tok[node_end[k]]]).
 *
 * The walk runs every first byte b with first[b] set from lexer state q, depth first, with
 * maximal munch restarts at START (a byte that kills an accepting state ends its lexeme).
 * Beside it, each reference state refs[r] (START or a self-loop hub) is walked over the same
 * bytes while neither walk has ended a lexeme; where the two reach the same state, or both end
 * their lexemes at the same byte with the same terminal set (both restart at START with it),
 * every token below reads the same from q as from refs[r], so the subtree is skipped and its
 * tokens set in the bitmask row inh[r] (inherited). Every other token that ends alive gets a
 * group id by (lexemes completed, alive-set id of its final state); tok[i] / gid[i] list them.
 * groups is the list of (lexemes tuple, alive id) in group order.
 *
 * A state whose transition row is not in the mirror (copied[s] false) cannot be walked: the node
 * that reaches it is put on the frontier (front_out, n_front entries of 5 + len(refs) int64: node,
 * depth, state, lexeme count, where the lexemes completed on the way start in lex_out,
 * the reference states there) and its subtree skipped; any n_front > 0 means the walk is incomplete.
 * The caller makes those rows and calls again with the frontier as front_in / lex_in (n_front_in entries):
 * the walk then resumes below each frontier node, not from q, appending to tok/gid from n0 (group ids
 * are numbered afresh by each call: the caller maps them), so a lazily built lexer costs one walk of
 * the trie in all, not one per round of rows. A reference walk that reaches a missing row puts its
 * node on the frontier too when wait_refs is set; otherwise that reference just stops being walked
 * there (a reference only saves work, so the walk is complete and exact without it). status -1: more
 * than ``budget`` nodes, or more walked tokens than tok holds (the caller falls back to the
 * vectorised walk); -2: the frontier or its lexeme pool is full (the caller makes the rows of the
 * entries listed and walks again from q). nodes: the nodes visited by this call.
 *
 * A UTF-8 slice (optional, tabletrie.TrieSlice): the tokens of trie position i with member[i] set
 * and chars[i] < limit read from q along a chain of states and are answered by the slice's rows:
 * they are neither grouped nor inherited, and a subtree holding only such tokens (no non-member,
 * member_prefix[i] counting the non-members before position i; and subtree_chars[k] < limit) is
 * skipped whole. A string body or a maxLength counter then walks only its non-members' paths.
 *
 * The reference is the vectorised table build (tokentable.TableBuilder without this module)
 * and, per token, tokentable.walk_token; the tests compare them.
 */
#include "_native_buf.h"
#include <stdlib.h>

#define T_DEAD 0
#define T_START 1
#define T_ROW 257

typedef struct {
    int64_t *pool; size_t pool_len, pool_cap;   /* lexemes of every group, back to back */
    int64_t *off, *len, *alive; size_t n, cap;  /* per group */
    int64_t *slot; size_t scap;                 /* open addressing: group ids, -1 empty */
} Groups;

static uint64_t group_hash(const int64_t *lex, int64_t n, int64_t alive) {
    uint64_t h = 1469598103934665603ULL;
    h = (h ^ (uint64_t)n) * 1099511628211ULL;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint64_t)(lex[i] + 1)) * 1099511628211ULL;
    h = (h ^ (uint64_t)alive) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static int groups_init(Groups *g) {
    memset(g, 0, sizeof(*g));
    g->pool_cap = 64; g->cap = 16; g->scap = 64;
    g->pool = malloc(g->pool_cap * sizeof(int64_t));
    g->off = malloc(g->cap * sizeof(int64_t));
    g->len = malloc(g->cap * sizeof(int64_t));
    g->alive = malloc(g->cap * sizeof(int64_t));
    g->slot = malloc(g->scap * sizeof(int64_t));
    if (!g->pool || !g->off || !g->len || !g->alive || !g->slot) return -1;
    for (size_t i = 0; i < g->scap; i++) g->slot[i] = -1;
    return 0;
}

static void groups_free(Groups *g) {
    free(g->pool); free(g->off); free(g->len); free(g->alive); free(g->slot);
}

static int same_group(const Groups *g, int64_t id, const int64_t *lex, int64_t n, int64_t alive) {
    if (g->len[id] != n || g->alive[id] != alive) return 0;
    return n == 0 || memcmp(g->pool + g->off[id], lex, (size_t)n * sizeof(int64_t)) == 0;
}

/* the group id of (lex[:n], alive), made if new; -1 when out of memory */
static int64_t group_of(Groups *g, const int64_t *lex, int64_t n, int64_t alive) {
    size_t at = (size_t)group_hash(lex, n, alive) & (g->scap - 1);
    for (;;) {
        int64_t id = g->slot[at];
        if (id < 0) break;
        if (same_group(g, id, lex, n, alive)) return id;
        at = (at + 1) & (g->scap - 1);
    }
    if (g->n == g->cap) {
        size_t cap = g->cap * 2;
        int64_t *off = realloc(g->off, cap * sizeof(int64_t));
        if (!off) return -1;
        g->off = off;
        int64_t *len = realloc(g->len, cap * sizeof(int64_t));
        if (!len) return -1;
        g->len = len;
        int64_t *al = realloc(g->alive, cap * sizeof(int64_t));
        if (!al) return -1;
        g->alive = al;
        g->cap = cap;
    }
    if (g->pool_len + (size_t)n > g->pool_cap) {
        size_t cap = (g->pool_cap + (size_t)n) * 2;
        int64_t *pool = realloc(g->pool, cap * sizeof(int64_t));
        if (!pool) return -1;
        g->pool = pool;
        g->pool_cap = cap;
    }
    int64_t id = (int64_t)g->n++;
    g->off[id] = (int64_t)g->pool_len;
    g->len[id] = n;
    g->alive[id] = alive;
    if (n) memcpy(g->pool + g->pool_len, lex, (size_t)n * sizeof(int64_t));
    g->pool_len += (size_t)n;
    g->slot[at] = id;
    if (g->n * 2 > g->scap) {   /* rehash into twice the slots */
        size_t scap = g->scap * 2;
        int64_t *slot = malloc(scap * sizeof(int64_t));
        if (!slot) return -1;
        for (size_t i = 0; i < scap; i++) slot[i] = -1;
        for (size_t j = 0; j < g->n; j++) {
            size_t to = (size_t)group_hash(g->pool + g->off[j], g->len[j], g->alive[j]) & (scap - 1);
            while (slot[to] >= 0) to = (to + 1) & (scap - 1);
            slot[to] = (int64_t)j;
        }
        free(g->slot);
        g->slot = slot;
        g->scap = scap;
    }
    return id;
}

static PyObject *groups_list(const Groups *g) {
    PyObject *out = PyList_New((Py_ssize_t)g->n);
    if (!out) return NULL;
    for (size_t j = 0; j < g->n; j++) {
        PyObject *lex = PyTuple_New((Py_ssize_t)g->len[j]);
        if (!lex) { Py_DECREF(out); return NULL; }
        for (int64_t i = 0; i < g->len[j]; i++) {
            PyObject *v = PyLong_FromLongLong(g->pool[g->off[j] + i]);
            if (!v) { Py_DECREF(lex); Py_DECREF(out); return NULL; }
            PyTuple_SET_ITEM(lex, i, v);
        }
        PyObject *item = Py_BuildValue("(NL)", lex, (long long)g->alive[j]);
        if (!item) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, (Py_ssize_t)j, item);
    }
    return out;
}

/* A UTF-8 slice taken out of a walk: its members of fewer than `limit` characters are answered by
 * the slice's rows (none when member is NULL). member[i], chars[i]: token position i (trie order)
 * is a member, its characters; mps[i]: non-members before position i; subc[k]: most characters
 * of a token of node k's subtree. */
typedef struct {
    const uint8_t *member;
    const int32_t *mps, *chars, *subc;
    int64_t limit;
} Slice;

static inline int sliced(const Slice *sl, int32_t i) {
    return sl->member && sl->member[i] && sl->chars[i] < sl->limit;
}

/* set the bits of toks[lo:hi] in row (a subtree's tokens, inherited; the slice's left out); -1 with
 * IndexError if one is out of range */
static int inherit_subtree(uint32_t *row, const int64_t *toks, int32_t lo, int32_t hi, Py_ssize_t words,
                           const Slice *sl) {
    for (int32_t i = lo; i < hi; i++) {
        if (sliced(sl, i)) continue;
        int64_t t = toks[i];
        if (t < 0 || (t >> 5) >= words) {
            PyErr_Format(PyExc_IndexError, "trie_walk: token %lld out of range", (long long)t);
            return -1;
        }
        row[t >> 5] |= (uint32_t)1 << (t & 31);
    }
    return 0;
}

/* One walk's arrays and running state (see trie_walk). */
typedef struct {
    const uint8_t *BYTE, *COPIED, *FIRST;
    const int32_t *DEPTH, *END, *NTOK;
    const int64_t *TOKS, *EXT, *EMIT, *ALIVE;
    uint32_t *INH;
    int64_t *GID, *TOK, *FOUT, *LOUT;
    Py_ssize_t n_states, R, words, cap, max_depth, W, fcap, lcap, n_lex;
    Slice slc;
    Groups groups;
    int64_t *st, *nl, *rs, *lexbuf;
    Py_ssize_t n_out, n_front, nodes, budget;
    int wait_refs, status;
} Walk;

/* whether node k (depth d, reached in state ns, reference states here[]) must wait for rows not in
 * the mirror; a reference whose row is missing stops there instead unless wait_refs */
static int walk_blocked(Walk *w, int64_t ns, int64_t *here) {
    int blocked = !w->COPIED[ns];
    for (Py_ssize_t r = 0; r < w->R; r++) {
        if (here[r] >= 0 && !w->COPIED[here[r]]) {
            if (!w->wait_refs) { here[r] = -1; continue; }   /* the reference stops here (exact either way) */
            blocked = 1;
        }
    }
    return blocked;
}

/* list node k's subtree (below k) on the frontier: [k, d, ns, l, offset of its l lexemes in the
 * lexeme pool, reference states (R)]; 0, or -1 with status -2 when the frontier or pool is full */
static int walk_defer(Walk *w, Py_ssize_t k, int32_t d, int64_t ns, int64_t l, const int64_t *here) {
    if (w->n_front == w->fcap || w->n_lex + l > w->lcap) { w->status = -2; return -1; }
    int64_t *e = w->FOUT + w->n_front++ * w->W;
    e[0] = k; e[1] = d; e[2] = ns; e[3] = l; e[4] = w->n_lex;
    if (l) memcpy(w->LOUT + w->n_lex, w->lexbuf, (size_t)l * sizeof(int64_t));
    w->n_lex += l;
    if (w->R) memcpy(e + 5, here, (size_t)w->R * sizeof(int64_t));
    return 0;
}

/* walk nodes k..end-1 (a whole trie from depth 0, or the subtree below a frontier node of depth base
 * whose st/nl/rs are set); 0, -1 with w->status set (budget, room), -2 with a Python error */
static int walk_nodes(Walk *w, Py_ssize_t k, Py_ssize_t end, int64_t base) {
    const uint8_t *BYTE = w->BYTE, *FIRST = w->FIRST;
    const int32_t *DEPTH = w->DEPTH, *END = w->END, *NTOK = w->NTOK;
    const int64_t *TOKS = w->TOKS, *EXT = w->EXT, *EMIT = w->EMIT, *ALIVE = w->ALIVE;
    const Slice *slc = &w->slc;
    Py_ssize_t R = w->R, n_states = w->n_states, words = w->words;
    int64_t *st = w->st, *nl = w->nl, *rs = w->rs, *lexbuf = w->lexbuf;
    while (k < end) {
        int32_t d = DEPTH[k];
        int b = BYTE[k];
        Py_ssize_t stop = END[k];
        if (d <= base || d > w->max_depth || stop <= k || stop > end) {
            PyErr_Format(PyExc_ValueError, "trie_walk: node %zd is malformed", k);
            return -2;
        }
        if (d == 1 && !FIRST[b]) { k = stop; continue; }
        if (slc->member && slc->subc[k] < slc->limit && slc->mps[NTOK[stop]] == slc->mps[NTOK[k]])
            { k = stop; continue; }   /* every token below is the slice's */
        if (++w->nodes > w->budget) { w->status = -1; return -1; }
        int64_t s = st[d - 1], l = nl[d - 1];
        if (s <= T_DEAD || s >= n_states || l < 0 || l >= d) {   /* a depth no walk reached: a malformed trie */
            PyErr_Format(PyExc_ValueError, "trie_walk: node %zd is malformed", k);
            return -2;
        }
        int64_t ns = EXT[s * T_ROW + b];
        int64_t *up = rs + (Py_ssize_t)(d - 1) * R, *here = rs + (Py_ssize_t)d * R;
        if (ns < 0 || ns >= n_states) {
            PyErr_Format(PyExc_IndexError, "trie_walk: state %lld out of range", (long long)ns);
            return -2;
        }
        if (ns == T_DEAD) {   /* the byte ends the lexeme of s (if it can end) and starts a new one */
            int64_t e = EMIT[s];
            if (e < 0) { k = stop; continue; }
            ns = EXT[T_START * T_ROW + b];
            if (ns == T_DEAD) { k = stop; continue; }
            if (ns < 0 || ns >= n_states) {
                PyErr_Format(PyExc_IndexError, "trie_walk: state %lld out of range", (long long)ns);
                return -2;
            }
            /* a reference whose lexeme ends at this same byte with the same terminals restarts
             * at START with it too: every token below reads the same from both */
            Py_ssize_t met = -1;
            for (Py_ssize_t r = 0; r < R && met < 0; r++) {
                int64_t p = up[r];
                if (p >= 0 && EXT[p * T_ROW + b] == T_DEAD && EMIT[p] == e) met = r;
            }
            if (met >= 0) {
                if (inherit_subtree(w->INH + met * words, TOKS, NTOK[k], NTOK[stop], words, slc) < 0) return -2;
                k = stop;
                continue;
            }
            lexbuf[l++] = e;
            for (Py_ssize_t r = 0; r < R; r++) here[r] = -1;   /* a lexeme ended: no reference meets */
        } else {
            Py_ssize_t met = -1;
            for (Py_ssize_t r = 0; r < R; r++) {
                int64_t p = up[r];
                if (p < 0) { here[r] = -1; continue; }
                int64_t x = EXT[p * T_ROW + b];
                if (x == ns) { met = r; break; }
                if (x < 0 || x >= n_states) {
                    PyErr_Format(PyExc_IndexError, "trie_walk: state %lld out of range", (long long)x);
                    return -2;
                }
                here[r] = x == T_DEAD ? -1 : x;   /* the reference's lexeme ended or died: it cannot meet */
            }
            if (met >= 0) {   /* the rest of every token below reads as from refs[met] */
                if (inherit_subtree(w->INH + met * words, TOKS, NTOK[k], NTOK[stop], words, slc) < 0) return -2;
                k = stop;
                continue;
            }
        }
        int64_t a = ALIVE[ns];
        if (a >= 0 && NTOK[k + 1] > NTOK[k]) {   /* tokens that end here, alive */
            int64_t g = group_of(&w->groups, lexbuf, l, a);
            if (g < 0) { PyErr_NoMemory(); return -2; }
            for (int32_t i = NTOK[k]; i < NTOK[k + 1]; i++) {
                if (sliced(slc, i)) continue;
                if (w->n_out == w->cap) { w->status = -1; return -1; }
                w->TOK[w->n_out] = TOKS[i];
                w->GID[w->n_out++] = g;
            }
        }
        if (stop == k + 1) { k = stop; continue; }   /* no children */
        if (slc->member && slc->subc[k] < slc->limit && slc->mps[NTOK[stop]] == slc->mps[NTOK[k + 1]])
            { k = stop; continue; }   /* every token below is the slice's: no row needed */
        if (walk_blocked(w, ns, here)) {   /* the subtree waits for its rows: on the frontier */
            if (walk_defer(w, k, d, ns, l, here) < 0) return -1;
            k = stop;
            continue;
        }
        st[d] = ns;
        nl[d] = l;
        k++;
    }
    return 0;
}

PyObject *native_trie_walk(PyObject *self, PyObject *args) {
    PyObject *o_byte, *o_depth, *o_end, *o_ntok, *o_toks, *o_ext, *o_copied, *o_emit, *o_alive;
    PyObject *o_refs, *o_first, *o_inh, *o_gid, *o_tok, *o_fin, *o_lin, *o_fout, *o_lout;
    PyObject *o_member = Py_None, *o_mps = Py_None, *o_chars = Py_None, *o_subc = Py_None;
    Py_ssize_t max_depth, words, budget, n0, n_fin;
    long long q, limit = 0;
    int wait_refs;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOnOOOOLOOOnOOnOOnOOnp|OOOOL", &o_byte, &o_depth, &o_end, &o_ntok, &o_toks,
                          &max_depth, &o_ext, &o_copied, &o_emit, &o_alive, &q, &o_refs, &o_first, &o_inh, &words,
                          &o_gid, &o_tok, &n0, &o_fin, &o_lin, &n_fin, &o_fout, &o_lout, &budget, &wait_refs,
                          &o_member, &o_mps, &o_chars, &o_subc, &limit))
        return NULL;
    Buf nbyte = {0}, ndepth = {0}, nend = {0}, ntok = {0}, toks = {0}, ext = {0}, copied = {0}, emit = {0};
    Buf alive = {0}, refs = {0}, first = {0}, inh = {0}, gid = {0}, tok = {0}, fin = {0}, fout = {0};
    Buf lin = {0}, lout = {0};
    Buf member = {0}, mps = {0}, chars = {0}, subc = {0};
    Walk w;
    memset(&w, 0, sizeof(w));   /* groups_free is safe on w.groups from here on */
    PyObject *result = NULL;
    if (get_buf(o_byte, &nbyte, "node_byte", 1, 0) || get_buf(o_depth, &ndepth, "node_depth", 4, 0) ||
        get_buf(o_end, &nend, "node_end", 4, 0) || get_buf(o_ntok, &ntok, "node_tok", 4, 0) ||
        get_buf(o_toks, &toks, "toks", 8, 0) || get_buf(o_ext, &ext, "ext", 8, 0) ||
        get_buf(o_copied, &copied, "copied", 1, 0) || get_buf(o_emit, &emit, "emit", 8, 0) ||
        get_buf(o_alive, &alive, "alive_id", 8, 0) || get_buf(o_refs, &refs, "refs", 8, 0) ||
        get_buf(o_first, &first, "first", 1, 0) || get_buf(o_inh, &inh, "inh", 4, 1) ||
        get_buf(o_gid, &gid, "gid", 8, 1) || get_buf(o_tok, &tok, "tok", 8, 1) ||
        get_buf(o_fin, &fin, "front_in", 8, 0) || get_buf(o_lin, &lin, "lex_in", 8, 0) ||
        get_buf(o_fout, &fout, "front_out", 8, 1) || get_buf(o_lout, &lout, "lex_out", 8, 1))
        goto done;
    if (o_member != Py_None &&
        (get_buf(o_member, &member, "member", 1, 0) || get_buf(o_mps, &mps, "member_prefix", 4, 0) ||
         get_buf(o_chars, &chars, "chars", 4, 0) || get_buf(o_subc, &subc, "subtree_chars", 4, 0)))
        goto done;
    Py_ssize_t N = LEN(nbyte, 1), n_toks = LEN(toks, 8), R = LEN(refs, 8);
    Py_ssize_t n_states = LEN(ext, 8) / T_ROW;
    if (LEN(copied, 1) < n_states) n_states = LEN(copied, 1);
    if (LEN(emit, 8) < n_states) n_states = LEN(emit, 8);
    if (LEN(alive, 8) < n_states) n_states = LEN(alive, 8);
    Py_ssize_t cap = LEN(tok, 8), W = 5 + R;
    if (LEN(ntok, 4) != N + 1) {
        PyErr_SetString(PyExc_ValueError, "trie_walk: array sizes do not match");
        goto done;
    }
    if (LEN(ndepth, 4) != N || LEN(nend, 4) != N || LEN(first, 1) != 256 || LEN(gid, 8) != cap || words <= 0 ||
        LEN(inh, 4) != R * words || max_depth < 0 || n0 < 0 || n0 > cap || n_fin < 0 ||
        n_fin > LEN(fin, 8) / W || LEN(fout, 8) < W || LEN(lout, 8) < max_depth) {
        PyErr_SetString(PyExc_ValueError, "trie_walk: array sizes do not match");
        goto done;
    }
    if (q <= T_DEAD || q >= n_states || n_states <= T_START) {
        PyErr_Format(PyExc_IndexError, "trie_walk: state %lld out of range", q);
        goto done;
    }
    if (o_member != Py_None) {
        if (LEN(member, 1) != n_toks || LEN(mps, 4) != n_toks + 1 || LEN(chars, 4) != n_toks || LEN(subc, 4) != N) {
            PyErr_SetString(PyExc_ValueError, "trie_walk: slice array sizes do not match");
            goto done;
        }
        w.slc.member = member.view.buf;
        w.slc.mps = mps.view.buf;
        w.slc.chars = chars.view.buf;
        w.slc.subc = subc.view.buf;
        w.slc.limit = limit;
    }
    w.BYTE = nbyte.view.buf; w.COPIED = copied.view.buf; w.FIRST = first.view.buf;
    w.DEPTH = ndepth.view.buf; w.END = nend.view.buf; w.NTOK = ntok.view.buf;
    w.TOKS = toks.view.buf; w.EXT = ext.view.buf; w.EMIT = emit.view.buf; w.ALIVE = alive.view.buf;
    w.INH = inh.view.buf; w.GID = gid.view.buf; w.TOK = tok.view.buf; w.FOUT = fout.view.buf;
    w.n_states = n_states; w.R = R; w.words = words; w.cap = cap; w.max_depth = max_depth;
    w.W = W; w.fcap = LEN(fout, 8) / W; w.n_out = n0; w.budget = budget; w.wait_refs = wait_refs;
    w.LOUT = lout.view.buf; w.lcap = LEN(lout, 8);
    const int64_t *REFS = refs.view.buf, *FIN = fin.view.buf, *LIN = lin.view.buf;
    Py_ssize_t n_lin = LEN(lin, 8);
    if (w.NTOK[0] != 0 || w.NTOK[N] != n_toks) {
        PyErr_SetString(PyExc_ValueError, "trie_walk: node_tok does not cover toks");
        goto done;
    }
    for (Py_ssize_t r = 0; r < R; r++) {
        if (REFS[r] <= T_DEAD || REFS[r] >= n_states || !w.COPIED[REFS[r]]) {
            PyErr_Format(PyExc_ValueError, "trie_walk: reference state %lld is out of range or not mirrored",
                         (long long)REFS[r]);
            goto done;
        }
    }
    if (!w.COPIED[q] || !w.COPIED[T_START]) {
        PyErr_SetString(PyExc_ValueError, "trie_walk: the rows of q and START must be mirrored");
        goto done;
    }
    Py_ssize_t levels = max_depth + 1;
    w.st = malloc(levels * sizeof(int64_t));
    w.nl = malloc(levels * sizeof(int64_t));
    w.lexbuf = malloc(levels * sizeof(int64_t));
    w.rs = malloc((levels * (R > 0 ? R : 1)) * sizeof(int64_t));
    if (!w.st || !w.nl || !w.lexbuf || !w.rs || groups_init(&w.groups)) { PyErr_NoMemory(); goto done; }
    memset(w.st, 0xff, levels * sizeof(int64_t));     /* -1: no walk reached that depth */
    memset(w.nl, 0xff, levels * sizeof(int64_t));
    memset(w.rs, 0xff, (levels * (R > 0 ? R : 1)) * sizeof(int64_t));
    int rc = 0;
    if (n_fin == 0) {   /* a fresh walk from q */
        w.st[0] = q;
        w.nl[0] = 0;
        for (Py_ssize_t r = 0; r < R; r++) w.rs[r] = REFS[r];
        rc = walk_nodes(&w, 0, N, 0);
    }
    for (Py_ssize_t i = 0; i < n_fin && rc == 0; i++) {   /* resume below each frontier node */
        const int64_t *e = FIN + i * W;
        int64_t k = e[0], d = e[1], ns = e[2], l = e[3], off = e[4];
        if (k < 0 || k >= N || d < 1 || d > max_depth || w.DEPTH[k] != d || w.END[k] <= k || w.END[k] > N ||
            l < 0 || l > d || ns <= T_DEAD || ns >= n_states || off < 0 || off > n_lin - l) {
            PyErr_Format(PyExc_ValueError, "trie_walk: frontier entry %zd is malformed", i);
            goto done;
        }
        int64_t *here = w.rs + (Py_ssize_t)d * R;
        for (Py_ssize_t r = 0; r < R; r++) {
            int64_t x = e[5 + r];
            if (x < -1 || x == T_DEAD || x >= n_states) {
                PyErr_Format(PyExc_ValueError, "trie_walk: frontier entry %zd is malformed", i);
                goto done;
            }
            here[r] = x;
        }
        if (l) memcpy(w.lexbuf, LIN + off, (size_t)l * sizeof(int64_t));
        if (walk_blocked(&w, ns, here)) {
            if (walk_defer(&w, k, (int32_t)d, ns, l, here) < 0) rc = -1;
            continue;
        }
        w.st[d] = ns;
        w.nl[d] = l;
        rc = walk_nodes(&w, k + 1, w.END[k], d);
    }
    if (rc == -2) goto done;
    PyObject *glist = groups_list(&w.groups);
    if (!glist) goto done;
    result = Py_BuildValue("(innnN)", rc < 0 ? w.status : 0, w.n_out, w.n_front, w.nodes, glist);
done:
    groups_free(&w.groups);
    free(w.st); free(w.nl); free(w.rs); free(w.lexbuf);
    release(&nbyte); release(&ndepth); release(&nend); release(&ntok); release(&toks); release(&ext);
    release(&copied); release(&emit); release(&alive); release(&refs); release(&first); release(&inh);
    release(&gid); release(&tok); release(&fin); release(&fout); release(&lin); release(&lout);
    release(&member); release(&mps); release(&chars); release(&subc);
    return result;
}

/* trie_refs(ext, copied, hub, q, first, busy, max_refs) -> list of reference states: the self-loop
 * hubs (hub[s] >= 0) one byte from q (over the first bytes set in ``first``) or two bytes (through
 * a state whose row is mirrored), in the order found, without q, DEAD and the states in ``busy``
 * (hubs whose tables are being built), at most max_refs; then START. The reference walks of
 * trie_walk; tabletrie.TrieTables._trie_refs_numpy is the reference. */
PyObject *native_trie_refs(PyObject *self, PyObject *args) {
    PyObject *o_ext, *o_copied, *o_hub, *o_first, *o_busy;
    long long q;
    Py_ssize_t max_refs;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOLOOn", &o_ext, &o_copied, &o_hub, &q, &o_first, &o_busy, &max_refs)) return NULL;
    Buf ext = {0}, copied = {0}, hub = {0}, first = {0}, busy = {0};
    PyObject *result = NULL;
    int64_t *seen = NULL;
    if (get_buf(o_ext, &ext, "ext", 8, 0) || get_buf(o_copied, &copied, "copied", 1, 0) ||
        get_buf(o_hub, &hub, "hub", 8, 0) || get_buf(o_first, &first, "first", 1, 0) || get_buf(o_busy, &busy, "busy", 8, 0))
        goto done;
    Py_ssize_t n_states = LEN(ext, 8) / T_ROW;
    if (LEN(copied, 1) < n_states) n_states = LEN(copied, 1);
    if (LEN(hub, 8) < n_states) n_states = LEN(hub, 8);
    if (LEN(first, 1) != 256 || max_refs < 0) {
        PyErr_SetString(PyExc_ValueError, "trie_refs: array sizes do not match");
        goto done;
    }
    if (q <= T_DEAD || q >= n_states || !((const uint8_t *)copied.view.buf)[q]) {
        PyErr_Format(PyExc_IndexError, "trie_refs: state %lld out of range or not mirrored", q);
        goto done;
    }
    const int64_t *EXT = ext.view.buf, *HUB = hub.view.buf, *BUSY = busy.view.buf;
    const uint8_t *COPIED = copied.view.buf, *FIRST = first.view.buf;
    Py_ssize_t n_busy = LEN(busy, 8), n_refs = 0, n_one = 0;
    int64_t one[256];
    seen = malloc((size_t)(max_refs + 1) * sizeof(int64_t));
    if (!seen) { PyErr_NoMemory(); goto done; }
    for (int pass = 0; pass < 2; pass++) {
        Py_ssize_t n_from = pass == 0 ? 1 : n_one;
        for (Py_ssize_t f = 0; f < n_from; f++) {
            int64_t from = pass == 0 ? q : one[f];
            if (pass == 1 && !COPIED[from]) continue;
            for (int b = 0; b < 256; b++) {
                if (pass == 0 && !FIRST[b]) continue;
                int64_t t = EXT[from * T_ROW + b];
                if (t <= T_DEAD || t >= n_states) {
                    if (t < 0 || t >= n_states) {
                        PyErr_Format(PyExc_IndexError, "trie_refs: state %lld out of range", (long long)t);
                        goto done;
                    }
                    continue;
                }
                if (pass == 0) {   /* remember the distinct one-byte states (at most 256) */
                    int dup = 0;
                    for (Py_ssize_t i = 0; i < n_one && !dup; i++) dup = one[i] == t;
                    if (!dup) one[n_one++] = t;
                }
                if (HUB[t] < 0 || t == q || !COPIED[t] || n_refs >= max_refs) continue;
                int skip = 0;
                for (Py_ssize_t i = 0; i < n_busy && !skip; i++) skip = BUSY[i] == t;
                for (Py_ssize_t i = 0; i < n_refs && !skip; i++) skip = seen[i] == t;
                if (!skip) seen[n_refs++] = t;
            }
        }
    }
    seen[n_refs++] = T_START;
    result = PyList_New(n_refs);
    if (!result) goto done;
    for (Py_ssize_t i = 0; i < n_refs; i++) {
        PyObject *v = PyLong_FromLongLong(seen[i]);
        if (!v) { Py_CLEAR(result); goto done; }
        PyList_SET_ITEM(result, i, v);
    }
done:
    free(seen);
    release(&ext); release(&copied); release(&hub); release(&first); release(&busy);
    return result;
}
