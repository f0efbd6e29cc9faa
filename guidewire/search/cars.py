"""CARS (constrained adaptive rejection sampling): exact samples from unconstrained proposals.

Proposals are drawn from the model with the mass of provably invalid prefixes subtracted: at
a prefix ``w`` token ``t`` is proposed with probability ``p(t | w) * efg(w t) / efg(w)`` from
the shared :class:`~.prefix_trie.PrefixTrie` as it stood when the proposal began, each new token
checked alone (one check) unless the node's mask already says it is allowed. A proposal whose
token the grammar refuses is rejected, and the grammar's mask at that prefix is stored so that
all of its invalid mass is subtracted from then on. A complete valid sequence ``x`` is proposed
with probability ``P(x · EOS) / efg(root)`` whatever the trie holds, so every accepted sample is
an exact draw of the target; the acceptance rate ``Z / efg(root)`` rises as the trie learns.
"""

from __future__ import annotations

import numpy as np

from .prefix_trie import PrefixTrie
from ..runtime.errors import ConstraintViolationError
from .problem import Problem, collect_samples


def cars_proposal(pb: Problem, trie: PrefixTrie) -> list[int] | None:
    """One proposal: the accepted tokens, or ``None`` (rejected; the trie has learned)."""
    m = pb.grammar.matcher()
    toks: list[int] = []
    node = trie.root
    path = [node]
    while True:
        depth = len(toks)
        p = np.exp(pb.logprobs(toks).astype(np.float64))
        known = None
        if node.mask is not None:
            known = pb.allowed_from_row(node.mask, depth)
            w = np.where(known, p, 0.0)
        else:
            pool = pb.length_pool(depth)
            w = p.copy() if pool is None else np.where(pool, p, 0.0)
        for t, c in node.children.items():
            w[t] = node.child_p[t] * c.efg
        if not w.sum() > 0:
            _learn(pb, trie, node, m, p, depth)
            trie.update(path)
            return None
        t = pb.draw(w)
        pb.stats.tokens_sampled += 1
        ok = t in node.children or (known is not None and bool(known[t])) or pb.check(m, t, depth)
        if not ok:
            _learn(pb, trie, node, m, p, depth)
            trie.update(path)
            return None
        if pb.is_eos(t):
            return toks
        if not m.advance(t):
            raise ConstraintViolationError(f"the grammar refused token {t} that it had allowed")
        node = trie.child(node, t, p[t])
        toks.append(t)
        path.append(node)


def _learn(pb: Problem, trie: PrefixTrie, node, matcher, p: np.ndarray, depth: int) -> None:
    if node.mask is None:
        row = pb.mask_row(matcher)
        trie.set_mask(node, row, float(p[pb.allowed_from_row(row, depth)].sum()))


def run_cars(pb: Problem, trie: PrefixTrie, n: int, *, max_proposals: int | None = None) -> list[list[int]]:
    """``n`` exact samples by adaptive rejection (up to ``max_proposals`` proposals)."""
    limit = max_proposals if max_proposals is not None else 1000 * n + 1000
    return collect_samples(pb, n, limit, lambda q: cars_proposal(q, trie), empty=lambda: trie.root.efg <= 0.0)
