"""Isolated engine workers: one subprocess per engine, one schema at a time.

The worker caps its address space (``RLIMIT_AS``), builds its engine once (tokenizer
included), then answers ``evaluate_schema`` requests over a pipe. The parent enforces the
per-schema timeout by killing the process; a killed or crashed worker is restarted lazily.
Workers are started with ``spawn`` (the parent holds tokenizer threads, which ``fork``
would copy in an undefined state).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection

from .engines import EngineContext

STARTUP_TIMEOUT_S = 300.0


class WorkerStartError(RuntimeError):
    """An engine could not be built in its worker (import error, tokenizer failure, ...)."""


def _limit_memory(memory_mb: int) -> None:
    """Cap this process's address space at ``memory_mb`` MiB (0 or less: no cap)."""
    if memory_mb and memory_mb > 0:
        import resource

        cap = int(memory_mb) << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _redirect_output(log_dir: str | None, engine_name: str) -> None:
    """Send this process's stdout/stderr (C level too: engines print warnings) to a log file."""
    if not log_dir:
        return
    os.makedirs(log_dir, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in engine_name)
    path = os.path.join(log_dir, f"{safe}-{os.getpid()}.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def worker_main(conn: Connection, engine_name: str, ctx: EngineContext, memory_mb: int,
                log_dir: str | None = None, freeze_heap: bool = True, warm_up: bool = True,
                keep_heap: bool = True, heap_reserve_mb: int = 0) -> None:
    """Worker loop: build the engine, send ``("ready", (version, warm-up state))``, then serve requests.

    With ``freeze_heap`` the start-up heap (the tokenizer, torch and transformers imports: ~215k
    objects) is frozen out of CPython's full collections once the engine is built and warmed up
    (:meth:`~.engines.Engine.warm_up`: one small compile, for its lazy imports), as ``guidewire
    serve`` does after loading its model: otherwise every full collection (60-160 ms) traverses it
    inside whichever mask happens to allocate. After each schema, outside its timings, what the
    schema left is collected and the survivors are frozen too
    (:class:`guidewire.core.collector.IdleCollector`: a full collection only once the frozen set
    has doubled), so the memos an engine fills over a run are not walked by collections inside
    later masks (a 37 ms full collection inside one SmolLM2 mask in stop 59's run). Each record
    says what that took (``gc_between_ms``, ``gc_between_full``); young collections inside a
    schema stay in its timings. ``warm_up`` is off in the
    cold-process mode, whose first compile must pay for what a warm-up would have done.
    With ``keep_heap`` (every engine alike) glibc's malloc keeps freed memory mapped
    (:func:`guidewire.core.heap.keep_heap_mapped`), as ``guidewire serve`` does: otherwise a worker
    that has run for a while faults thousands of pages in again inside each schema's masks.
    ``heap_reserve_mb`` (with ``keep_heap``; 0: none) keeps that much free memory faulted in at
    the top of the heap (:class:`guidewire.core.heap.HeapReserve`), topped up after the warm-up
    and after each schema, outside its timings: a worker whose live set still grows otherwise
    faults the new pages in inside the masks that first write them. Each record then says what
    its top-up faulted in and took (``heap_reserve_pages``, ``heap_reserve_ms``).

    The ready message carries the engine's version and how its warm-up went (``done``, ``off`` or
    ``failed: ...``). A request is ``(schema, instances)``; the reply is ``("result", record)``;
    ``None`` ends.
    Engine output goes to ``log_dir/<engine>-<pid>.log`` when ``log_dir`` is given.
    """
    _redirect_output(log_dir, engine_name)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    try:
        _limit_memory(memory_mb)
        reserve = None
        if keep_heap:
            from guidewire.core.heap import HeapReserve, keep_heap_mapped

            keep_heap_mapped()
            if heap_reserve_mb > 0:
                reserve = HeapReserve(heap_reserve_mb << 20)
        from .engines import build_engine
        from .evaluate import evaluate_schema

        engine = build_engine(engine_name, ctx)
        warm = "off"
        if warm_up:
            try:
                engine.warm_up()
                warm = "done"
            except Exception as exc:  # noqa: BLE001 - a warm-up is no result: reported, not fatal
                warm = f"failed: {type(exc).__name__}: {exc}"[:300]
                print(f"maskbench: {engine_name} warm-up {warm}", file=sys.stderr)
        collector = None
        if freeze_heap:
            from guidewire.core.collector import IdleCollector

            collector = IdleCollector()
            collector.collect()     # the first is a full collection, then the freeze
        if reserve is not None:
            reserve.top_up()
        conn.send(("ready", (engine.version(), warm)))
    except BaseException as exc:  # noqa: BLE001 - report anything to the parent
        conn.send(("init_error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"))
        return
    while True:
        try:
            req = conn.recv()
        except EOFError:
            return
        if req is None:
            return
        schema, instances = req
        record = evaluate_schema(engine, schema, instances)
        if collector is not None:   # after the schema's timings, before the top-up (it frees memory)
            full = collector.full
            record["gc_between_ms"] = round(collector.collect() * 1e3, 3)
            record["gc_between_full"] = collector.full > full
        if reserve is not None:     # after the schema's timings: faults here are no mask's
            ms = reserve.stats["ms"]
            record["heap_reserve_pages"] = reserve.top_up()
            record["heap_reserve_ms"] = round(reserve.stats["ms"] - ms, 3)
        conn.send(("result", record))


class Worker:
    """Parent-side handle of one engine worker process."""

    def __init__(self, engine_name: str, ctx: EngineContext, memory_mb: int, log_dir: str | None = None,
                 freeze_heap: bool = True, warm_up: bool = True, keep_heap: bool = True, heap_reserve_mb: int = 0):
        """Remember how to start the worker; nothing runs until :meth:`ensure_started`."""
        self.log_dir = log_dir
        self.freeze_heap = freeze_heap
        self.keep_heap = keep_heap
        self.heap_reserve_mb = heap_reserve_mb
        self.warm_up = warm_up
        self.warm_state = "off"    # how the last start's warm-up went (see worker_main)
        self.engine_name = engine_name
        self.ctx = ctx
        self.memory_mb = memory_mb
        self.proc: mp.process.BaseProcess | None = None
        self.conn: Connection | None = None
        self.version = ""
        self.busy_with = None  # the task being processed
        self.deadline = 0.0

    @property
    def alive(self) -> bool:
        """Whether the process is running."""
        return self.proc is not None and self.proc.is_alive()

    def ensure_started(self) -> None:
        """Start the process if needed and wait for its engine to be built. A worker that cannot
        start with its warm-up (it crashed, hung or failed there) is started once more without
        one, and that is what :attr:`warm_state` says."""
        if self.alive:
            return
        try:
            self._start()
        except WorkerStartError as exc:
            if not self.warm_up:
                raise
            self.warm_up = False
            self._start()
            self.warm_state = f"failed at start-up ({exc}); started without"[:300]

    def _start(self) -> None:
        self.close()
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        args = (child, self.engine_name, self.ctx, self.memory_mb, self.log_dir, self.freeze_heap, self.warm_up,
                self.keep_heap, self.heap_reserve_mb)
        self.proc = ctx.Process(target=worker_main, args=args, daemon=True, name=f"maskbench-{self.engine_name}")
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(STARTUP_TIMEOUT_S):
            self.kill()
            raise WorkerStartError(f"engine {self.engine_name!r}: worker did not start in {STARTUP_TIMEOUT_S:.0f}s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            code = self.proc.exitcode if self.proc else None
            self.kill()
            raise WorkerStartError(f"engine {self.engine_name!r}: worker died while starting (exit {code})")
        if kind != "ready":
            self.kill()
            raise WorkerStartError(f"engine {self.engine_name!r} failed to start: {payload}")
        self.version, self.warm_state = payload

    def submit(self, task, schema, instances, timeout_s: float) -> None:
        """Send one schema; the answer is due before ``timeout_s`` seconds from now."""
        self.ensure_started()
        self.conn.send((schema, instances))
        self.busy_with = task
        self.deadline = time.monotonic() + timeout_s

    def receive(self) -> dict:
        """The finished task's record; a dead worker yields a ``memory``/``error`` record."""
        try:
            kind, payload = self.conn.recv()
            return payload
        except (EOFError, OSError):
            self.proc.join(1.0)
            code = self.proc.exitcode
            self.kill()
            if code == -signal.SIGABRT or code == -signal.SIGSEGV:
                status = "memory" if self.memory_mb and self.memory_mb > 0 else "error"
                msg = f"worker died with signal {-code} (likely an allocation failure under --memory-mb)"
            else:
                status, msg = "error", f"worker died (exit code {code})"
            return {"status": status, "error": msg, "compile_ms": None, "ttfm_ms": None,
                    "tbm_us": [], "instances": []}
        finally:
            self.busy_with = None

    def kill(self) -> None:
        """Kill the process now (used on timeout) and drop the pipe."""
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)
        self.close()
        self.busy_with = None

    def close(self) -> None:
        """Ask an idle process to exit and release the pipe."""
        if self.conn is not None:
            try:
                if self.proc is not None and self.proc.is_alive() and self.busy_with is None:
                    self.conn.send(None)
            except (OSError, ValueError):
                pass
            self.conn.close()
        if self.proc is not None:
            self.proc.join(2.0)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(2.0)
        self.conn = None
        self.proc = None
