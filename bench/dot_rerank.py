"""Could a re-ranker of the monitored name search's n-best list lift next-identifier match?

Reads a dot-completion run made with ``--candidates N`` (``bench_dot_completion.py``; each row's
``candidates``: the search's best legal names with their model log probabilities) and scores
re-rankers built from the buffer alone, against the ``attr`` the file really has:

* usage priors (a cache model): the model's log probability plus ``b * log(1 + uses)``, where
  ``uses`` counts ``.name`` before the cursor (any receiver), ``recv.name`` (the same receiver
  text), or ``.name`` in the other ``.py`` files of the buffer's directory;
* a conditional-logit re-ranker over those features and the name's kind (private, dunder,
  upper case), trained and tested by 10-fold cross-validation over the points.

    python bench/dot_rerank.py bench/results/monitors/tune29_pmi/rows.jsonl
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sysconfig

import numpy as np

STDLIB = sysconfig.get_paths()["stdlib"]


def dot_uses(text: str, receiver: str | None = None) -> dict[str, int]:
    """How often each ``.name`` (or ``receiver.name``) occurs in ``text``."""
    pat = (re.escape(receiver) + r"\s*\.\s*([A-Za-z_]\w*)") if receiver else r"\.\s*([A-Za-z_]\w*)"
    out: dict[str, int] = {}
    for m in re.finditer(pat, text):
        out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out


def load(path: str) -> list[tuple]:
    """Per point with an n-best list: (truth, {name: log prob}, uses before, receiver uses, directory uses)."""
    rows = [json.loads(line) for line in open(path)]
    by_dir: dict[str, dict] = {}
    out = []
    for r in rows:
        if not r.get("candidates"):
            continue
        src = os.path.join(STDLIB, r["file"])
        prefix = open(src, "rb").read()[:r["dot"]].decode("utf-8")
        m = re.search(r"([A-Za-z_][\w.]*)\s*$", prefix)
        d = os.path.dirname(src)
        if d not in by_dir:
            uses: dict[str, int] = {}
            for f in glob.glob(os.path.join(d, "*.py")):
                if f != src:
                    for k, v in dot_uses(open(f, encoding="utf-8", errors="replace").read()).items():
                        uses[k] = uses.get(k, 0) + v
            by_dir[d] = uses
        best: dict[str, float] = {}
        for name, lp, *_ in r["candidates"]:
            best[name] = max(lp, best.get(name, -math.inf))
        out.append((r["attr"], best, dot_uses(prefix), dot_uses(prefix, m.group(1) if m else None), by_dir[d]))
    return out


def features(point) -> tuple[list[str], np.ndarray]:
    """The candidates, best first, and a feature row per candidate."""
    _truth, best, before, recv, folder = point
    names = sorted(best, key=lambda n: -best[n])
    top = best[names[0]]
    rows = [[best[n], best[n] - top, math.log1p(before.get(n, 0)), math.log1p(recv.get(n, 0)),
             math.log1p(folder.get(n, 0)), float(n.startswith("_") and not n.startswith("__")),
             float(n.startswith("__")), float(n.isupper()), float(i == 0)] for i, n in enumerate(names)]
    return names, np.array(rows)


def fit(data, l2: float = 0.1, iters: int = 400, lr: float = 0.1) -> np.ndarray:
    """Conditional-logit weights (softmax over each point's candidates), gradient descent."""
    w = np.zeros(data[0][1].shape[1])
    w[0] = 1.0
    for _ in range(iters):
        g = l2 * w
        for _names, x, y in data:
            if y < 0:
                continue
            z = x @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            g -= x[y] - p @ x
        w -= lr * g / len(data)
    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", help="rows.jsonl of a --candidates run")
    ap.add_argument("--folds", type=int, default=10)
    args = ap.parse_args()
    points = load(args.rows)
    n = len(points)
    print(f"{n} points with an n-best list; truth among the candidates at "
          f"{sum(p[0] in p[1] for p in points)}")
    for label, idx in (("uses before the cursor", 2), ("same receiver", 3), ("same directory", 4)):
        sweep = []
        for b in (0, 0.25, 0.5, 1, 2):
            right = sum(max(p[1], key=lambda k: p[1][k] + b * math.log1p(p[idx].get(k, 0))) == p[0] for p in points)
            sweep.append(f"b={b}: {right}")
        print(f"usage prior, {label}: " + ", ".join(sweep))
    data = []
    for p in points:
        names, x = features(p)
        data.append((names, x, names.index(p[0]) if p[0] in names else -1))
    right = 0
    for f in range(args.folds):
        w = fit([d for i, d in enumerate(data) if i % args.folds != f])
        right += sum(d[2] >= 0 and int(np.argmax(d[1] @ w)) == d[2] for i, d in enumerate(data) if i % args.folds == f)
    print(f"model's best name right at {sum(d[2] == 0 for d in data)}; conditional-logit re-ranker, "
          f"{args.folds}-fold cross-validation: {right}")


if __name__ == "__main__":
    main()
