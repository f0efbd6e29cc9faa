"""ASAp (Park et al. 2024, grammar-aligned sampling): masked sampling re-weighted by a trie of
expected future grammaticality, kept across samples.

At a prefix ``w`` every allowed token ``t`` is weighted ``p(t | w) * efg(w t)`` (unexplored
``efg`` = 1, EOS = 1), the grammar's mask is stored on the node the first time it is visited,
and after each sample the bounds on its path are lowered (:mod:`.prefix_trie`). Early samples
are GCD-like; as the trie fills, the sampling distribution converges to the target.
"""

from __future__ import annotations

import numpy as np

from .prefix_trie import PrefixTrie
from ..runtime.errors import ConstraintViolationError
from .problem import Problem, collect_samples


def _weights(pb: Problem, trie: PrefixTrie, node, matcher, toks: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(``p``, weights ``p * efg`` over allowed tokens) at ``node``; stores its mask when new."""
    depth = len(toks)
    p = np.exp(pb.logprobs(toks).astype(np.float64))
    if node.mask is None:
        row = pb.mask_row(matcher)
        allowed = pb.allowed_from_row(row, depth)
        trie.set_mask(node, row, float(p[allowed].sum()))
    else:
        allowed = pb.allowed_from_row(node.mask, depth)
    w = np.where(allowed, p, 0.0)
    for t, c in node.children.items():
        w[t] = node.child_p[t] * c.efg
    return p, w


def asap_sequence(pb: Problem, trie: PrefixTrie) -> list[int] | None:
    """One ASAp sample (its path's bounds updated); ``None`` when it ends in a dead prefix."""
    m = pb.grammar.matcher()
    toks: list[int] = []
    node = trie.root
    path = [node]
    while True:
        p, w = _weights(pb, trie, node, m, toks)
        if not w.sum() > 0:
            trie.update(path)
            return None
        t = pb.draw(w)
        pb.stats.tokens_sampled += 1
        if pb.is_eos(t):
            trie.update(path)
            return toks
        if not m.advance(t):
            raise ConstraintViolationError(f"the grammar refused token {t} that its mask allowed")
        node = trie.child(node, t, p[t])
        toks.append(t)
        path.append(node)


def run_asap(pb: Problem, trie: PrefixTrie, n: int, *, max_proposals: int | None = None) -> list[list[int]]:
    """``n`` ASAp samples, updating ``trie`` (dead prefixes found on the way are retried)."""
    limit = max_proposals if max_proposals is not None else 100 * n + 100
    return collect_samples(pb, n, limit, lambda q: asap_sequence(q, trie), empty=lambda: trie.root.efg <= 0.0)
