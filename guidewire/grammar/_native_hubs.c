/* guidewire.grammar._native: the hubs whose token tables a new table reuses (tableshortcuts).
 *
 * reusable_hubs(trans, hub, emit, q, row, busy, min_bytes, start) -> [(h, selector), ...]
 *
 * trans: the lexer's rows (int32, n x 256); hub: per state its hub slot, -1 if not a hub (int64);
 * emit: per state its emitted terminal set, -1 if not accepting (int64); row: q's row as int64
 * (256), with the first bytes answered elsewhere already set DEAD (0); busy: states whose tables
 * are being built (int64). For each hub h != q, not busy, among row's live targets (ascending):
 * its selector is the live bytes b with trans[h][b] == row[b] (a token starting with b walks from
 * q as from h); kept when it has at least min_bytes bytes, and then those bytes are no longer live.
 * The first kept selector also takes the quiet bytes: dead from q and from h, and, where h or
 * q (q != start) accepts, dead from start too. Selectors are bytes objects of 256 zero/one bytes.
 * The reference is tableshortcuts.reusable_hubs_numpy.
 */
#include "_native_buf.h"

PyObject *native_reusable_hubs(PyObject *self, PyObject *args) {
    PyObject *o_trans, *o_hub, *o_emit, *o_row, *o_busy;
    Py_ssize_t q, min_bytes, start;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOnOOnn", &o_trans, &o_hub, &o_emit, &q, &o_row, &o_busy, &min_bytes, &start))
        return NULL;
    Buf trans = {0}, hub = {0}, emit = {0}, row = {0}, busy = {0};
    PyObject *out = NULL, *result = NULL;
    if (get_buf(o_trans, &trans, "trans", 4, 0) || get_buf(o_hub, &hub, "hub", 8, 0) ||
        get_buf(o_emit, &emit, "emit", 8, 0) || get_buf(o_row, &row, "row", 8, 0) || get_buf(o_busy, &busy, "busy", 8, 0))
        goto done;
    Py_ssize_t n_rows = LEN(trans, 4) / 256, n_hub = LEN(hub, 8), n_emit = LEN(emit, 8), n_busy = LEN(busy, 8);
    const int32_t *T = trans.view.buf;
    const int64_t *H = hub.view.buf, *E = emit.view.buf, *R = row.view.buf, *B = busy.view.buf;
    if (LEN(row, 8) != 256 || LEN(trans, 4) % 256 || q < 0 || q >= n_emit || start < 0 || start >= n_rows) {
        PyErr_SetString(PyExc_ValueError, "reusable_hubs: trans must be n x 256, row 256 long, q and start states");
        goto done;
    }
    unsigned char live[256];
    int64_t hubs[256];
    int n_hubs = 0;
    for (int b = 0; b < 256; b++) {
        int64_t t = R[b];
        live[b] = t != 0;
        if (!t) continue;
        if (t < 0 || t >= n_hub || t >= n_rows || t >= n_emit) {
            PyErr_Format(PyExc_ValueError, "reusable_hubs: row[%d] = %lld is not a known state", b, (long long)t);
            goto done;
        }
        if (H[t] >= 0) hubs[n_hubs++] = t;
    }
    sort_i64(hubs, (size_t)(n_hubs));
    out = PyList_New(0);
    if (!out) goto done;
    int kept = 0;
    for (int i = 0; i < n_hubs; i++) {
        int64_t h = hubs[i];
        if ((i && h == hubs[i - 1]) || h == q) continue;
        int is_busy = 0;
        for (Py_ssize_t k = 0; k < n_busy && !is_busy; k++) is_busy = B[k] == h;
        if (is_busy) continue;
        const int32_t *th = T + 256 * h;
        unsigned char sel[256];
        int count = 0;
        for (int b = 0; b < 256; b++) {
            sel[b] = live[b] && (int64_t)th[b] == R[b];
            count += sel[b];
        }
        if (count < min_bytes) continue;
        if (!kept) {   /* the quiet bytes: dead from both, restarting neither */
            int restarts = E[h] >= 0 || (q != start && E[q] >= 0);
            const int32_t *ts = T + 256 * start;
            for (int b = 0; b < 256; b++)
                if (!live[b] && th[b] == 0 && (!restarts || ts[b] == 0)) sel[b] = 1;
        }
        for (int b = 0; b < 256; b++) live[b] &= !sel[b];
        PyObject *item = Py_BuildValue("(Ly#)", (long long)h, (const char *)sel, (Py_ssize_t)256);
        if (!item) goto done;
        int err = PyList_Append(out, item);
        Py_DECREF(item);
        if (err < 0) goto done;
        kept++;
    }
    result = out;
    out = NULL;
done:
    Py_XDECREF(out);
    release(&trans); release(&hub); release(&emit); release(&row); release(&busy);
    return result;
}
