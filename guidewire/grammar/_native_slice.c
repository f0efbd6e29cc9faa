/* guidewire.grammar._native: a UTF-8 slice of the vocabulary (vocabindex.utf8_slice) in two passes.
 *
 * slice_members(whole, ascii_bits, lead_bits, chars, first, out0, out1, no_lead, max_chars, width,
 *               member, hist, most) -> (members, rows)
 *
 * Per ordinary token i (layout order): member[i] = whole[i] and no ASCII byte of the token is in
 * the words out0/out1 (ascii_bits is (2, n): bytes 0-63, 64-127) and no lead byte in no_lead
 * (lead_bits: bit b - 0xC0). For each member: hist[first[i] * width + min(chars[i], width - 2) + 1]
 * += 1 and most[first[i]] = max(most, chars[i]). Returns the members and the most characters of a
 * member of at most max_chars characters (the rows of by_chars).
 *
 * slice_rows(member, chars, ids, max_chars, row, by_chars, words): the bit of each member's id
 * set in row, and in by_chars[chars[i] - 1] when chars[i] <= max_chars (rows zeroed by the caller).
 *
 * The reference is vocabindex._utf8_slice's numpy path; the tests compare both with a scan.
 */
#include "_native_buf.h"

PyObject *native_slice_members(PyObject *self, PyObject *args) {
    PyObject *o_whole, *o_ascii, *o_lead, *o_chars, *o_first, *o_member, *o_hist, *o_most;
    unsigned long long out0, out1, no_lead;
    long long max_chars, width;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOKKKLLOOO", &o_whole, &o_ascii, &o_lead, &o_chars, &o_first, &out0, &out1,
                          &no_lead, &max_chars, &width, &o_member, &o_hist, &o_most))
        return NULL;
    Buf whole = {0}, ascii = {0}, lead = {0}, chars = {0}, first = {0}, member = {0}, hist = {0}, most = {0};
    PyObject *result = NULL;
    if (get_buf(o_whole, &whole, "whole", 1, 0) || get_buf(o_ascii, &ascii, "ascii_bits", 8, 0) ||
        get_buf(o_lead, &lead, "lead_bits", 8, 0) || get_buf(o_chars, &chars, "chars", 8, 0) ||
        get_buf(o_first, &first, "first", 8, 0) || get_buf(o_member, &member, "member", 1, 1) ||
        get_buf(o_hist, &hist, "hist", 8, 1) || get_buf(o_most, &most, "most", 8, 1))
        goto done;
    Py_ssize_t n = LEN(whole, 1);
    if (LEN(ascii, 8) != 2 * n || LEN(lead, 8) != n || LEN(chars, 8) != n || LEN(first, 8) != n || LEN(member, 1) != n ||
        width < 3 || LEN(hist, 8) != 256 * width || LEN(most, 8) != 256 || max_chars < 0) {
        PyErr_SetString(PyExc_ValueError, "slice_members: array sizes do not match");
        goto done;
    }
    const uint8_t *W = whole.view.buf;
    const uint64_t *A0 = ascii.view.buf, *A1 = A0 + n, *L = lead.view.buf;
    const int64_t *C = chars.view.buf, *F = first.view.buf;
    uint8_t *M = member.view.buf;
    int64_t *H = hist.view.buf, *MOST = most.view.buf;
    Py_ssize_t count = 0;
    int64_t rows = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int m = W[i] && !(A0[i] & out0) && !(A1[i] & out1) && !(L[i] & no_lead);
        M[i] = (uint8_t)m;
        if (!m) continue;
        int64_t b = F[i], k = C[i];
        if (b < 0 || b > 255 || k < 0) {
            PyErr_SetString(PyExc_ValueError, "slice_members: a first byte or character count out of range");
            goto done;
        }
        H[b * width + (k < width - 2 ? k : width - 2) + 1]++;
        if (k > MOST[b]) MOST[b] = k;
        if (k <= max_chars && k > rows) rows = k;
        count++;
    }
    result = Py_BuildValue("(nL)", count, (long long)rows);
done:
    release(&whole); release(&ascii); release(&lead); release(&chars); release(&first);
    release(&member); release(&hist); release(&most);
    return result;
}

PyObject *native_slice_rows(PyObject *self, PyObject *args) {
    PyObject *o_member, *o_chars, *o_ids, *o_row, *o_by;
    long long max_chars;
    Py_ssize_t words;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOLOOn", &o_member, &o_chars, &o_ids, &max_chars, &o_row, &o_by, &words))
        return NULL;
    Buf member = {0}, chars = {0}, ids = {0}, row = {0}, by = {0};
    PyObject *result = NULL;
    if (get_buf(o_member, &member, "member", 1, 0) || get_buf(o_chars, &chars, "chars", 8, 0) ||
        get_buf(o_ids, &ids, "ids", 8, 0) || get_buf(o_row, &row, "row", 4, 1) || get_buf(o_by, &by, "by_chars", 4, 1))
        goto done;
    Py_ssize_t n = LEN(member, 1), n_rows = words > 0 ? LEN(by, 4) / words : 0;
    if (LEN(chars, 8) != n || LEN(ids, 8) != n || words <= 0 || LEN(row, 4) != words || LEN(by, 4) != n_rows * words ||
        max_chars < 0) {
        PyErr_SetString(PyExc_ValueError, "slice_rows: array sizes do not match");
        goto done;
    }
    const uint8_t *M = member.view.buf;
    const int64_t *C = chars.view.buf, *I = ids.view.buf;
    uint32_t *R = row.view.buf, *B = by.view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!M[i]) continue;
        int64_t t = I[i], k = C[i];
        if (t < 0 || (t >> 5) >= words) {
            PyErr_Format(PyExc_IndexError, "slice_rows: token %lld out of range", (long long)t);
            goto done;
        }
        uint32_t bit = (uint32_t)1 << (t & 31);
        R[t >> 5] |= bit;
        if (k >= 1 && k <= max_chars) {
            if (k > n_rows) {
                PyErr_SetString(PyExc_ValueError, "slice_rows: by_chars has too few rows");
                goto done;
            }
            B[(k - 1) * words + (t >> 5)] |= bit;
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&member); release(&chars); release(&ids); release(&row); release(&by);
    return result;
}
