"""IdleCollector: garbage collected between units of work, survivors frozen, full collections by growth."""

import gc
import weakref

import pytest

from guidewire.core.collector import IdleCollector
from guidewire.server.cli import idle_housekeeping


class _Node:
    """A container that can sit in a reference cycle and be watched by a weak reference."""

    def __init__(self):
        self.other = None


def _cycle():
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return a


def _unfrozen(objs) -> int:
    ids = {id(o) for o in objs}
    return sum(id(o) in ids for g in range(3) for o in gc.get_objects(generation=g))


@pytest.fixture
def thawed():
    """Leave the process as found: nothing frozen after the test."""
    yield
    gc.unfreeze()


def test_survivors_are_frozen_and_garbage_is_collected(thawed):
    col = IdleCollector()
    col.collect()
    assert col.collections == 1 and col.full == 1     # the first call is a full collection
    kept = [[i] for i in range(30000)]                # a unit's survivors (a memo filling up)
    dead = weakref.ref(_cycle())                      # and its cyclic garbage
    assert dead() is not None
    assert _unfrozen(kept) == 30000
    col.collect()
    assert dead() is None                             # collected between units
    assert _unfrozen(kept) == 0                       # frozen: later collections do not walk them
    assert gc.get_freeze_count() >= 30000
    assert col.collections == 2 and col.seconds > 0 and col.max_s <= col.seconds
    st = col.stats()
    assert st["collections"] == 2 and st["full"] == col.full and st["max_ms"] <= st["ms"]


def test_frozen_cycles_wait_for_the_full_collection_growth_calls(thawed):
    col = IdleCollector(growth=1.5)
    base = [[i] for i in range(20000)]
    col.collect()                                     # full: the frozen set's base is >= 20,000 objects
    full, base_n = col.full, gc.get_freeze_count()
    late = _cycle()
    late_ref = weakref.ref(late)
    col.collect()                                     # the cycle is alive: frozen with the rest
    del late
    col.collect()                                     # it is garbage now, but frozen: no cheap collection finds it
    assert late_ref() is not None and col.full == full
    grown = [[i] for i in range(base_n)]             # the frozen set doubles
    col.collect()                                     # the frozen set grew past 1.5x: unfreeze, collect it all
    assert col.full == full + 1 and late_ref() is None
    assert _unfrozen(grown) == 0 and _unfrozen(base) == 0


def test_bad_growth_is_refused():
    for bad in (1, 0.5, -2, True, "2", None):
        with pytest.raises(ValueError, match="growth"):
            IdleCollector(growth=bad)


def test_serve_idle_housekeeping_collects_then_tops_up():
    """``guidewire serve``'s idle hook: the collection first (it frees memory), then the heap reserve's
    top-up; either part alone; none without both."""
    calls = []

    class Col:
        def collect(self):
            calls.append("collect")

    class Res:
        def top_up(self):
            calls.append("top_up")

    assert idle_housekeeping(None, None) is None
    idle_housekeeping(Col(), Res())()
    idle_housekeeping(None, Res())()
    idle_housekeeping(Col(), None)()
    assert calls == ["collect", "top_up", "top_up", "collect"]
