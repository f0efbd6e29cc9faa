/* guidewire.grammar._native: whole-vocabulary indexes over the flat byte layout (vocabindex.py).
 *
 * first_outside(flat, pos, loop, out): flat is the layout's uint16 bytes (each token followed by the
 * sentinel 256), pos int64 flat positions, loop 256 bytes (nonzero: a self-loop byte of a hub), out
 * int64 as long as pos. out[i] = the first position q >= pos[i] whose value is not a loop byte
 * (len(flat) if none): where a hub's exit leaves its loop. The reference is
 * vocabindex.loop_run_ends_numpy read at pos (run ends of the whole layout, a minimum accumulated
 * from the right: on Gemma-3's 2.2M-byte layout ~15 ms and 9 MB per new hub).
 *
 * byte_words(raw, starts, ends, skip_first, out): raw is the layout's bytes (uint8), starts/ends
 * int64 per token (ends[i] is its sentinel), out uint64 (4, n) zeroed by the caller. For each token
 * i, the bit (b & 63) of word b >> 6 is set in out[b >> 6, i] for every byte b at positions
 * starts[i] + skip_first .. ends[i] - 1. The reference is vocabindex._byte_words (a reduceat per
 * word); on Gemma-3 that took ~70 ms inside the first mask that needed it.
 */
#include "_native_buf.h"

PyObject *native_first_outside(PyObject *self, PyObject *args) {
    PyObject *o_flat, *o_pos, *o_loop, *o_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &o_flat, &o_pos, &o_loop, &o_out))
        return NULL;
    Buf flat = {0}, pos = {0}, loop = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buf(o_flat, &flat, "flat", 2, 0) || get_buf(o_pos, &pos, "pos", 8, 0) ||
        get_buf(o_loop, &loop, "loop", 1, 0) || get_buf(o_out, &out, "out", 8, 1))
        goto done;
    Py_ssize_t n = LEN(pos, 8), n_flat = LEN(flat, 2);
    if (LEN(loop, 1) != 256 || LEN(out, 8) != n) {
        PyErr_SetString(PyExc_ValueError, "first_outside: loop must hold 256 bytes and out match pos");
        goto done;
    }
    const uint16_t *F = flat.view.buf;
    const uint8_t *LOOP = loop.view.buf;
    const int64_t *POS = pos.view.buf;
    int64_t *O = out.view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = POS[i];
        if (p < 0 || p > n_flat) {
            PyErr_Format(PyExc_IndexError, "first_outside: position %lld out of range", (long long)p);
            goto done;
        }
        while (p < n_flat && F[p] < 256 && LOOP[F[p]]) p++;
        O[i] = p;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&flat);
    release(&pos);
    release(&loop);
    release(&out);
    return result;
}

PyObject *native_byte_words(PyObject *self, PyObject *args) {
    PyObject *o_raw, *o_starts, *o_ends, *o_out;
    int skip_first;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOpO", &o_raw, &o_starts, &o_ends, &skip_first, &o_out))
        return NULL;
    Buf raw = {0}, starts = {0}, ends = {0}, out = {0};
    PyObject *result = NULL;
    if (get_buf(o_raw, &raw, "raw", 1, 0) || get_buf(o_starts, &starts, "starts", 8, 0) ||
        get_buf(o_ends, &ends, "ends", 8, 0) || get_buf(o_out, &out, "out", 8, 1))
        goto done;
    Py_ssize_t n = LEN(starts, 8), size = LEN(raw, 1);
    if (LEN(ends, 8) != n || LEN(out, 8) != 4 * n) {
        PyErr_SetString(PyExc_ValueError, "byte_words: starts, ends and out (4, n) do not match");
        goto done;
    }
    const uint8_t *B = raw.view.buf;
    const int64_t *S = starts.view.buf, *E = ends.view.buf;
    uint64_t *O = out.view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t lo = S[i] + (skip_first ? 1 : 0), hi = E[i];
        if (S[i] < 0 || hi > size || lo > hi + 1) {
            PyErr_SetString(PyExc_ValueError, "byte_words: a token's span is out of range");
            goto done;
        }
        uint64_t w[4] = {0, 0, 0, 0};
        for (int64_t p = lo; p < hi; p++) {
            uint8_t b = B[p];
            w[b >> 6] |= (uint64_t)1 << (b & 63);
        }
        O[i] = w[0];
        O[n + i] = w[1];
        O[2 * n + i] = w[2];
        O[3 * n + i] = w[3];
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&raw);
    release(&starts);
    release(&ends);
    release(&out);
    return result;
}
