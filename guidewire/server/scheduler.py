"""The decoding scheduler: one thread owns the model, the KV cache and every grammar matcher.

HTTP handlers only :meth:`Scheduler.submit` jobs and read events from each job's ``sink``;
everything else -- compiling constraints, filling masks, sampling, advancing matchers --
happens on the scheduler thread, so grammar objects are never touched concurrently.

Each iteration: drop cancelled, timed-out and finished rows from the batch at once; admit
queued jobs up to ``max_batch`` (compile their constraints; a bad one fails only its job);
one forward for all running rows (plus one prefill for the joining rows); per-row masks and
samplers; emit text deltas. Continuous batching: a request joins and leaves between steps.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from ..core.bitmask import allocate_token_bitmask, ids_to_bitmask
from ..runtime.masking import apply_bitmask_, only_tokens_allowed
from ..runtime.sampling import Sampler, SamplingParams
from ..runtime.streaming import TextDeltaDecoder
from .batch import ContinuousBatch
from .errors import APIError, constraint_error
from .stops import StopStrings


@dataclass
class Job:
    """One sequence to generate.

    ``make_constraint`` runs on the scheduler thread and returns a fresh matcher (or ``None``);
    its exceptions become the job's error. ``sink(event)`` receives ``("delta", text)``,
    ``("done", finish_reason, usage)`` or ``("error", APIError)``; it must be thread-safe and quick.
    """

    prompt_ids: Sequence[int]
    sink: Callable[[tuple], None]
    make_constraint: Callable[[], object] | None = None
    constraint_param: str = "response_format"
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int = 256
    stop: Sequence[str] = ()
    time_limit: float = 300.0
    cancelled: threading.Event = field(default_factory=threading.Event)
    submitted: float = field(default_factory=time.monotonic)

    def cancel(self) -> None:
        """Ask the scheduler to drop this job (it leaves the batch before the next forward)."""
        self.cancelled.set()


class _Seq:
    __slots__ = ("job", "matcher", "sampler", "out", "decoder", "stops", "row", "done", "deadline")

    def __init__(self, job: Job, matcher, words: int):
        self.job, self.matcher = job, matcher
        self.sampler = Sampler(job.sampling)
        self.out: list[int] = []
        self.decoder = None
        self.stops = StopStrings(job.stop)   # the plans refuse stop strings with a structured output
        self.row = np.full(words, -1, dtype=np.int32)
        self.done = False
        self.deadline = job.submitted + job.time_limit


class Scheduler:
    """Continuous-batching decoder over a loaded model (see the module docstring).

    ``max_batch`` rows decode together; up to ``max_queue`` jobs wait (beyond that
    :meth:`submit` raises a 429 :class:`APIError` with ``Retry-After``). ``on_idle``, when given,
    runs on the scheduler thread each time the last running row finishes and nothing is queued
    (housekeeping off the decoding path, e.g. topping up a
    :class:`~guidewire.core.heap.HeapReserve`); an exception there is counted in
    ``stats["idle_errors"]``, never raised into decoding.
    """

    def __init__(self, lm, *, max_batch: int = 16, max_queue: int = 64, on_idle: Callable[[], object] | None = None):
        self.lm = lm
        self.on_idle = on_idle
        self.vocab = lm.vocab
        self.max_batch, self.max_queue = int(max_batch), int(max_queue)
        pad = getattr(lm.tokenizer, "pad_token_id", None)
        self.batch = ContinuousBatch(lm.module, vocab_size=lm.vocab.vocab_size,
                                     pad_id=pad if pad is not None else min(lm.vocab.eos_ids))
        self._words = allocate_token_bitmask(1, lm.vocab.vocab_size).shape[1]
        self._eos_row = ids_to_bitmask(sorted(lm.vocab.eos_ids), lm.vocab.vocab_size)
        self._queue: collections.deque[Job] = collections.deque()
        self._live: list[_Seq] = []
        self._cv = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.stats = {"forwards": 0, "tokens": 0, "admitted": 0, "rejected": 0, "errors": 0, "cancelled": 0,
                      "idle_runs": 0, "idle_errors": 0}

    # -- HTTP side ----------------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue ``job``; raises a 429 :class:`APIError` when the queue is full."""
        with self._cv:
            if self._closed:
                raise APIError("the server is shutting down", status=503, type="server_error")
            if len(self._queue) >= self.max_queue:
                self.stats["rejected"] += 1
                raise APIError(f"the server is busy ({len(self._queue)} requests queued); retry later",
                               status=429, type="rate_limit_error", code="queue_full",
                               headers={"Retry-After": "1"})
            self._queue.append(job)
            self._cv.notify()

    def load(self) -> dict:
        """Live rows and queued jobs (for /health)."""
        with self._cv:
            return {"running": len(self._live), "queued": len(self._queue), **self.stats}

    def start(self) -> "Scheduler":
        """Start the scheduler thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="guidewire-scheduler", daemon=True)
            self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread; queued and running jobs get a 503 error."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- scheduler thread ---------------------------------------------------------------------------
    def _idle(self) -> None:
        with self._cv:
            if self._queue or self._closed:
                return
        try:
            self.on_idle()
            self.stats["idle_runs"] += 1
        except Exception:  # noqa: BLE001 - housekeeping must not stop decoding
            self.stats["idle_errors"] += 1

    def _loop(self) -> None:
        busy = False    # rows were running after the previous iteration
        while True:
            with self._cv:
                while not self._closed and not self._queue and not self._live:
                    self._cv.wait(0.5)
                if self._closed:
                    pending = list(self._queue) + [s.job for s in self._live if not s.done]
                    self._queue.clear()
                    break
                admit = []
                while self._queue and len(self._live) + len(admit) < self.max_batch:
                    admit.append(self._queue.popleft())
            try:
                self._iteration(admit)
            except Exception as exc:  # noqa: BLE001 - a model failure must not kill the thread
                err = APIError(f"internal error during decoding: {type(exc).__name__}: {exc}", status=500,
                               type="server_error", code="internal_error")
                for s in self._live:
                    self._fail(s, err)
                for job in admit:
                    job.sink(("error", err))
                self._live = []
                self.batch.keep([])
            if self.on_idle is not None and not self._live and (admit or busy):
                self._idle()
            busy = bool(self._live)
        for job in pending:
            job.sink(("error", APIError("the server is shutting down", status=503, type="server_error")))

    def _iteration(self, admit: list[Job]) -> None:
        now = time.monotonic()
        keep = [i for i, s in enumerate(self._live) if self._ready(s, now)]
        old = [self._live[i] for i in keep]
        self.batch.keep(keep)
        new = []
        for job in admit:
            s = self._start(job)
            if s is not None and self._ready(s, now):
                new.append(s)
        with self._cv:
            self._live = old + new
        if not self._live:
            self.batch.keep([])
            return
        parts = []
        if old:
            parts.append(self.batch.step([s.out[-1] if s.out else s.job.prompt_ids[-1] for s in old]))
        if new:
            parts.append(self.batch.add([s.job.prompt_ids for s in new]))
        logits = parts[0] if len(parts) == 1 else torch.cat(parts)
        self.stats["forwards"] += len(parts)
        apply_bitmask_(logits, np.stack([s.row for s in self._live]))
        for i, s in enumerate(self._live):
            try:
                tok = int(s.sampler.sample(logits[i:i + 1])[0])
                self._take(s, tok)
            except Exception as exc:  # noqa: BLE001 - one row's failure stays in that row
                self._fail(s, APIError(f"decoding failed: {type(exc).__name__}: {exc}", status=500,
                                       type="server_error", code="internal_error"))

    def _start(self, job: Job) -> _Seq | None:
        self.stats["admitted"] += 1
        if job.cancelled.is_set():
            self.stats["cancelled"] += 1
            return None
        try:
            matcher = job.make_constraint() if job.make_constraint is not None else None
        except Exception as exc:  # noqa: BLE001 - reported to this client only
            self.stats["errors"] += 1
            job.sink(("error", constraint_error(exc, job.constraint_param)))
            return None
        s = _Seq(job, matcher, self._words)
        s.decoder = TextDeltaDecoder(self.vocab)
        return s

    def _ready(self, s: _Seq, now: float) -> bool:
        """Whether ``s`` takes part in the next forward (finishing it otherwise); fills its mask row."""
        if s.done:
            return False
        if s.job.cancelled.is_set():
            s.done = True
            self.stats["cancelled"] += 1
            return False
        if now > s.deadline:
            self._fail(s, APIError(f"the request exceeded the server's time limit of {s.job.time_limit:g} s",
                                   status=408, type="timeout_error", code="time_limit"))
            return False
        if len(s.out) >= s.job.max_tokens:
            self._finish(s, "length")
            return False
        m = s.matcher
        if m is None:
            return True
        try:
            if m.is_terminated():
                if not m.is_accepting():
                    raise RuntimeError("the constraint reached a dead end")
                self._finish(s, "stop")
                return False
            m.fill_bitmask(s.row[None, :], 0)
        except Exception as exc:  # noqa: BLE001
            self._fail(s, APIError(f"constraint failed: {exc}", status=500, type="server_error",
                                   code="constraint_error"))
            return False
        if only_tokens_allowed(s.row, self._eos_row):
            self._finish(s, "stop")
            return False
        if not s.row.any():
            self._fail(s, APIError("the constraint allows no token", status=500, type="server_error",
                                   code="constraint_dead_end"))
            return False
        return True

    def _take(self, s: _Seq, tok: int) -> None:
        if tok in self.vocab.eos_ids:
            self._finish(s, "stop")
            return
        if s.matcher is not None and not s.matcher.advance(tok):
            raise RuntimeError(f"the constraint refused token {tok} that its mask allowed")
        s.out.append(tok)
        self.stats["tokens"] += 1
        text = s.stops.feed(s.decoder.feed([tok]))
        if text:
            s.job.sink(("delta", text))
        if s.stops.stopped:
            self._finish(s, "stop")

    def _finish(self, s: _Seq, reason: str) -> None:
        s.done = True
        tail = s.stops.feed(s.decoder.flush())
        tail += s.stops.flush()
        if tail:
            s.job.sink(("delta", tail))
        usage = {"prompt_tokens": len(s.job.prompt_ids), "completion_tokens": len(s.out),
                 "total_tokens": len(s.job.prompt_ids) + len(s.out)}
        complete = True if s.matcher is None else bool(s.matcher.is_accepting())
        s.job.sink(("done", reason, usage, complete))

    def _fail(self, s: _Seq, err: APIError) -> None:
        s.done = True
        self.stats["errors"] += 1
        s.job.sink(("error", err))
