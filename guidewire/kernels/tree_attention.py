"""Attention masks and positions for verifying a tree of draft tokens in one forward pass.

A draft tree of ``n`` nodes is given by ``parents``: ``parents[i]`` is the index of node ``i``'s
parent, ``-1`` for a child of the last committed token, and always ``< i`` (topological order).
Node ``i`` attends to every committed prefix position, to itself and to its ancestors; its position
id is ``prefix_len + depth(i)`` (children of the committed prefix have depth 0). Masks are 4-D
additive ``(1, 1, n, prefix_len + n)``: 0 where attention is allowed and ``torch.finfo(dtype).min``
elsewhere, the convention Hugging Face models accept as a prepared 4-D attention mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._triton import next_pow2, triton_kernel, use_triton

tl = None  # triton.language, bound by TritonKernel on first launch (keeps Triton out of the import)

__all__ = ["DraftTree", "tree_attention_mask", "tree_attention_mask_torch", "tree_attention_mask_triton",
           "tree_position_ids", "tree_ancestors"]


def _parents(parents) -> torch.Tensor:
    """Validated CPU int64 parents vector."""
    par = torch.as_tensor(parents, dtype=torch.long).reshape(-1).cpu()
    idx = torch.arange(par.numel())
    bad = (par < -1) | (par >= idx)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise ValueError(f"parents[{i}] = {int(par[i])}: each parent must be -1 or an earlier node")
    return par


def tree_ancestors(parents) -> torch.Tensor:
    """``(n, n)`` bool: entry ``[i, j]`` is True when node ``j`` is node ``i`` or one of its ancestors.

    Pointer jumping, one vectorised step per tree level.
    """
    par = _parents(parents)
    n = par.numel()
    anc = torch.eye(n, dtype=torch.bool)
    rows = torch.arange(n)
    cur = par.clone()
    while bool((cur >= 0).any()):
        live = cur >= 0
        anc[rows[live], cur[live]] = True
        cur = torch.where(live, par[cur.clamp(min=0)], cur)
    return anc


def tree_position_ids(parents, prefix_len: int, *, device=None) -> torch.Tensor:
    """Position ids ``(1, n)`` int64: ``prefix_len + depth(i)`` for each node ``i``."""
    depth = tree_ancestors(parents).sum(dim=1) - 1
    return (depth + int(prefix_len)).unsqueeze(0).to(device)


def tree_attention_mask_torch(parents, prefix_len: int, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """Torch reference of :func:`tree_attention_mask`."""
    anc = tree_ancestors(parents)
    n = anc.shape[0]
    mask = torch.zeros(n, int(prefix_len) + n, dtype=dtype)
    mask[:, int(prefix_len):] = torch.where(anc, 0.0, torch.finfo(dtype).min).to(dtype)
    return mask.reshape(1, 1, n, -1).to(device)


@triton_kernel
def _tree_mask_kernel(parents_ptr, out_ptr, n, prefix_len, min_value, BLOCK: tl.constexpr):
    """Program ``i`` writes mask row ``i``: zeros over the prefix, then the node's ancestor columns."""
    i = tl.program_id(0)
    width = prefix_len + n
    row = out_ptr + i.to(tl.int64) * width
    offs0 = tl.arange(0, BLOCK)
    zero = tl.full([BLOCK], 0.0, tl.float32)
    for start in range(0, prefix_len, BLOCK):
        offs = start + offs0
        tl.store(row + offs, zero.to(out_ptr.dtype.element_ty), mask=offs < prefix_len)
    for start in range(0, n, BLOCK):
        offs = start + offs0
        allowed = offs == i
        j = tl.load(parents_ptr + i)
        while j >= 0:
            allowed = allowed | (offs == j)
            j = tl.load(parents_ptr + j)
        vals = tl.where(allowed, 0.0, min_value)
        tl.store(row + prefix_len + offs, vals.to(out_ptr.dtype.element_ty), mask=offs < n)


def tree_attention_mask_triton(parents, prefix_len: int, *, dtype=torch.float32, device=None,
                               block: int | None = None) -> torch.Tensor:
    """Triton version of :func:`tree_attention_mask`: one program per mask row."""
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"the Triton mask supports float32, float16 and bfloat16, not {dtype}")
    par = _parents(parents)
    n = par.numel()
    dev = torch.device(device) if device is not None else torch.device("cpu")
    out = torch.empty(1, 1, n, int(prefix_len) + n, dtype=dtype, device=dev)
    if n:
        if block is None:
            block = min(next_pow2(max(n, int(prefix_len))), 1024 if dev.type == "cuda" else 8192)
        _tree_mask_kernel.launch(dev, (n,), par.to(dev, torch.int32), out, n, int(prefix_len),
                                 float(torch.finfo(dtype).min), BLOCK=block)
    return out


def tree_attention_mask(parents, prefix_len: int, *, dtype=torch.float32, device=None,
                        backend: str = "auto") -> torch.Tensor:
    """4-D additive mask ``(1, 1, n, prefix_len + n)`` for a draft tree (see the module docstring).

    ``parents`` is a list or tensor of ``n`` parent indices (``-1`` = child of the committed prefix,
    otherwise an earlier node). ``backend``: "auto" (Triton for CUDA devices when Triton imports),
    "torch" or "triton".
    """
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if use_triton(backend, dev):
        return tree_attention_mask_triton(parents, prefix_len, dtype=dtype, device=dev)
    return tree_attention_mask_torch(parents, prefix_len, dtype=dtype, device=dev)


@dataclass(frozen=True)
class DraftTree:
    """A flattened tree of draft tokens: ``tokens[i]`` sits at node ``i`` whose parent is ``parents[i]``.

    Nodes are in topological order (``parents[i] < i``; ``-1`` = child of the committed prefix).
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "tokens", tuple(int(t) for t in self.tokens))
        object.__setattr__(self, "parents", tuple(int(p) for p in self.parents))
        if len(self.tokens) != len(self.parents):
            raise ValueError(f"{len(self.tokens)} tokens but {len(self.parents)} parents")
        _parents(list(self.parents))

    def __len__(self) -> int:
        """Number of nodes."""
        return len(self.tokens)

    @classmethod
    def from_paths(cls, paths) -> "DraftTree":
        """A prefix-merged tree (a trie) of token sequences, nodes in first-seen order.

        ``[[1, 2, 3], [1, 2, 4], [5]]`` gives tokens ``(1, 2, 3, 4, 5)`` with parents
        ``(-1, 0, 1, 1, -1)``.
        """
        tokens: list[int] = []
        parents: list[int] = []
        child: dict[tuple[int, int], int] = {}
        for path in paths:
            node = -1
            for tok in path:
                key = (node, int(tok))
                nxt = child.get(key)
                if nxt is None:
                    nxt = child[key] = len(tokens)
                    tokens.append(int(tok))
                    parents.append(node)
                node = nxt
        return cls(tuple(tokens), tuple(parents))

    def children(self) -> list[list[int]]:
        """``children()[i + 1]`` lists node ``i``'s children; entry 0 lists the roots."""
        out: list[list[int]] = [[] for _ in range(len(self) + 1)]
        for i, p in enumerate(self.parents):
            out[p + 1].append(i)
        return out

    def depths(self) -> list[int]:
        """Depth of each node (roots have depth 0)."""
        d: list[int] = []
        for p in self.parents:
            d.append(0 if p < 0 else d[p] + 1)
        return d

    def paths(self) -> list[list[int]]:
        """Root-to-leaf node-index paths, one per leaf, in leaf order."""
        kids = self.children()
        out = []
        for leaf in range(len(self)):
            if kids[leaf + 1]:
                continue
            path = [leaf]
            while self.parents[path[-1]] >= 0:
                path.append(self.parents[path[-1]])
            out.append(path[::-1])
        return out

    def token_paths(self) -> list[list[int]]:
        """Root-to-leaf token sequences (the inverse of :meth:`from_paths`, up to merging)."""
        return [[self.tokens[i] for i in path] for path in self.paths()]

    def attention_mask(self, prefix_len: int, *, dtype=torch.float32, device=None,
                       backend: str = "auto") -> torch.Tensor:
        """:func:`tree_attention_mask` of this tree."""
        return tree_attention_mask(list(self.parents), prefix_len, dtype=dtype, device=device, backend=backend)

    def position_ids(self, prefix_len: int, *, device=None) -> torch.Tensor:
        """:func:`tree_position_ids` of this tree."""
        return tree_position_ids(list(self.parents), prefix_len, device=device)

    def accept_greedy(self, predicted) -> tuple[list[int], int]:
        """Greedy verification of the whole tree.

        ``predicted[0]`` is the target's argmax after the committed prefix and ``predicted[i + 1]``
        its argmax after node ``i`` (from the tree forward pass). Returns the accepted node indices
        (a root-to-node path, possibly empty) and the token to emit after them.
        """
        pred = [int(t) for t in (predicted.tolist() if hasattr(predicted, "tolist") else predicted)]
        if len(pred) != len(self) + 1:
            raise ValueError(f"predicted needs {len(self) + 1} entries, got {len(pred)}")
        kids = self.children()
        path: list[int] = []
        node = -1
        while True:
            want = pred[node + 1]
            nxt = next((c for c in kids[node + 1] if self.tokens[c] == want), None)
            if nxt is None:
                return path, want
            path.append(nxt)
            node = nxt
