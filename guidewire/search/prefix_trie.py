"""A trie of sampled prefixes with an upper bound of each prefix's grammatical mass.

``efg(w)`` (ASAp's *expected future grammaticality*, CARS's remaining mass) bounds
``sum over allowed complete continuations x of P(x · EOS | w)`` from above: an unexplored
prefix has 1; a node whose grammar mask is known has ``allowed_mass - sum over explored children
c of p(c | w) * (1 - efg(w c))``, one without it ``1 - sum(...)`` (EOS children are complete and
count 1). Samples only ever lower the bounds, which converge to the exact values on the paths
they visit. The trie is saveable (JSON) with a fingerprint that a load checks.
"""

from __future__ import annotations

import base64
import json
import os

import numpy as np

from .errors import SearchBudgetExceeded, SearchError

DEFAULT_MAX_BYTES = 256 << 20
NODE_BYTES = 200   # a node's dicts and slots, estimated


class TrieNode:
    """One prefix: explored children, their probabilities, the allowed mass and the bound."""

    __slots__ = ("children", "child_p", "mask", "allowed_mass", "efg")

    def __init__(self):
        self.children: dict[int, TrieNode] = {}
        self.child_p: dict[int, float] = {}
        self.mask: np.ndarray | None = None          # the grammar's bitmask row here, once computed
        self.allowed_mass: float | None = None      # sum of p over the allowed tokens, with the mask
        self.efg = 1.0

    def recompute(self) -> None:
        """Refresh ``efg`` from the allowed mass and the explored children."""
        base = 1.0 if self.allowed_mass is None else self.allowed_mass
        deficit = sum(self.child_p[t] * (1.0 - c.efg) for t, c in self.children.items())
        self.efg = max(base - deficit, 0.0)


class PrefixTrie:
    """The root of a trie for one (model, prompt, temperature, constraint, max_tokens) problem.

    ``fingerprint`` names that problem (saved with the trie, checked on load); ``max_bytes``
    bounds its size (``NODE_BYTES`` per node plus the stored mask rows).
    """

    def __init__(self, fingerprint: str = "", *, max_bytes: int = DEFAULT_MAX_BYTES):
        self.fingerprint = fingerprint
        self.max_bytes = int(max_bytes)
        self.root = TrieNode()
        self.num_nodes = 1
        self.mask_bytes = 0

    @property
    def bytes(self) -> int:
        """Estimated bytes held by the trie."""
        return self.num_nodes * NODE_BYTES + self.mask_bytes

    def _grow(self, extra: int) -> None:
        if self.bytes + extra > self.max_bytes:
            raise SearchBudgetExceeded(f"prefix trie reached its bound of {self.max_bytes} bytes "
                                       f"({self.num_nodes} nodes)")

    def set_mask(self, node: TrieNode, mask: np.ndarray, allowed_mass: float) -> None:
        """Record the grammar's mask row at ``node`` and the probability mass it allows."""
        if node.mask is None:
            self._grow(mask.nbytes)
            self.mask_bytes += mask.nbytes
        node.mask = np.array(mask, dtype=np.int32, copy=True)
        node.allowed_mass = float(allowed_mass)

    def child(self, node: TrieNode, token: int, p: float) -> TrieNode:
        """The child of ``node`` for ``token`` (created with ``p(token | node)`` if new)."""
        c = node.children.get(token)
        if c is None:
            self._grow(NODE_BYTES)
            c = node.children[token] = TrieNode()
            node.child_p[token] = float(p)
            self.num_nodes += 1
        return c

    @staticmethod
    def update(path: list[TrieNode]) -> None:
        """Recompute the bounds bottom-up along a root-to-leaf ``path``."""
        for node in reversed(path):
            node.recompute()

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the trie as JSON (atomically)."""
        flat = []
        stack = [(self.root, -1, -1, None)]
        while stack:
            node, parent, tok, p = stack.pop()
            mask = None if node.mask is None else base64.b64encode(node.mask.tobytes()).decode()
            flat.append([parent, tok, p, node.allowed_mass, node.efg, mask])
            me = len(flat) - 1
            for t, c in node.children.items():
                stack.append((c, me, t, node.child_p[t]))
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w") as f:
            json.dump({"format": "guidewire-prefix-trie/1", "fingerprint": self.fingerprint, "nodes": flat}, f)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike, fingerprint: str | None = None, *,
             max_bytes: int = DEFAULT_MAX_BYTES) -> "PrefixTrie":
        """Read a trie written by :meth:`save`; ``fingerprint`` (when given) must match."""
        with open(path) as f:
            data = json.load(f)
        if data.get("format") != "guidewire-prefix-trie/1":
            raise SearchError(f"{os.fspath(path)}: not a guidewire prefix trie")
        if fingerprint is not None and data["fingerprint"] != fingerprint:
            raise SearchError(f"{os.fspath(path)}: the trie was built for another problem "
                              f"(fingerprint {data['fingerprint'][:16]}..., expected {fingerprint[:16]}...)")
        rows = data["nodes"]
        trie = cls(data["fingerprint"], max_bytes=max_bytes)
        trie.num_nodes = 0
        nodes: list[TrieNode] = []
        for parent, tok, p, mass, efg, mask in rows:
            node = trie.root if parent < 0 else TrieNode()
            trie._grow(NODE_BYTES)
            trie.num_nodes += 1
            if mask is not None:
                row = np.frombuffer(base64.b64decode(mask), dtype=np.int32)
                trie.set_mask(node, row, mass)
            node.allowed_mass = mass
            node.efg = float(efg)
            if parent >= 0:
                nodes[parent].children[int(tok)] = node
                nodes[parent].child_p[int(tok)] = float(p)
            nodes.append(node)
        return trie
