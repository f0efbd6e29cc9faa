"""Where the slow masks' time goes, on a sample of MaskBench schemas (instrumentation, one run).

Walks every tokenized instance of each sampled schema as the MaskBench runner does and splits
each mask's wall time into: looking up and building token tables (``CompiledGrammar._table_entry``), making Earley sets (``EarleyAutomaton._make``, outside table builds) and building
lexer rows (``ByteDFA.compute_row``). Reports, for the masks over each threshold, the share of
their time in each part and which part dominates; the share of masks that build a table; the
slow tables by the families of terminals alive in their state; and what the p99 would be if
each part took half as long (the samples replayed with that part cut). The wrappers add their
own overhead to every timed mask: compare runs of this script with each other, not with
MaskBench's own figures.

    python bench/mask_anatomy.py [--n 400] [--seed 1] [--tokenizer smollm2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import collections
import gc
import glob
import json
import os
import random
import re
import sys
from time import perf_counter_ns

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.core import allocate_token_bitmask  # noqa: E402
from guidewire.grammar import compile_json_schema  # noqa: E402
from guidewire.grammar import compiled as _compiled, earley as _earley, lexer as _lexer  # noqa: E402
from guidewire.grammar import tokentable as _tokentable  # noqa: E402
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ("table", "earley", "lexrow")


class _Clock:
    """Time spent in wrapped functions per part, outermost calls only."""

    def __init__(self):
        self.ns = collections.Counter()
        self.depth = collections.Counter()

    def wrap(self, cls, name: str, part: str) -> None:
        inner = getattr(cls, name)

        def timed(*args, **kwargs):
            if self.depth[part]:
                return inner(*args, **kwargs)
            self.depth[part] += 1
            t0 = perf_counter_ns()
            try:
                return inner(*args, **kwargs)
            finally:
                self.ns[part] += perf_counter_ns() - t0
                self.depth[part] -= 1
        setattr(cls, name, timed)


def _family(name: str) -> str:
    return re.sub(r"_\d+$", "", name)


def run(args) -> dict:
    """Walk the sample; returns the report (see the module docstring)."""
    clock = _Clock()
    clock.wrap(_compiled.CompiledGrammar, "_table_entry", "table")
    clock.wrap(_earley.EarleyAutomaton, "_make", "earley")
    clock.wrap(_lexer.ByteDFA, "compute_row", "lexrow")
    tables = []
    counting = [False]    # tables built by the first mask belong to time to first mask: not counted
    build = _tokentable.TableBuilder.table

    def table(builder, q):
        t0 = perf_counter_ns()
        out = build(builder, q)
        if counting[0]:     # named after the walk: naming here would be timed with the mask
            tables.append(((perf_counter_ns() - t0) / 1e3, q))
        return out
    _tokentable.TableBuilder.table = table
    files = sorted(glob.glob(os.path.join(args.data, "*.json")))
    random.Random(args.seed).shuffle(files)
    bundle = load_tokenizer(args.tokenizer)
    bm = allocate_token_bitmask(1, bundle.vocab_size)
    gc.freeze()     # as the MaskBench runner's workers do: the loaded tokenizer leaves the collector
    rows = []   # (us, table us, earley us, lexrow us, built a table)
    slow = collections.Counter()   # slow tables (not START) by the families alive in their state
    for path in files[:args.n]:
        case = load_case(path)
        counting[0] = False
        try:
            g = compile_json_schema(case.schema, bundle.vocab)
            g.matcher().fill_bitmask(bm, 0)
        except Exception:  # noqa: BLE001 - a refused schema has no masks to time
            continue
        counting[0] = True
        del tables[:]
        for inst in tokenize_instances(case, bundle):
            if inst["tokens"] is None:
                continue
            m = g.matcher()
            for tok in inst["tokens"] + [None]:
                clock.ns.clear()
                n_tables = len(tables)
                t0 = perf_counter_ns()
                m.fill_bitmask(bm, 0)
                dt = (perf_counter_ns() - t0) / 1e3
                rows.append((dt, clock.ns["table"] / 1e3, clock.ns["earley"] / 1e3, clock.ns["lexrow"] / 1e3,
                             len(tables) > n_tables))    # built a table
                if tok is None or not (int(bm[0][tok >> 5]) >> (tok & 31)) & 1 or not m.advance(tok):
                    break
        for us, q in tables:
            if us > args.thresholds[0] and q != _lexer.START:
                alive = g.dfa.alive[q]
                slow[",".join(sorted({_family(t.name) for i, t in enumerate(g.dfa.terminals) if alive >> i & 1}))] += 1
    a = np.array(rows, dtype=float)
    dt = a[:, 0]
    out = {"schemas": args.n, "seed": args.seed, "tokenizer": args.tokenizer, "masks": int(a.shape[0]),
           "p50_us": float(np.percentile(dt, 50)), "p99_us": float(np.percentile(dt, 99)), "max_us": float(dt.max()),
           "share_building_a_table": float(a[:, 4].mean()), "over": {}}
    for thr in args.thresholds:
        sel = a[dt > thr]
        total = float(sel[:, 0].sum()) or 1.0
        dominant = collections.Counter()
        for r in sel:
            top = max(range(3), key=lambda i: r[1 + i])
            dominant[PARTS[top] if r[1 + top] > 0.5 * r[0] else "other"] += 1
        out["over"][str(thr)] = {"masks": int(sel.shape[0]),
                                 "time_share": {p: float(sel[:, 1 + i].sum()) / total for i, p in enumerate(PARTS)},
                                 "dominant": dict(dominant)}
    out["p99_if_half"] = {p: float(np.percentile(dt - 0.5 * a[:, 1 + i], 99)) for i, p in enumerate(PARTS)}
    out["p99_if_half"]["table+earley"] = float(np.percentile(dt - 0.5 * a[:, 1] - 0.5 * a[:, 2], 99))
    out["slow_tables"] = {"count": sum(slow.values()), "by_alive_families": dict(slow.most_common(12))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[215.0, 430.0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "shared", "data", "maskbench"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = run(args)
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
