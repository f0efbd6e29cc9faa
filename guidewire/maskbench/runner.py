"""The MaskBench run loop: schedule schemas over engine workers and write the results."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait

import numpy as np

from ..core.heap import RESERVE_MB
from .data import (DEFAULT_SERIALIZATIONS, SERIALIZATIONS, UsageError, load_case, load_tokenizer, subset_of,
                   tokenize_instances)
from .engines import EngineContext, engine_available, resolve_engines
from .worker import Worker, WorkerStartError


@dataclass
class RunConfig:
    """Everything one run needs; :func:`guidewire.maskbench.cli.main` builds it from argv."""

    files: list[str]
    out: str = "maskbench-out"
    tokenizer: str = "smollm2"
    engines: list[str] | None = None
    timeout: float = 30.0
    memory_mb: int = 4096
    limit: int | None = None
    jobs: int = 1
    serializations: tuple[str, ...] = DEFAULT_SERIALIZATIONS
    progress: bool = True
    plots: bool = True
    fresh_workers: bool = False
    freeze_heap: bool = True
    keep_heap: bool = True
    heap_reserve_mb: int | None = None     # None: RESERVE_MB with the kept heap, 0 without
    sample: int | None = None
    seed: int = 0
    meta: dict = field(default_factory=dict)

    def validate(self) -> None:
        """Raise :class:`UsageError` for impossible settings (and resolve ``heap_reserve_mb=None``)."""
        if not self.files:
            raise UsageError("no schema files given")
        if self.timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {self.timeout}")
        if self.jobs < 1:
            raise UsageError(f"--jobs must be at least 1, got {self.jobs}")
        if self.limit is not None and self.limit < 1:
            raise UsageError(f"--limit must be at least 1, got {self.limit}")
        if self.sample is not None and self.sample < 1:
            raise UsageError(f"--sample must be at least 1, got {self.sample}")
        if self.memory_mb is not None and 0 < self.memory_mb < 256:
            raise UsageError(f"--memory-mb {self.memory_mb} is too small to start a worker (0 = no cap)")
        if self.heap_reserve_mb is None:
            self.heap_reserve_mb = RESERVE_MB if self.keep_heap else 0
        if isinstance(self.heap_reserve_mb, bool) or not isinstance(self.heap_reserve_mb, int) \
                or not 0 <= self.heap_reserve_mb < 256:
            raise UsageError(f"--heap-reserve-mb must be in 0..255, got {self.heap_reserve_mb}")
        if self.heap_reserve_mb and not self.keep_heap:
            raise UsageError("--heap-reserve-mb needs the kept heap (drop --no-keep-heap or give --heap-reserve-mb 0)")
        bad = [s for s in self.serializations if s not in SERIALIZATIONS]
        if bad or not self.serializations:
            raise UsageError(f"unknown serialization(s) {bad}; known: {', '.join(SERIALIZATIONS)}")


def _reserve_totals(records: list[dict]) -> dict:
    """Per engine: pages the workers' heap reserves faulted in between schemas, and the time."""
    out: dict[str, dict] = {}
    for r in records:
        if "heap_reserve_pages" in r:
            t = out.setdefault(r.get("engine", "?"), {"pages": 0, "ms": 0.0})
            t["pages"] += int(r["heap_reserve_pages"])
            t["ms"] = round(t["ms"] + float(r.get("heap_reserve_ms") or 0.0), 3)
    return out


def _collector_totals(records: list[dict]) -> dict:
    """Per engine: the workers' collections between schemas (count, full ones, total and largest ms)."""
    out: dict[str, dict] = {}
    for r in records:
        if "gc_between_ms" in r:
            t = out.setdefault(r.get("engine", "?"), {"collections": 0, "full": 0, "ms": 0.0, "max_ms": 0.0})
            ms = float(r["gc_between_ms"])
            t["collections"] += 1
            t["full"] += bool(r.get("gc_between_full"))
            t["ms"] = round(t["ms"] + ms, 3)
            t["max_ms"] = max(t["max_ms"], ms)
    return out


def _summarize_tbm(samples: list[float]) -> dict:
    """count / p50 / p99 / mean of one schema's TBM samples (µs)."""
    if not samples:
        return {"count": 0, "p50": None, "p99": None, "mean": None}
    a = np.asarray(samples)
    return {"count": int(a.size), "p50": round(float(np.percentile(a, 50)), 2),
            "p99": round(float(np.percentile(a, 99)), 2), "mean": round(float(a.mean()), 2)}


class _Pool:
    """Workers per engine; at most ``jobs`` busy at once across all engines."""

    def __init__(self, engines: list[str], ctx: EngineContext, cfg: RunConfig):
        self.cfg = cfg
        self.log_dir = os.path.join(cfg.out, "logs")
        self.ctx = ctx
        self.workers = {e: [self._new_worker(e)] for e in engines}

    def _new_worker(self, engine: str) -> Worker:
        # a warm-up before the heap freeze, except in the cold-process mode
        return Worker(engine, self.ctx, self.cfg.memory_mb, self.log_dir, self.cfg.freeze_heap,
                      warm_up=not self.cfg.fresh_workers, keep_heap=self.cfg.keep_heap,
                      heap_reserve_mb=self.cfg.heap_reserve_mb)

    def start(self) -> dict[str, str]:
        """Start one worker per engine (fails fast on an engine that cannot be built)."""
        for ws in self.workers.values():
            ws[0].ensure_started()
        return {e: ws[0].version for e, ws in self.workers.items()}

    def warm_states(self) -> dict[str, str]:
        """How each engine's first worker's warm-up went (``done``, ``off``, ``failed: ...``)."""
        return {e: ws[0].warm_state for e, ws in self.workers.items()}

    def idle_worker(self, engine: str) -> Worker:
        """An idle worker of ``engine``, created when all existing ones are busy."""
        for w in self.workers[engine]:
            if w.busy_with is None:
                return w
        w = self._new_worker(engine)
        self.workers[engine].append(w)
        return w

    def busy(self) -> list[Worker]:
        """Workers with a task in flight."""
        return [w for ws in self.workers.values() for w in ws if w.busy_with is not None]

    def close(self) -> None:
        """Stop every worker and drop empty worker logs."""
        for ws in self.workers.values():
            for w in ws:
                w.kill() if w.busy_with is not None else w.close()
        if os.path.isdir(self.log_dir):
            for name in os.listdir(self.log_dir):
                path = os.path.join(self.log_dir, name)
                if os.path.getsize(path) == 0:
                    os.remove(path)
            if not os.listdir(self.log_dir):
                os.rmdir(self.log_dir)


class _Run:
    """State of one run: pending tasks, per-schema instance cache, output files, samples."""

    def __init__(self, cfg: RunConfig, engines: list[str]):
        self.cfg = cfg
        self.engines = engines
        self.files = select_files(cfg.files, cfg.limit, cfg.sample, cfg.seed)
        self.bundle = load_tokenizer(cfg.tokenizer)
        self.cases: dict[int, tuple] = {}
        self.remaining: dict[int, int] = {}
        self.tbm: dict[str, list[np.ndarray]] = {e: [] for e in engines}
        self.records: list[dict] = []
        self.passed: dict[str, int] = {e: 0 for e in engines}

    def prepare(self, idx: int):
        """Load and tokenize schema ``idx`` once for all engines."""
        if idx not in self.cases:
            try:
                case = load_case(self.files[idx])
                self.cases[idx] = (case, tokenize_instances(case, self.bundle, self.cfg.serializations))
            except UsageError as exc:
                self.cases[idx] = (exc, [])
            self.remaining[idx] = len(self.engines)
        return self.cases[idx]

    def record(self, idx: int, engine: str, result: dict, out) -> bool:
        """Turn a worker result into a results.jsonl line; True when the schema is complete."""
        case, _ = self.cases[idx]
        samples = result.pop("tbm_us", []) or []
        if samples:
            self.tbm[engine].append(np.asarray(samples, dtype=np.float32))
        rec = {"engine": engine, "file": self.files[idx], "subset": subset_of(self.files[idx]),
               "features": getattr(case, "features", [])}
        rec.update(result)
        rec["tbm_us"] = _summarize_tbm(samples)
        rec["counts"] = _instance_counts(rec.get("instances", []))
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        out.flush()
        self.records.append(rec)
        self.passed[engine] += rec["status"] == "pass"
        self.remaining[idx] -= 1
        if self.remaining[idx] == 0:
            del self.cases[idx]
            return True
        return False


def select_files(files: list[str], limit: int | None, sample: int | None, seed: int) -> list[str]:
    """The first ``limit`` files, then (with ``sample``) a seeded random sample of them in their order."""
    chosen = list(files[:limit]) if limit else list(files)
    if sample is not None and sample < len(chosen):
        keep = set(np.random.default_rng(seed).choice(len(chosen), size=sample, replace=False).tolist())
        chosen = [f for i, f in enumerate(chosen) if i in keep]
    return chosen


def _instance_counts(instances: list[dict]) -> dict:
    """Per-record counts of valid/invalid instances handled right, and of skipped ones."""
    c = {"valid": 0, "valid_ok": 0, "invalid": 0, "invalid_ok": 0, "skipped_untokenizable": 0}
    for o in instances:
        if o.get("result") == "skipped_untokenizable":
            c["skipped_untokenizable"] += 1
            continue
        key = "valid" if o["valid"] else "invalid"
        c[key] += 1
        c[key + "_ok"] += 1 if o.get("ok") else 0
    return c


def _error_result(exc: Exception) -> dict:
    return {"status": "error", "error": str(exc), "compile_ms": None, "ttfm_ms": None,
            "tbm_us": [], "instances": []}


def _schedule(run: _Run, pool: _Pool, out, bar) -> None:
    """Dispatch (schema, engine) tasks to workers, collect results, enforce timeouts."""
    cfg = run.cfg
    pending = deque((i, e) for i in range(len(run.files)) for e in run.engines)
    while pending or pool.busy():
        while pending and len(pool.busy()) < cfg.jobs:
            idx, engine = pending.popleft()
            case, instances = run.prepare(idx)
            if isinstance(case, Exception):
                _finish(run, idx, engine, _error_result(case), out, bar)
                continue
            try:
                pool.idle_worker(engine).submit((idx, engine), case.schema, instances, cfg.timeout)
            except WorkerStartError as exc:  # a restart failed: record it, try again on the next schema
                _finish(run, idx, engine, _error_result(exc), out, bar)
        busy = pool.busy()
        if not busy:
            continue
        now = time.monotonic()
        wait_s = max(0.0, min(w.deadline for w in busy) - now)
        ready = set(wait([w.conn for w in busy], timeout=wait_s))
        now = time.monotonic()
        for w in busy:
            idx, engine = w.busy_with
            if w.conn in ready:
                _finish(run, idx, engine, w.receive(), out, bar)
                if cfg.fresh_workers:  # cold-process mode: the next schema gets a new process
                    w.close()
            elif now >= w.deadline:
                w.kill()
                _finish(run, idx, engine, {"status": "timeout", "error": f"no answer within {cfg.timeout:g}s",
                                           "compile_ms": None, "ttfm_ms": None, "tbm_us": [], "instances": []},
                        out, bar)


def _finish(run: _Run, idx: int, engine: str, result: dict, out, bar) -> None:
    if run.record(idx, engine, result, out) and bar is not None:
        bar.set_postfix({f"{e[:5]}_pass": n for e, n in run.passed.items()}, refresh=False)
        bar.update(1)


def run(cfg: RunConfig) -> dict:
    """Run the benchmark; writes results.jsonl, summary.json, report.md and plots to ``cfg.out``.

    Returns the summary dictionary.
    """
    from .report import write_outputs

    cfg.validate()
    engines = resolve_engines(cfg.engines)
    if cfg.engines is None and "guidewire" not in engines:
        print(f"maskbench: note: guidewire left out ({engine_available('guidewire')})", file=sys.stderr)
    os.makedirs(cfg.out, exist_ok=True)
    run_state = _Run(cfg, engines)
    ctx = EngineContext(cfg.tokenizer, run_state.bundle.vocab_size, tuple(run_state.bundle.eos_ids))
    pool = _Pool(engines, ctx, cfg)
    started = time.time()
    interrupted = False
    try:
        versions = pool.start()
        warm_states = pool.warm_states()
        bar = None
        if cfg.progress:
            from tqdm import tqdm

            bar = tqdm(total=len(run_state.files), desc="maskbench", unit="schema", file=sys.stderr)
        with open(os.path.join(cfg.out, "results.jsonl"), "w", encoding="utf-8") as out:
            try:
                _schedule(run_state, pool, out, bar)
            except KeyboardInterrupt:  # Ctrl-C: keep what finished, summarise it below
                interrupted = True
        if bar is not None:
            bar.close()
    finally:
        pool.close()
    if interrupted:
        print(f"maskbench: interrupted; summarising the {len(run_state.records)} finished "
              "engine x schema results", file=sys.stderr)
    info = {"engines": engines, "versions": versions, "tokenizer": cfg.tokenizer,
            "vocab_size": run_state.bundle.vocab_size, "eos_ids": run_state.bundle.eos_ids,
            "files": len(run_state.files), "timeout_s": cfg.timeout, "memory_mb": cfg.memory_mb,
            "jobs": cfg.jobs, "serializations": list(cfg.serializations),
            "process": "fresh worker per schema (cold)" if cfg.fresh_workers else "one worker per engine (warm)",
            "gc_freeze": cfg.freeze_heap, "keep_heap": cfg.keep_heap, "warm_up": warm_states,
            "heap_reserve_mb": cfg.heap_reserve_mb, "heap_reserve": _reserve_totals(run_state.records),
            "gc_between": _collector_totals(run_state.records),
            "sample": cfg.sample, "seed": cfg.seed,
            "wall_s": round(time.time() - started, 1), "interrupted": interrupted, **cfg.meta}
    tbm = {e: (np.concatenate(v) if v else np.zeros(0, dtype=np.float32)) for e, v in run_state.tbm.items()}
    return write_outputs(cfg.out, run_state.records, tbm, info, plots=cfg.plots)
