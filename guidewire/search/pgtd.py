"""PG-TD (Zhang et al., ICLR 2023): Monte-Carlo tree search over tokens guided by the model.

Selection by P-UCB, ``Q(s,a) + beta(s) * P(a|s) * sqrt(log N(s)) / (1 + N(s,a))`` with
``beta(s) = log((N(s) + base + 1) / base) + c``; expansion with the model's top-k tokens;
evaluation by a greedy rollout from the selected node whose program runs on the public tests
(reward = pass fraction); max backup (Q = the best return seen below). Tree, sequence and reward
caches; one model state reused along the tree (truncate to the common prefix, step the rest).
The budget counts rollouts that generated a new program; the best program evaluated is returned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .code_search import SearchContext
from .rollout import GreedyRoller


@dataclass(eq=False)
class Node:
    """A token-tree node: the completion prefix, its prior, visit count and max return."""

    tokens: tuple[int, ...]
    prior: float = 1.0
    visits: int = 0
    q: float = 0.0
    children: list["Node"] = field(default_factory=list)
    expanded: bool = False
    terminal: bool = False


def p_ucb(parent_visits: int, child: Node, *, c: float = 4.0, base: float = 10.0) -> float:
    """PG-TD's P-UCB score of ``child`` under a parent visited ``parent_visits`` times."""
    beta = math.log((parent_visits + base + 1) / base) + c
    explore = math.sqrt(math.log(parent_visits)) if parent_visits > 0 else 0.0
    return child.q + beta * child.prior * explore / (1 + child.visits)


def select_child(node: Node, *, c: float = 4.0, base: float = 10.0) -> Node:
    """The child with the highest P-UCB (ties: the higher prior, then the earlier child)."""
    return max(node.children, key=lambda ch: (p_ucb(node.visits, ch, c=c, base=base), ch.prior))


def backup(path: list[Node], reward: float) -> None:
    """Max backup: every node on ``path`` counts a visit and keeps the best return seen."""
    for n in path:
        n.visits += 1
        n.q = max(n.q, reward)


def pgtd(ctx: SearchContext, budget: int, *, k: int = 3, c: float = 4.0, base: float = 10.0,
         max_iterations: int | None = None) -> str:
    """Run PG-TD until ``budget`` rollouts generated new programs (or the tree is exhausted, or
    ``max_iterations``, default ``8 * budget + 8``); the best program evaluated."""
    if budget < 1:
        raise ValueError(f"the PG-TD budget must be >= 1 (got {budget})")
    roller = GreedyRoller(ctx, k=k)
    root = Node(())
    limit = max_iterations if max_iterations is not None else 8 * budget + 8
    while ctx.stats.rollouts < budget and ctx.stats.iterations < limit:
        ctx.stats.iterations += 1
        node, path = root, [root]
        while node.expanded and node.children:
            node = select_child(node, c=c, base=base)
            path.append(node)
        if not node.expanded:
            node.expanded = True
            node.terminal = ctx.finished(node.tokens)
            if not node.terminal:
                node.children = [Node(node.tokens + (t,), prior=p) for t, p in roller.prior(node.tokens)]
        tokens, generated = roller.complete(node.tokens)
        program = ctx.program(tokens)
        reward = ctx.reward(program)
        if generated:
            ctx.note_rollout()
        backup(path, reward)
        if reward >= 1.0 and ctx.task.public_tests:
            break
    if ctx.best is None:
        return ctx.program(roller.complete(())[0])
    return ctx.best[2]
