"""Per-schema evaluation: compile, walk every tokenized instance, classify the outcome.

This runs inside a worker process (or in-process in tests). Timing:

- ``compile_ms``: ``engine.compile(schema)``;
- ``ttfm_ms``: compile + creating a matcher + computing its first mask;
- TBM samples (µs): every mask computed while walking the instances (before each token and
  once after the last token, where the EOS bit decides acceptance).

A mask over :data:`SLOW_MASK_NS` is also reported with the calling thread's CPU time inside it
and the time CPython's cyclic collections took inside it (``slow_masks``: ``cpu_us``, the thread's
time on a CPU, user and system, so that ``us`` well above it is time the thread waited: descheduled
by a busy machine, or blocked in the kernel (a major page fault, reclaim; minor faults count as CPU);
what the kernel's per-thread counters say of the same window: ``sys_us`` of the CPU time spent in
the kernel (page faults, reclaim, compaction: tick-sampled, as ``getrusage`` splits it),
``minor_faults`` and ``major_faults``, and ``preempted``, the involuntary context switches (the
machine took the CPU away); ``full_gc_us`` for full, generation-2 collections, ``gc_us`` for
collections of any generation; a collection runs inside whichever call allocates when a
generation overflows, so its pause is part of that mask's time, and stays in it). A young
collection can be as long as a full one: tuples and lists recycled from CPython's free lists do
not count toward the next one, so a burst of them can pile up tens of thousands of objects.
"""

from __future__ import annotations

import gc
from array import array
from bisect import bisect_right
from resource import RUSAGE_THREAD, getrusage
from time import perf_counter_ns, thread_time_ns
from typing import Any

from guidewire.core import allocate_token_bitmask

#: schema statuses, most severe first where several apply
STATUSES = ("pass", "compile_error", "validation_error", "invalidation_error", "timeout", "memory", "error")


#: masks slower than this (ns) are matched against the collections that ran inside them
SLOW_MASK_NS = 20_000_000

#: start and stop (perf_counter_ns) of this process's full collections during the current schema
_FULL_GC = array("q")
#: the same for collections of every generation
_ANY_GC = array("q")


def _on_gc(phase: str, info: dict) -> None:
    # start, stop pairs: a stop without its start (the array cleared mid-collection) is dropped
    now = perf_counter_ns()
    if (phase == "start") == (len(_ANY_GC) % 2 == 0):
        _ANY_GC.append(now)
    if info["generation"] == 2 and (phase == "start") == (len(_FULL_GC) % 2 == 0):
        _FULL_GC.append(now)


def _gc_within(g: array, t0: int, t1: int) -> int:
    """Nanoseconds of the collections ``g`` (start, stop pairs, in time order) inside ``[t0, t1]``:
    found by bisection, as a schema's young collections can be tens of thousands."""
    pairs = range(len(g) // 2)
    i = bisect_right(pairs, t0, key=lambda k: g[2 * k + 1])    # the first collection ending after t0
    total = 0
    while i < len(pairs) and g[2 * i] < t1:
        total += max(0, min(t1, g[2 * i + 1]) - max(t0, g[2 * i]))
        i += 1
    return total


def _bit(row, token: int) -> bool:
    """Whether ``token``'s bit is set in a bitmask row."""
    return (int(row[token >> 5]) >> (token & 31)) & 1 == 1


def _timed_mask(m, bitmask, tbm_us: array, slow: list | None) -> None:
    """Compute ``m``'s mask into ``bitmask`` row 0; append its time (µs) to ``tbm_us``, and its
    interval, the thread's CPU time (ns) and the kernel's thread counters before and after it to
    ``slow`` when it took over :data:`SLOW_MASK_NS` (the counters and the CPU clock are read before
    the wall clock starts, outside the time reported)."""
    r0 = getrusage(RUSAGE_THREAD)
    c0 = thread_time_ns()
    t0 = perf_counter_ns()
    m.fill_bitmask(bitmask, 0)
    dt = perf_counter_ns() - t0
    if dt > SLOW_MASK_NS and slow is not None:     # the CPU clock read first: its window ends with the wall's
        slow.append((t0, t0 + dt, thread_time_ns() - c0, r0, getrusage(RUSAGE_THREAD)))
    tbm_us.append(dt / 1e3)


def _kernel_counts(r0, r1) -> dict:
    """What the kernel's per-thread counters say of a slow mask's window (see the module)."""
    return {"sys_us": round((r1.ru_stime - r0.ru_stime) * 1e6, 1), "minor_faults": r1.ru_minflt - r0.ru_minflt,
            "major_faults": r1.ru_majflt - r0.ru_majflt, "preempted": r1.ru_nivcsw - r0.ru_nivcsw}


def walk_instance(compiled, tokens: list[int], eos_ids, bitmask, tbm_us: array, slow: list | None = None) -> dict:
    """Step one instance through a fresh matcher; returns ``{"result", "pos", [note]}``.

    ``result`` is ``accept`` when every token was allowed and an EOS bit is set in the final
    mask, else ``reject`` with ``pos`` the index of the refused token (``len(tokens)`` when it
    was refused at the end). Inconsistencies between mask and matcher are noted, not hidden.
    """
    m = compiled.matcher()
    row = bitmask[0]
    for k, tok in enumerate(tokens):
        _timed_mask(m, bitmask, tbm_us, slow)
        if not _bit(row, tok):
            return {"result": "reject", "pos": k}
        if not m.advance(tok):
            return {"result": "reject", "pos": k, "note": "advance refused a token the mask allowed"}
    _timed_mask(m, bitmask, tbm_us, slow)
    eos = any(_bit(row, e) for e in eos_ids)
    out = {"result": "accept" if eos else "reject", "pos": None if eos else len(tokens)}
    if eos != bool(m.is_accepting()):
        out["note"] = f"EOS bit {eos} but is_accepting() {not eos}"
    return out


def _failure(status: str, exc: BaseException | str, **extra) -> dict:
    msg = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return {"status": status, "error": msg[:2000], "compile_ms": None, "ttfm_ms": None,
            "tbm_us": [], "instances": [], **extra}


def classify(instances: list[dict]) -> tuple[str, str | None]:
    """Schema status from instance outcomes: an accepted invalid instance (unsound) outranks
    a rejected valid one (over-strict); otherwise ``pass``."""
    bad_invalid = [o for o in instances if o.get("ok") is False and not o["valid"]]
    bad_valid = [o for o in instances if o.get("ok") is False and o["valid"]]
    if bad_invalid:
        o = bad_invalid[0]
        return "invalidation_error", f"test #{o['test']} ({o['ser']}): invalid instance accepted"
    if bad_valid:
        o = bad_valid[0]
        return "validation_error", f"test #{o['test']} ({o['ser']}): valid instance rejected at token {o['pos']}"
    return "pass", None


def evaluate_schema(engine, schema: Any, instances: list[dict]) -> dict:
    """Compile ``schema`` with ``engine`` and check every tokenized instance.

    ``instances`` come from :func:`guidewire.maskbench.data.tokenize_instances`. Returns the
    status, error message, timings, raw TBM samples and per-instance outcomes.
    """
    bitmask = allocate_token_bitmask(1, engine.vocab_size)
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
    del _FULL_GC[:]
    del _ANY_GC[:]
    t0 = perf_counter_ns()
    try:
        compiled = engine.compile(schema)
        compile_ns = perf_counter_ns() - t0
        compiled.matcher().fill_bitmask(bitmask, 0)
        ttfm_ns = perf_counter_ns() - t0
    except MemoryError as exc:
        return _failure("memory", exc)
    except Exception as exc:  # noqa: BLE001 - every refusal or crash of compile is a compile error
        return _failure("compile_error", exc)
    # raw doubles, not a list of floats: a list is walked element by element by every full collection
    # of the cyclic GC, and those collections run inside the masks being timed
    tbm = array("d")
    slow: list[tuple] = []
    outcomes = []
    try:
        for inst in instances:
            out = {"test": inst["test"], "ser": inst["ser"], "valid": inst["valid"]}
            if inst["tokens"] is None:
                out.update(result="skipped_untokenizable", ok=None)
            else:
                out.update(walk_instance(compiled, inst["tokens"], engine.eos_ids, bitmask, tbm, slow))
                out["ok"] = (out["result"] == "accept") == inst["valid"]
                out["ntok"] = len(inst["tokens"])
            outcomes.append(out)
    except MemoryError as exc:
        return _failure("memory", exc, compile_ms=compile_ns / 1e6, ttfm_ms=ttfm_ns / 1e6)
    except Exception as exc:  # noqa: BLE001 - an engine crash mid-walk
        return _failure("error", exc, compile_ms=compile_ns / 1e6, ttfm_ms=ttfm_ns / 1e6)
    status, error = classify(outcomes)
    out = {"status": status, "error": error, "compile_ms": compile_ns / 1e6, "ttfm_ms": ttfm_ns / 1e6,
           "tbm_us": tbm, "instances": outcomes}
    if slow:
        out["slow_masks"] = [{"us": round((b - a) / 1e3, 1), "cpu_us": round(c / 1e3, 1),
                              "full_gc_us": round(_gc_within(_FULL_GC, a, b) / 1e3, 1),
                              "gc_us": round(_gc_within(_ANY_GC, a, b) / 1e3, 1), **_kernel_counts(r0, r1)}
                             for a, b, c, r0, r1 in slow]
    return out
