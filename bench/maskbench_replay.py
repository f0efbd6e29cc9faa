"""Replay a MaskBench worker's schema order up to one schema, in one process, and show what
that schema's slowest masks cost: wall time, the thread's CPU time and the page faults inside each.

A full MaskBench run gives each engine one long-lived worker that walks the files in sorted
order (``--jobs 1``). Its slowest masks were mostly time on a CPU, yet replayed 2-5x faster in a
fresh process (stop 57). This tool rebuilds the worker's situation without the whole run: the
same engine, warm-up and heap freeze as :func:`guidewire.maskbench.worker.worker_main` (and its
malloc thresholds with ``--keep-heap``, and its heap reserve with ``--heap-reserve-mb``), then
:func:`guidewire.maskbench.evaluate.evaluate_schema` over the ``--prefix`` files before the target
(0: a fresh process), then the target ``--reps`` times with every mask probed. Minor faults count
as CPU time (the kernel maps and zeroes a page inside the mask), so a mask that faults much more
after a long prefix than in a fresh process points at memory given back to the OS and taken
again, not at the engine's own work (which the probe does not change: it wraps the matcher).

    GUIDEWIRE_NUM_THREADS=1 python bench/maskbench_replay.py ../shared/data/maskbench \\
        --target Github_easy---o10013.json --prefix 831 --reps 2 [--tokenizer gemma3] [--keep-heap \\
        [--heap-reserve-mb 128]]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.core.heap import HeapReserve, keep_heap_mapped  # noqa: E402
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances  # noqa: E402
from guidewire.maskbench.engines import EngineContext, build_engine  # noqa: E402
from guidewire.maskbench.evaluate import evaluate_schema  # noqa: E402


def _faults() -> tuple[int, int]:
    """(minor, major) page faults of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_majflt


class ProbedMatcher:
    """A matcher whose every ``fill_bitmask`` appends ``(wall ms, thread CPU ms, minor faults,
    major faults)`` to ``log``; everything else is the wrapped matcher's."""

    def __init__(self, inner, log: list):
        self._inner, self._log = inner, log

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """The wrapped matcher's mask, probed."""
        f0 = _faults()
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        self._inner.fill_bitmask(bitmask, row)
        wall, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - c0
        f1 = _faults()
        self._log.append((wall / 1e6, cpu / 1e6, f1[0] - f0[0], f1[1] - f0[1]))

    def __getattr__(self, name):
        return getattr(self._inner, name)


class ProbedCompiled:
    """A compiled grammar whose matchers are ``probe(matcher, log)`` (:class:`ProbedMatcher` s by
    default) logging to ``log``."""

    def __init__(self, compiled, log: list, probe=ProbedMatcher):
        self._compiled, self._log, self._probe = compiled, log, probe

    def matcher(self):
        """The wrapped grammar's matcher, probed."""
        return self._probe(self._compiled.matcher(), self._log)


class ProbedEngine:
    """An engine whose compiled grammars hand out ``probe(matcher, log)`` matchers
    (:class:`ProbedMatcher` s by default) logging to ``log``."""

    def __init__(self, engine, log: list, probe=ProbedMatcher):
        self._engine, self.log, self._probe = engine, log, probe

    def compile(self, schema) -> ProbedCompiled:
        """The wrapped engine's compile, its matchers probed."""
        return ProbedCompiled(self._engine.compile(schema), self.log, self._probe)

    def __getattr__(self, name):
        return getattr(self._engine, name)


def order_before(files: list[str], target: str, prefix: int) -> list[str]:
    """The ``prefix`` files just before ``target`` in the run's (sorted) order."""
    names = [os.path.basename(f) for f in files]
    if target not in names:
        raise SystemExit(f"maskbench_replay: {target!r} is not among the {len(files)} files")
    i = names.index(target)
    return files[max(0, i - prefix):i]


def replay(data: str, target: str, prefix: int, reps: int, tokenizer: str, engine_name: str, top: int,
           keep_heap: bool = False, heap_reserve_mb: int = 0) -> dict:
    """Run the prefix as the worker does, then probe the target ``reps`` times (see the module);
    ``keep_heap``: first keep freed memory mapped, as the worker does by default
    (:func:`guidewire.core.heap.keep_heap_mapped`); ``heap_reserve_mb`` (with it): top up a
    :class:`~guidewire.core.heap.HeapReserve` of that size after the warm-up and after every
    schema, as the worker does."""
    kept = keep_heap_mapped() if keep_heap else False
    reserve = HeapReserve(heap_reserve_mb << 20) if kept and heap_reserve_mb else None
    files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.endswith(".json"))
    before = order_before(files, target, prefix)
    tok = load_tokenizer(tokenizer)
    ctx = EngineContext(tokenizer, tok.vocab_size, tuple(tok.eos_ids))
    engine = build_engine(engine_name, ctx)
    engine.warm_up()
    gc.collect()
    gc.freeze()     # as the worker does after its warm-up
    top_up = reserve.top_up if reserve is not None else (lambda: 0)
    top_up()
    t0, f0 = time.perf_counter(), _faults()
    for f in before:
        case = load_case(f)
        evaluate_schema(engine, case.schema, tokenize_instances(case, tok))
        top_up()
    f1 = _faults()
    report = {"target": target, "engine": engine_name, "tokenizer": tokenizer, "keep_heap": kept,
              "heap_reserve_mb": heap_reserve_mb if reserve is not None else 0, "prefix": len(before),
              "prefix_s": round(time.perf_counter() - t0, 1), "prefix_minor_faults": f1[0] - f0[0],
              "maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), "reps": []}
    case = load_case(os.path.join(data, target))
    insts = tokenize_instances(case, tok)
    for _ in range(reps):
        probed = ProbedEngine(engine, [])
        out = evaluate_schema(probed, case.schema, insts)
        top_up()
        a = np.array(probed.log, dtype=np.float64).reshape(-1, 4)
        worst = np.argsort(-a[:, 0], kind="stable")[:top]
        report["reps"].append({
            "status": out["status"], "compile_ms": out["compile_ms"], "masks": int(a.shape[0]),
            "total_ms": round(float(a[:, 0].sum()), 2), "cpu_ms": round(float(a[:, 1].sum()), 2),
            "minor_faults": int(a[:, 2].sum()),
            "slowest": [{"mask": int(i), "ms": round(float(a[i, 0]), 2), "cpu_ms": round(float(a[i, 1]), 2),
                         "minor_faults": int(a[i, 2]), "major_faults": int(a[i, 3])} for i in worst]})
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="the MaskBench directory (the run's files, in sorted order)")
    ap.add_argument("--target", required=True, help="the schema file name to probe")
    ap.add_argument("--prefix", type=int, default=0, help="files before it to run first (0: a fresh process)")
    ap.add_argument("--reps", type=int, default=1, help="compiles of the target, each probed")
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--engine", default="guidewire")
    ap.add_argument("--top", type=int, default=5, help="slowest masks listed per rep")
    ap.add_argument("--keep-heap", action="store_true", help="keep freed memory mapped first (as MaskBench's "
                    "workers do unless --no-keep-heap): compare with and without")
    ap.add_argument("--heap-reserve-mb", type=int, default=0, help="with --keep-heap: free memory kept faulted in "
                    "at the heap's top, topped up after every schema (as MaskBench's workers do; default 0 here)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    if args.prefix < 0 or args.reps < 1 or args.top < 1:
        ap.error("--prefix must be >= 0, --reps and --top >= 1")
    if not 0 <= args.heap_reserve_mb < 256 or (args.heap_reserve_mb and not args.keep_heap):
        ap.error("--heap-reserve-mb must be in 0..255 and needs --keep-heap")
    report = replay(args.data, args.target, args.prefix, args.reps, args.tokenizer, args.engine, args.top,
                    keep_heap=args.keep_heap, heap_reserve_mb=args.heap_reserve_mb)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
