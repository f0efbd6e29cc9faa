/* The lexer's subset construction, shared by the C sources that build a lazily built lexer's rows
 * (_native_subset.c: determinize, lazy_rows; _native_ahead.c: ahead_rows). */
#ifndef GUIDEWIRE_NATIVE_SUBSET_H
#define GUIDEWIRE_NATIVE_SUBSET_H
#include "_native_buf.h"

/* Interned sorted int64 sets (NFA sets, readings), numbered in order of first use. */
typedef struct {
    int64_t *pool; size_t pool_len, pool_cap;        /* members of every set, back to back */
    int64_t *off; int64_t *len; size_t n, cap;        /* per state: its slice of the pool */
    int64_t *table; size_t tcap;                      /* open addressing: state ids, -1 empty */
} SetIndex;

/* The NFA's arrays, borrowed from the caller's buffers. */
typedef struct {
    const int64_t *OFF, *LO, *END, *DST, *EOFF, *EDST, *OWN, *LAZY, *ACC, *UOFF, *UDST;
    const unsigned char *LIVE;
    Py_ssize_t n_nfa, n_edges, n_eps, n_univ;
} Nfa;

/* Scratch space of the row and closure computations, sized once per call. */
typedef struct {
    uint32_t *mark; uint32_t stamp;
    int64_t *stack, *members, *cnt, *pos, *tgt, *movers, *stops;
    size_t members_cap, tgt_cap, movers_cap;
    int n_el, starts[257];
} Scratch;

/* A lazily built lexer's memo for lazy_rows, kept in a capsule by the lexer: the scratch space
 * (sized to its NFA once, not per call) and the target cache in C (sorted target set of a byte
 * range -> lexer state), so a row whose ranges were all met before makes no Python object. */
typedef struct {
    Py_ssize_t n_nfa;
    int busy;                 /* a call is using it (a re-entrant call gets its own scratch) */
    Scratch w;
    SetIndex targets;
    int64_t *target_state; size_t ts_cap;
} SubsetMemo;

#define MEMO_NAME "guidewire.grammar._native.subset_memo"

#define NFA_ARRAYS 12

/* One lazy_rows batch over a lexer, open across calls of lazy_batch_rows (so a caller in C can
 * build several layers of rows in one call from Python): the lexer's dicts, table and memo, the
 * limits, and what the batch made (new states, their readings, the rows done). */
typedef struct {
    const char *who;                  /* the Python name errors are reported under */
    Buf b[NFA_ARRAYS], trans, row_done;
    Nfa A;
    SubsetMemo *memo;
    PyObject *states, *index;
    Py_ssize_t n_rows, n_states, max_states, state_bytes;
    long long fuel_left, bytes_left, spent, nbytes;
    int64_t n_new;                    /* new states: ids n_states .. n_states + n_new - 1 */
    int32_t *reading_of;              /* per new state, its reading in RD */
    unsigned char *accepting;         /* per new state, whether a terminal accepts in it */
    size_t reading_cap;
    int64_t *set, *key; size_t set_cap, key_cap;
    SetIndex RD;
    int64_t *done; size_t n_done, done_cap;   /* the rows built, in order (undone on an error) */
    const char *stopped;              /* NULL, "states", "bytes" or "fuel" */
    int took;                         /* the memo is held */
} LazyBatch;

int lazy_batch_open(LazyBatch *L, PyObject **nfa, PyObject *states, PyObject *index, PyObject *memo, PyObject *trans,
                    PyObject *row_done, Py_ssize_t n_states, Py_ssize_t max_states, long long fuel_left,
                    long long bytes_left, Py_ssize_t state_bytes, const char *who);
int lazy_batch_rows(LazyBatch *L, const int64_t *sids, Py_ssize_t n);
int lazy_batch_readings(LazyBatch *L, PyObject **readings, PyObject **reading_of);
void lazy_batch_close(LazyBatch *L, int failed);

#endif
