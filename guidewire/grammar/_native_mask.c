/* The groups a mask chooses from a token table's lexeme parts (see compiled.CompiledGrammar):
 * the loop of _compute_mask over the parts, in C. Its reference is the Python loop it replaces.
 *
 * pick_groups(parts, s, base, expected, ign, ignored, memo, term_bits, scan, pick_bytes) -> (sel, added)
 *
 * parts: a tuple of (lexemes, members, picks) tuples (CompiledGrammar._lexeme_parts): the lexer
 *        terminal-set ids a group's tokens complete, its groups' alive bits and indexes as one flat
 *        tuple (alive, group, alive, group, ...), and a memo from the terminals allowed after the
 *        lexemes to the chosen group indexes (a tuple of ints).
 * s:     the Earley set; base: the terminals allowed in it (expected[s] | ign).
 * expected: per Earley set the terminals it expects (ints); ign: the ignored terminals' bits.
 * ignored: per terminal-set id, whether its lexeme is ignored (the set stays as it is).
 * memo:  the automaton's scan memo, {(set << 33) + key + 2**32: set after, or -1}
 *        (EarleyAutomaton.scan_memo), or None; a miss calls scan(set, key), which fills it,
 *        unless term_bits (EarleyAutomaton.term_bits: lexeme key -> its terminals' bits, or
 *        None) shows the set expects none of the lexeme's terminals: then -1 is noted here.
 * sel:   the chosen group indexes of every part whose lexemes the parser can read, in part
 *        order; added: the bytes the new picks memo entries hold (pick_bytes + 8 per group).
 */
#include "_native_buf.h"

static const long long KEY_SHIFT = (long long)1 << 32;

/* the Earley set after reading lexeme e from set cur (-1: none); -2 on error. A memo miss whose
 * lexeme's terminals (term_bits[e], where the automaton has noted them) meet none that set cur
 * expects is answered here, as the automaton's scan answers it: -1, noted in the memo. */
static long long scan_one(long long cur, long long e, PyObject *ignored, PyObject *memo, PyObject *scan,
                          PyObject *expected, PyObject *term_bits) {
    if (e < 0 || e >= PyList_GET_SIZE(ignored)) {
        PyErr_SetString(PyExc_IndexError, "pick_groups: a lexeme id out of range");
        return -2;
    }
    int ign = PyObject_IsTrue(PyList_GET_ITEM(ignored, e));
    if (ign < 0) return -2;
    if (ign) return cur;
    if (cur >= ((long long)1 << 29)) {
        PyErr_SetString(PyExc_OverflowError, "pick_groups: an Earley set id too large for the memo key");
        return -2;
    }
    PyObject *got = NULL;
    if (memo != Py_None) {
        PyObject *key = PyLong_FromLongLong((cur << 33) + e + KEY_SHIFT);
        if (!key) return -2;
        got = PyDict_GetItemWithError(memo, key);   /* borrowed */
        if (!got && !PyErr_Occurred() && term_bits != Py_None && cur < PyList_GET_SIZE(expected)) {
            PyObject *ek = PyLong_FromLongLong(e), *bits = NULL;
            if (ek) {
                bits = PyDict_GetItemWithError(term_bits, ek);   /* borrowed */
                Py_DECREF(ek);
            }
            if (bits) {
                PyObject *meet = PyNumber_And(PyList_GET_ITEM(expected, cur), bits);
                int hit = meet ? PyObject_IsTrue(meet) : -1;
                Py_XDECREF(meet);
                if (hit == 0) {
                    PyObject *none = PyLong_FromLong(-1);
                    int r = none ? PyDict_SetItem(memo, key, none) : -1;
                    Py_XDECREF(none);
                    Py_DECREF(key);
                    return r < 0 ? -2 : -1;
                }
                if (hit < 0) { Py_DECREF(key); return -2; }
            }
        }
        Py_DECREF(key);
    }
    if (got) Py_INCREF(got);
    else if (PyErr_Occurred()) return -2;
    else if (!(got = PyObject_CallFunction(scan, "LL", cur, e))) return -2;
    long long out = PyLong_AsLongLong(got);
    Py_DECREF(got);
    if (out == -1 && PyErr_Occurred()) return -2;
    return out;
}

/* the groups of members (flat (alive, group, ...) pairs) whose alive bits meet x, as a tuple of
 * ints; NULL on error */
static PyObject *choose(PyObject *members, PyObject *x) {
    Py_ssize_t n = PyTuple_GET_SIZE(members);
    if (n % 2) {
        PyErr_SetString(PyExc_TypeError, "pick_groups: members are not flat (alive, group) pairs");
        return NULL;
    }
    PyObject *chosen = PyList_New(0), *out = NULL;
    if (!chosen) return NULL;
    for (Py_ssize_t i = 0; i < n; i += 2) {
        PyObject *meet = PyNumber_And(PyTuple_GET_ITEM(members, i), x);
        if (!meet) goto done;
        int hit = PyObject_IsTrue(meet);
        Py_DECREF(meet);
        if (hit < 0 || (hit && PyList_Append(chosen, PyTuple_GET_ITEM(members, i + 1)) < 0)) goto done;
    }
    out = PyList_AsTuple(chosen);
    if (out) untrack_int_tuple(out);
done:
    Py_DECREF(chosen);
    return out;
}

/* add part's chosen groups to sel (see pick_groups); 0, or -1 with an error set */
static int pick_part(PyObject *part, long long s, PyObject *base, PyObject *expected, PyObject *ign, PyObject *ignored,
                     PyObject *memo, PyObject *term_bits, PyObject *scan, long long pick_bytes, PyObject *sel,
                     long long *added) {
    if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(part, 0)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(part, 1)) || !PyDict_Check(PyTuple_GET_ITEM(part, 2))) {
        PyErr_SetString(PyExc_TypeError, "pick_groups: a part is not (lexemes, members, picks)");
        return -1;
    }
    PyObject *lexemes = PyTuple_GET_ITEM(part, 0), *picks = PyTuple_GET_ITEM(part, 2), *x;
    Py_ssize_t n_lex = PyTuple_GET_SIZE(lexemes);
    if (n_lex) {
        long long cur = s;
        for (Py_ssize_t i = 0; i < n_lex && cur >= 0; i++) {
            long long e = PyLong_AsLongLong(PyTuple_GET_ITEM(lexemes, i));
            if (e == -1 && PyErr_Occurred()) return -1;
            cur = scan_one(cur, e, ignored, memo, scan, expected, term_bits);
            if (cur == -2) return -1;
        }
        if (cur < 0) return 0;
        if (cur >= PyList_GET_SIZE(expected)) {
            PyErr_SetString(PyExc_IndexError, "pick_groups: an Earley set past the expected list");
            return -1;
        }
        x = PyNumber_Or(PyList_GET_ITEM(expected, cur), ign);
        if (!x) return -1;
    } else {
        x = base;
        Py_INCREF(x);
    }
    PyObject *chosen = PyDict_GetItemWithError(picks, x);   /* borrowed */
    if (chosen) {
        Py_INCREF(chosen);
    } else if (PyErr_Occurred() || !(chosen = choose(PyTuple_GET_ITEM(part, 1), x)) ||
               PyDict_SetItem(picks, x, chosen) < 0) {
        Py_XDECREF(chosen);
        Py_DECREF(x);
        return -1;
    } else {
        *added += pick_bytes + 8 * (long long)PyTuple_GET_SIZE(chosen);
    }
    Py_DECREF(x);
    if (!PyTuple_Check(chosen)) {
        Py_DECREF(chosen);
        PyErr_SetString(PyExc_TypeError, "pick_groups: a memoised pick is not a tuple");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(chosen); i++)
        if (PyList_Append(sel, PyTuple_GET_ITEM(chosen, i)) < 0) { Py_DECREF(chosen); return -1; }
    Py_DECREF(chosen);
    return 0;
}

PyObject *native_pick_groups(PyObject *self, PyObject *args) {
    PyObject *parts, *base, *expected, *ign, *ignored, *memo, *term_bits, *scan;
    long long s, pick_bytes;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!LOO!OO!OOOL", &PyTuple_Type, &parts, &s, &base, &PyList_Type, &expected, &ign,
                          &PyList_Type, &ignored, &memo, &term_bits, &scan, &pick_bytes))
        return NULL;
    if ((memo != Py_None && !PyDict_CheckExact(memo)) || (term_bits != Py_None && !PyDict_CheckExact(term_bits))) {
        PyErr_SetString(PyExc_TypeError, "pick_groups: the scan memo and the terminal bits must be dicts or None");
        return NULL;
    }
    PyObject *sel = PyList_New(0), *result = NULL;
    long long added = 0;
    if (!sel) return NULL;
    for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(parts); p++) {
        PyObject *part = PyTuple_GET_ITEM(parts, p);   /* held: scan runs Python code */
        Py_INCREF(part);
        int ok = pick_part(part, s, base, expected, ign, ignored, memo, term_bits, scan, pick_bytes, sel, &added);
        Py_DECREF(part);
        if (ok < 0) goto done;
    }
    result = Py_BuildValue("(OL)", sel, added);
done:
    Py_DECREF(sel);
    return result;
}
