"""CPython's cyclic collector in a long-lived process: collect between units of work, freeze what survives.

A full (oldest-generation) collection walks every container object the process holds. A
process that keeps large caches alive (a vocabulary's indexes, compiled grammars, jedi's
inference state) pays for walking them in whichever call happens to trigger the collection: in
MaskBench's SmolLM2 run (stop 59) one mask took 39.5 ms, 37.3 of them a full collection, and four
more of the masks over 20 ms held 2-5 ms of one. :class:`IdleCollector` moves that work between
units (between schemas, when a server goes idle): it collects what the last unit left, which is
cheap because only objects made since the last freeze are walked, and freezes the survivors
(``gc.freeze``), so later collections skip them. Frozen objects that later become cyclic
garbage wait for the next full collection, done (also between units) once the frozen set has
grown ``growth`` times since the last one: the cost of a full collection is paid once per
doubling instead of once per 25% growth (the collector's own rule), and never inside a unit.
Objects without cycles are freed by reference counting whether frozen or not.

Freezing is process-wide: call it from the code that owns the process (a server, a benchmark
worker), never from the library on its own.
"""

from __future__ import annotations

import gc
import time

__all__ = ["IdleCollector"]


class IdleCollector:
    """Collect the garbage a unit of work left and freeze the survivors (see the module docstring).

    ``collections`` (calls of :meth:`collect`), ``full`` (full collections among them),
    ``seconds`` (time spent in all) and ``max_s`` (the longest) say what it cost.
    """

    def __init__(self, growth: float = 2.0):
        if isinstance(growth, bool) or not isinstance(growth, (int, float)) or not growth > 1:
            raise ValueError(f"growth must be a number > 1, got {growth!r}")
        self.growth = float(growth)
        self.collections = self.full = 0
        self.seconds = self.max_s = 0.0
        self._base: int | None = None   # frozen objects right after the last full collection
        self._frozen = 0                # frozen objects now (as counted at each freeze)

    def collect(self) -> float:
        """Collect what is not frozen, freeze the survivors, and, on the first call or once the
        frozen set has grown ``growth`` times (or :meth:`_full_due` says so), unfreeze everything
        and collect it all first. Returns the seconds it took."""
        t0 = time.perf_counter()
        self.collections += 1
        gc.collect()
        # every unfrozen survivor is in the oldest generation now: those are what a freeze adds
        # (counted in time linear in them; gc.get_freeze_count() would walk the whole frozen set)
        self._frozen += len(gc.get_objects(generation=2))
        if self._base is None or self._frozen > self.growth * self._base or self._full_due():
            self.full += 1
            self._on_full()
            gc.unfreeze()
            gc.collect()
            self._frozen = self._base = max(1, len(gc.get_objects(generation=2)))
        gc.freeze()
        dt = time.perf_counter() - t0
        self.seconds += dt
        self.max_s = max(self.max_s, dt)
        return dt

    def stats(self) -> dict:
        """``{"collections", "full", "ms", "max_ms"}`` so far."""
        return {"collections": self.collections, "full": self.full, "ms": round(self.seconds * 1e3, 3),
                "max_ms": round(self.max_s * 1e3, 3)}

    def _full_due(self) -> bool:
        """Whether a full collection is due for another reason than growth (subclasses)."""
        return False

    def _on_full(self) -> None:
        """Called before each full collection (subclasses reset what :meth:`_full_due` counts)."""
