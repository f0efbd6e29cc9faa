/* guidewire.grammar._native: a UTF-8 slice of the vocabulary (vocabindex.utf8_slice) in two passes.
 *
 * slice_members(whole, ascii_bits, lead_bits, chars, first, out0, out1, no_lead, max_chars, width,
 *               member, hist, most) -> (members, rows)
 *
 * Per ordinary token i (layout order): member[i] = whole[i] and no ASCII byte of the token is in
 * the words out0/out1 (ascii_bits is (2, n): bytes 0-63, 64-127) and no lead byte in no_lead
 * (lead_bits: bit b - 0xC0). For each member: hist[first[i] * width + min(chars[i], width - 2) + 1]
 * += 1 and most[first[i]] = max(most, chars[i]). Returns the members and the most characters of a
 * member of at most max_chars characters (the rows of by_chars). With the optional ids, row and
 * words (row zeroed by the caller), each member's id bit is set in row in the same pass.
 *
 * slice_rows(member, chars, ids, max_chars, row, by_chars, words): the bit of each member's id
 * set in row, and in by_chars[chars[i] - 1] when chars[i] <= max_chars (rows zeroed by the caller).
 *
 * slice_trie(member, pos, out, prefix): a slice in the trie's token order (tabletrie.trie_slice):
 * out[i] = member[pos[i]] and prefix[i + 1] = prefix[i] + !out[i] (prefix[0] = 0), in one pass.
 *
 * byte_row(in_set, first_of_id, row): bit t of row (int32 words) set iff in_set[first_of_id[t]]
 * (in_set: 257 bytes, the last for special tokens); first_of_id is uint16, one per bit of row.
 *
 * The references are vocabindex._utf8_slice's and _first_byte_row's numpy paths and
 * tabletrie._build_trie_slice's; the tests compare them with scans.
 */
#include "_native_buf.h"

PyObject *native_slice_members(PyObject *self, PyObject *args) {
    PyObject *o_whole, *o_ascii, *o_lead, *o_chars, *o_first, *o_member, *o_hist, *o_most;
    unsigned long long out0, out1, no_lead;
    long long max_chars, width;
    (void)self;
    PyObject *o_ids = NULL, *o_row = NULL;
    Py_ssize_t words = 0;
    if (!PyArg_ParseTuple(args, "OOOOOKKKLLOOO|OOn", &o_whole, &o_ascii, &o_lead, &o_chars, &o_first, &out0, &out1,
                          &no_lead, &max_chars, &width, &o_member, &o_hist, &o_most, &o_ids, &o_row, &words))
        return NULL;
    Buf whole = {0}, ascii = {0}, lead = {0}, chars = {0}, first = {0}, member = {0}, hist = {0}, most = {0};
    Buf ids = {0}, row = {0};
    PyObject *result = NULL;
    if ((o_ids == NULL) != (o_row == NULL)) {
        PyErr_SetString(PyExc_TypeError, "slice_members: ids and row come together");
        return NULL;
    }
    if (o_ids != NULL && (get_buf(o_ids, &ids, "ids", 8, 0) || get_buf(o_row, &row, "row", 4, 1)))
        goto done;
    if (get_buf(o_whole, &whole, "whole", 1, 0) || get_buf(o_ascii, &ascii, "ascii_bits", 8, 0) ||
        get_buf(o_lead, &lead, "lead_bits", 8, 0) || get_buf(o_chars, &chars, "chars", 8, 0) ||
        get_buf(o_first, &first, "first", 8, 0) || get_buf(o_member, &member, "member", 1, 1) ||
        get_buf(o_hist, &hist, "hist", 8, 1) || get_buf(o_most, &most, "most", 8, 1))
        goto done;
    Py_ssize_t n = LEN(whole, 1);
    if (LEN(ascii, 8) != 2 * n || LEN(lead, 8) != n || LEN(chars, 8) != n || LEN(first, 8) != n || LEN(member, 1) != n ||
        width < 3 || LEN(hist, 8) != 256 * width || LEN(most, 8) != 256 || max_chars < 0 ||
        (o_ids != NULL && (LEN(ids, 8) != n || words <= 0 || LEN(row, 4) != words))) {
        PyErr_SetString(PyExc_ValueError, "slice_members: array sizes do not match");
        goto done;
    }
    const int64_t *I = o_ids != NULL ? ids.view.buf : NULL;
    uint32_t *R = o_ids != NULL ? row.view.buf : NULL;
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
        if (I != NULL) {
            int64_t t = I[i];
            if (t < 0 || (t >> 5) >= words) {
                PyErr_Format(PyExc_IndexError, "slice_members: token %lld out of range", (long long)t);
                goto done;
            }
            R[t >> 5] |= (uint32_t)1 << (t & 31);
        }
        H[b * width + (k < width - 2 ? k : width - 2) + 1]++;
        if (k > MOST[b]) MOST[b] = k;
        if (k <= max_chars && k > rows) rows = k;
        count++;
    }
    result = Py_BuildValue("(nL)", count, (long long)rows);
done:
    release(&whole); release(&ascii); release(&lead); release(&chars); release(&first);
    release(&member); release(&hist); release(&most); release(&ids); release(&row);
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

PyObject *native_slice_trie(PyObject *self, PyObject *args) {
    PyObject *o_member, *o_pos, *o_out, *o_prefix;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO", &o_member, &o_pos, &o_out, &o_prefix))
        return NULL;
    Buf member = {0}, pos = {0}, out = {0}, prefix = {0};
    PyObject *result = NULL;
    if (get_buf(o_member, &member, "member", 1, 0) || get_buf(o_pos, &pos, "pos", 8, 0) ||
        get_buf(o_out, &out, "out", 1, 1) || get_buf(o_prefix, &prefix, "prefix", 4, 1))
        goto done;
    Py_ssize_t n = LEN(pos, 8), m = LEN(member, 1);
    if (LEN(out, 1) != n || LEN(prefix, 4) != n + 1) {
        PyErr_SetString(PyExc_ValueError, "slice_trie: array sizes do not match");
        goto done;
    }
    const uint8_t *M = member.view.buf;
    const int64_t *P = pos.view.buf;
    uint8_t *O = out.view.buf;
    int32_t *X = prefix.view.buf;
    int32_t run = 0;
    X[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = P[i];
        if (p < 0 || p >= m) {
            PyErr_Format(PyExc_IndexError, "slice_trie: position %lld out of range", (long long)p);
            goto done;
        }
        uint8_t v = M[p] != 0;
        O[i] = v;
        run += !v;
        X[i + 1] = run;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&member); release(&pos); release(&out); release(&prefix);
    return result;
}

PyObject *native_byte_row(PyObject *self, PyObject *args) {
    PyObject *o_set, *o_first, *o_row;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO", &o_set, &o_first, &o_row))
        return NULL;
    Buf in_set = {0}, first = {0}, row = {0};
    PyObject *result = NULL;
    if (get_buf(o_set, &in_set, "in_set", 1, 0) || get_buf(o_first, &first, "first_of_id", 2, 0) ||
        get_buf(o_row, &row, "row", 4, 1))
        goto done;
    Py_ssize_t words = LEN(row, 4);
    if (LEN(in_set, 1) != 257 || LEN(first, 2) != words * 32) {
        PyErr_SetString(PyExc_ValueError, "byte_row: array sizes do not match");
        goto done;
    }
    const uint8_t *S = in_set.view.buf;
    const uint16_t *F = first.view.buf;
    uint32_t *R = row.view.buf;
    for (Py_ssize_t w = 0; w < words; w++) {
        uint32_t bits = 0;
        const uint16_t *f = F + w * 32;
        for (int j = 0; j < 32; j++) {
            uint16_t b = f[j];
            if (b > 256) {
                PyErr_Format(PyExc_IndexError, "byte_row: first byte %d out of range", (int)b);
                goto done;
            }
            bits |= (uint32_t)(S[b] != 0) << j;
        }
        R[w] = bits;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&in_set); release(&first); release(&row);
    return result;
}
