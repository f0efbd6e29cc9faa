"""Fake engines for testing the runner: accept everything, reject everything, sleep, allocate.

They need no tokenizer and answer instantly, so tests of classification, timeouts and the
memory cap run in milliseconds. ``fake-oneshot`` compiles once per process (then refuses), which
tells a test whether every schema got a fresh worker. A schema may carry ``"x-fake-sleep": seconds`` (compile
sleeps that long), ``"x-fake-alloc-mb": n`` (compile allocates and touches ``n`` MiB) or
``"x-fake-need-frozen-heap": true`` (compile refuses unless the worker froze its heap),
``"x-fake-need-kept-heap": true`` (compile refuses where a freed 64 MiB block faults in again),
``"x-fake-need-faulted-top": true`` (compile keeps 64 MiB more alive, 1 MiB at a time, as a filling
memo does, and refuses when that faulted more than a tenth of its pages in) or
``"x-fake-need-warm-up": true`` (compile refuses unless the engine was warmed up in this process) or
``"x-fake-need-frozen-leftovers": true`` (compile keeps 20,000 more lists alive, as a memo filling
up does, and refuses when the lists earlier schemas left are still in the collector's generations,
that is, not frozen between schemas).
"""

from __future__ import annotations

import gc
import resource
import time
from typing import Any

import numpy as np

from .engines import Engine


class _ConstMatcher:
    """A matcher whose mask is all ones or all zeros, forever."""

    def __init__(self, allow: bool):
        self._allow = allow

    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Set every bit (accept-all) or clear every bit (reject-all)."""
        bitmask[row, :] = -1 if self._allow else 0

    def advance(self, token_id: int) -> bool:
        """True for accept-all, False for reject-all."""
        return self._allow

    def is_accepting(self) -> bool:
        """True for accept-all, False for reject-all."""
        return self._allow


class _ConstCompiled:
    """Compiled form of a constant engine."""

    def __init__(self, allow: bool):
        self._allow = allow

    def matcher(self) -> _ConstMatcher:
        """A fresh constant matcher."""
        return _ConstMatcher(self._allow)


_warmed_up = False   # whether Engine.warm_up ran in this process
_held: list = []     # what x-fake-need-faulted-top keeps alive (a memo filling up)
_leftovers: list = []   # what x-fake-need-frozen-leftovers keeps alive: one list of lists per schema


def _unfrozen(objs: list) -> int:
    """How many of ``objs`` are in one of the collector's generations (not frozen)."""
    ids = {id(o) for o in objs}
    return sum(id(o) in ids for g in range(3) for o in gc.get_objects(generation=g))


def _refaults() -> bool:
    """Whether a freed 64 MiB block faults its pages in again when allocated anew (glibc's
    default; not once freed memory is kept mapped, see :mod:`guidewire.core.heap`)."""
    block = np.ones(64 << 20, dtype=np.uint8)
    del block
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(64 << 20, dtype=np.uint8)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before >= 32


def _misbehave(schema: Any) -> None:
    """Honour ``x-fake-sleep``, ``x-fake-alloc-mb``, ``x-fake-need-frozen-heap``, ``x-fake-need-kept-heap``,
    ``x-fake-need-faulted-top``, ``x-fake-need-warm-up`` and ``x-fake-need-frozen-leftovers`` in a schema object."""
    if not isinstance(schema, dict):
        return
    if schema.get("x-fake-need-warm-up") and not _warmed_up:
        raise RuntimeError("the engine was not warmed up")
    if schema.get("x-fake-need-frozen-heap") and gc.get_freeze_count() == 0:
        raise RuntimeError("the worker's heap is not frozen")
    if schema.get("x-fake-need-kept-heap") and _refaults():
        raise RuntimeError("the worker's malloc gives freed memory back")
    if schema.get("x-fake-need-faulted-top"):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        _held.extend(np.ones(1 << 20, dtype=np.uint8) for _ in range(64))
        faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        if faulted * 10 > (64 << 20) // 4096:
            raise RuntimeError(f"growing the live set by 64 MiB faulted {faulted} pages in")
    if schema.get("x-fake-need-frozen-leftovers"):
        earlier = [o for batch in _leftovers for o in batch]
        _leftovers.append([[i] for i in range(20000)])
        left = _unfrozen(earlier)
        if left:
            raise RuntimeError(f"{left} of the {len(earlier)} objects earlier schemas left are not frozen")
    if schema.get("x-fake-sleep"):
        time.sleep(float(schema["x-fake-sleep"]))
    if schema.get("x-fake-alloc-mb"):
        block = np.ones(int(schema["x-fake-alloc-mb"]) * (1 << 20), dtype=np.uint8)
        del block


class AcceptAllEngine(Engine):
    """Allows every token and accepts at every point (unsound: invalid instances pass)."""

    name = "fake-accept"
    ALLOW = True

    def warm_up(self) -> None:
        """The common warm-up, remembered for ``x-fake-need-warm-up``."""
        global _warmed_up
        super().warm_up()
        _warmed_up = True

    def compile(self, schema: Any):
        """Compile instantly (after any requested sleep or allocation)."""
        _misbehave(schema)
        return _ConstCompiled(self.ALLOW)


class RejectAllEngine(AcceptAllEngine):
    """Allows no token and never accepts (every valid instance fails)."""

    name = "fake-reject"
    ALLOW = False


class SleepyEngine(AcceptAllEngine):
    """Accept-all, but compile sleeps ``x-fake-sleep`` seconds (default 3600) on such schemas."""

    name = "fake-sleep"

    def compile(self, schema: Any):
        """Sleep when the schema asks for it, then behave like accept-all."""
        if isinstance(schema, dict) and "x-fake-sleep" in schema:
            time.sleep(float(schema["x-fake-sleep"] or 3600))
        return _ConstCompiled(True)


class WarmUpRaisesEngine(AcceptAllEngine):
    """Accept-all whose warm-up raises (tests that a failed warm-up is reported, not fatal)."""

    name = "fake-warm-raises"

    def warm_up(self) -> None:
        """Raise."""
        raise RuntimeError("warm-up refused")


class WarmUpDiesEngine(AcceptAllEngine):
    """Accept-all whose warm-up kills its process (tests the restart without a warm-up)."""

    name = "fake-warm-dies"

    def warm_up(self) -> None:
        """Exit the process at once, as a crash in native code would."""
        import os

        os._exit(70)


class OneShotEngine(AcceptAllEngine):
    """Accept-all, but only the first compile in a process succeeds (tests ``--fresh-worker``)."""

    name = "fake-oneshot"
    _compiled_in_process = 0

    def warm_up(self) -> None:
        """Nothing: the one compile a process allows is kept for a schema."""

    def compile(self, schema: Any):
        """Compile the first schema; raise on any later one in the same process."""
        OneShotEngine._compiled_in_process += 1
        if OneShotEngine._compiled_in_process > 1:
            raise RuntimeError("second compile in one worker process")
        return _ConstCompiled(True)
