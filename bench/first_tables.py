"""Where a schema's slowest masks spend their time, in a fresh process (instrumentation, one run).

For each schema named, walks its tokenized MaskBench instances as the runner does and, for the
``--top`` slowest masks, reports the inclusive time spent in the parts of a first token table
(:mod:`guidewire.grammar.tabletrie` and :mod:`guidewire.grammar.tableslices`): the table lookup
and build (``table_entry``), the trie walk's Python side and its C calls (``trie_table``,
``C.trie_walk``), the UTF-8 slice plan and its scan of the vocabulary (``slice_plan``,
``C.slice_members``), the slice's rows per chain state (``slice_stays``), grouping the walked
tokens (``trie_result``) and the lexer rows made on the way (``need``, ``C.lazy_rows``,
``C.ahead_rows``). Times nest (``trie_table`` holds the walk and the slice parts), and the wrappers
add their own overhead: compare runs of this script with each other, not with MaskBench's
figures. A fresh process pays page faults a long-lived worker's heap reserve takes ahead.

    GUIDEWIRE_NUM_THREADS=1 python bench/first_tables.py Github_medium---o46761.json [...] \\
        [--tokenizer gemma3] [--top 2] [--out FILE.json] [--no-gc-freeze]
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # the bench tools beside it

from guidewire.grammar import compiled as _compiled  # noqa: E402
from guidewire.grammar import dfamirror, native, tableslices, tabletrie  # noqa: E402
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances  # noqa: E402
from guidewire.maskbench.engines import EngineContext, build_engine  # noqa: E402
from guidewire.maskbench.evaluate import evaluate_schema  # noqa: E402
from maskbench_replay import ProbedEngine  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPENT: collections.Counter = collections.Counter()     # part -> seconds inside the current mask


def _timed(holder, name: str, part: str, undo: list) -> None:
    """Wrap ``holder.name`` so that its inclusive time adds to ``SPENT[part]`` (``undo`` gets
    what restores it)."""
    inner = getattr(holder, name)
    undo.append((holder, name, inner))

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            SPENT[part] += time.perf_counter() - t0

    setattr(holder, name, timed)


def instrument():
    """Wrap the parts of a first table (see the module); returns the function that unwraps them."""
    undo: list = []
    mod = native.module()
    if mod is not None:
        for name in ("trie_walk", "lazy_rows", "ahead_rows", "slice_members"):
            _timed(mod, name, "C." + name, undo)
    _timed(tableslices.SliceShortcuts, "_slice_plan", "slice_plan", undo)
    _timed(tableslices.SliceShortcuts, "_slice_stays", "slice_stays", undo)
    _timed(tabletrie.TrieTables, "_trie_result", "trie_result", undo)
    _timed(tabletrie.TrieTables, "_trie_table", "trie_table", undo)
    _timed(dfamirror.DfaMirror, "_need", "need", undo)
    _timed(_compiled.CompiledGrammar, "_table_entry", "table_entry", undo)

    def unwrap() -> None:
        for holder, name, inner in reversed(undo):
            setattr(holder, name, inner)

    return unwrap


class _Probed:
    """A matcher whose masks log ``(ms, {part: ms})`` to ``log`` (the probe of
    :class:`maskbench_replay.ProbedEngine` here)."""

    def __init__(self, inner, log: list):
        self._inner, self._log = inner, log

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """The wrapped matcher's mask, its parts timed."""
        SPENT.clear()
        t0 = time.perf_counter()
        self._inner.fill_bitmask(bitmask, row)
        ms = (time.perf_counter() - t0) * 1e3
        self._log.append((ms, {k: round(v * 1e3, 2) for k, v in SPENT.items()}))

    def __getattr__(self, name):
        return getattr(self._inner, name)


def main(argv=None) -> int:
    """Time the parts of each schema's slowest masks (see the module); 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("schemas", nargs="+", help="MaskBench file names")
    ap.add_argument("--data", default=os.path.join(HERE, "..", "shared", "data", "maskbench"))
    ap.add_argument("--tokenizer", default="gemma3")
    ap.add_argument("--top", type=int, default=2, help="slowest masks reported per schema")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-gc-freeze", action="store_true", help="leave the collector's heap as it is "
                    "(by default the start-up heap is frozen, as the MaskBench worker does)")
    args = ap.parse_args(argv)
    unwrap = instrument()
    try:
        rows = _run(args)
    finally:
        unwrap()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"tokenizer": args.tokenizer, "schemas": args.schemas, "top": args.top, "masks": rows}, f,
                      indent=1)
    return 0


def _run(args) -> list[dict]:
    """The slowest masks of each schema named in ``args``, with their parts' times."""
    tok = load_tokenizer(args.tokenizer)
    engine = build_engine("guidewire", EngineContext(args.tokenizer, tok.vocab_size, tuple(tok.eos_ids)))
    engine.warm_up()
    if not args.no_gc_freeze:
        gc.collect()
        gc.freeze()     # as the MaskBench worker does after its warm-up
    rows = []
    for name in args.schemas:
        case = load_case(os.path.join(args.data, name))
        log: list = []
        out = evaluate_schema(ProbedEngine(engine, log, _Probed), case.schema, tokenize_instances(case, tok))
        for i in sorted(range(len(log)), key=lambda j: -log[j][0])[:args.top]:
            rows.append({"schema": name, "status": out["status"], "mask": i, "ms": round(log[i][0], 2),
                         "parts_ms": log[i][1]})
            print(f"{name} mask {i}: {log[i][0]:.2f} ms {log[i][1]}", flush=True)
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
