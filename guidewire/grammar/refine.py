"""Moore partition refinement of a lexer DFA's states (the numpy reference of the C ``refine``).

:meth:`ByteDFA.equivalent_states <guidewire.grammar.lexer.ByteDFA.equivalent_states>` labels
states by what they emit and keep alive, then refines: rows are hashed to 64 bits per round and
every stable result is checked against the exact signatures, so a hash collision can only cost
an exact redo, never merge two distinguishable states.
"""

from __future__ import annotations

import numpy as np

from . import native


def refine_numpy(label0: np.ndarray, trans: np.ndarray, depth: int | None) -> tuple[np.ndarray, int]:
    """Moore refinement in numpy (row hashes, checked; the reference of the C ``refine``)."""
    n = label0.size
    label, n_classes, stable = refine_hashed(label0, trans, depth)
    if stable:
        sig = np.concatenate([label0[:, None], label[trans]], axis=1)
        first = np.full(n_classes, n, dtype=np.int64)
        np.minimum.at(first, label, np.arange(n))
        if not np.array_equal(sig, sig[first[label]]):  # a hash collision merged states: go exact
            if depth is None:
                label, n_classes = refine_exact(label0, trans)
            else:
                label, n_classes, _ = refine_hashed(label0, trans, depth, checked=True)
    else:  # stopped at the depth bound (long counters): redo with every round checked
        label, n_classes, _ = refine_hashed(label0, trans, depth, checked=True)
    return label, n_classes


def refine_hashed(label: np.ndarray, trans: np.ndarray, rounds: int | None = None,
                  checked: bool = False) -> tuple[np.ndarray, int, bool]:
    """Moore refinement with 64-bit row hashes, until stable or for at most ``rounds`` rounds.

    Returns (labels, number of classes, whether the partition is stable). A hash
    collision can only merge classes: on a stable result the caller detects it (the
    partition is then not stable); with ``checked`` every round is compared with the
    exact signatures instead and redone exactly on a collision.
    """
    weights = hash_weights(trans.shape[1] + 1)
    n_classes = np.unique(label).size
    label = label.astype(np.int64)
    done = 0
    while rounds is None or done < rounds:
        h = label.astype(np.uint64) * weights[0] + (label[trans].astype(np.uint64) * weights[1:]).sum(
            axis=1, dtype=np.uint64)
        _, new = np.unique(h, return_inverse=True)
        new = new.reshape(-1)
        count = int(new.max()) + 1
        if checked:
            sig = np.concatenate([label[:, None], label[trans]], axis=1)
            first = np.full(count, label.size, dtype=np.int64)
            np.minimum.at(first, new, np.arange(label.size))
            if not np.array_equal(sig, sig[first[new]]):   # a collision merged classes: this round exactly
                _, new = np.unique(sig, axis=0, return_inverse=True)
                new = new.reshape(-1)
                count = int(new.max()) + 1
        done += 1
        label = new.astype(np.int64)
        if count == n_classes:
            return label, count, True
        n_classes = count
    return label, n_classes, False


def byte_classes(trans: np.ndarray) -> np.ndarray:
    """One byte (column of ``trans``, an (n, 256) table) per class of bytes with identical
    columns: the first byte of each class, ascending (in C when the compiled module is on,
    else :func:`byte_classes_numpy`)."""
    compiled = native.module()
    if compiled is None or trans.shape[1] != 256:
        return byte_classes_numpy(trans)
    return np.frombuffer(compiled.byte_classes(np.ascontiguousarray(trans, dtype=np.int32)), dtype=np.int64)


def byte_classes_numpy(trans: np.ndarray) -> np.ndarray:
    """:func:`byte_classes`'s reference. Columns are grouped by a 64-bit hash, checked exactly; on
    a collision the columns are compared whole (the slow path of ``np.unique(..., axis=0)``)."""
    h = (trans.astype(np.uint64) * hash_weights(trans.shape[0])[:, None]).sum(axis=0, dtype=np.uint64)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    if np.array_equal(trans[:, first[inverse.reshape(-1)]], trans):
        return np.sort(first)
    return np.sort(np.unique(trans.T, axis=0, return_index=True)[1])


_WEIGHTS = np.zeros(0, dtype=np.uint64)


def hash_weights(width: int) -> np.ndarray:
    """Fixed odd 64-bit hash weights, ``width`` of them (a prefix of one cached random array)."""
    global _WEIGHTS
    if _WEIGHTS.size < width:
        size = max(width, 2 * _WEIGHTS.size, 1024)
        weights = np.random.default_rng(0x5EED).integers(1, 1 << 62, size=size, dtype=np.int64)
        _WEIGHTS = weights.astype(np.uint64) | np.uint64(1)
        _WEIGHTS.setflags(write=False)
    return _WEIGHTS[:width]


def refine_exact(label: np.ndarray, trans: np.ndarray) -> tuple[np.ndarray, int]:
    """Moore refinement on exact signature rows."""
    n_classes = np.unique(label).size
    while True:
        sig = np.concatenate([label[:, None], label[trans]], axis=1)
        _, label = np.unique(sig, axis=0, return_inverse=True)
        label = label.reshape(-1)
        count = int(label.max()) + 1
        if count == n_classes:
            return label, count
        n_classes = count
