"""``complete_code`` with the real SmolLM2 model: monitors (a fake one defined here) ANDed into the
mask, the suffix gate checked by ``re``, cancellation and the time budget, argument errors."""

from __future__ import annotations

import re
import threading

import pytest

import guidewire
from guidewire.core.bitmask import fill_row, ids_to_bitmask
from guidewire.core.errors import GuidewireError

pytestmark = pytest.mark.model

POINT = "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self."


class ForbidAfterDot:
    """A fake monitor: after a ``.`` it forbids identifiers starting with ``letter`` (also inside a
    token that spans the dot); dormant (everything allowed) elsewhere. Counts its triggers."""

    name = "forbid-after-dot"

    def __init__(self, vocab, prefix: str, letter: str = "y"):
        self.vocab, self.letter = vocab, letter
        tb = vocab.token_bytes
        bad_any = [i for i, b in enumerate(tb) if b and ("." + letter).encode() in b]
        bad_first = [i for i, b in enumerate(tb) if b.startswith(letter.encode())]
        self._dormant = ids_to_bitmask([], vocab.vocab_size)
        self._dormant[:] = -1
        self._dormant &= ~ids_to_bitmask(bad_any, vocab.vocab_size)
        self._after_dot = self._dormant & ~ids_to_bitmask(bad_first, vocab.vocab_size)
        self.text = [prefix.encode()]
        self.stats = {"triggers": 0, "abstentions": 0, "analysis_s": 0.0}

    def _row(self):
        return self._after_dot if self.text[-1].endswith(b".") else self._dormant

    def fill_bitmask(self, bitmask, row=0):
        if self.text[-1].endswith(b"."):
            self.stats["triggers"] += 1
        fill_row(bitmask, row, self._row())

    def advance(self, token_id):
        if not (self._row()[token_id >> 5] >> (token_id & 31)) & 1:
            return False
        self.text.append(self.text[-1] + self.vocab.token_bytes[token_id])
        return True

    def rollback(self, n=1):
        del self.text[len(self.text) - n:]

    def validate(self, tokens):
        return 0

    def is_accepting(self):
        return True

    def is_terminated(self):
        return False

    def forced_tokens(self):
        return []

    def fork(self):
        f = ForbidAfterDot.__new__(ForbidAfterDot)
        f.__dict__.update(self.__dict__, text=list(self.text), stats=dict(self.stats))
        return f


def test_unmonitored_and_monitored():
    free = guidewire.complete_code(POINT, suffix="\n", monitors=(), max_tokens=8)
    assert free.text.startswith("y"), free     # what the model wants here (so the monitor has work to do)
    assert free.stats.healed == "." and free.stats.fim_format == "fallback:prefix"
    made = []

    def factory(*, vocab, prefix, suffix, path, project_root, deadline_s):
        assert suffix == "\n" and path == "geo.py" and deadline_s == 0.5
        made.append(ForbidAfterDot(vocab, prefix))
        return made[-1]

    out = guidewire.complete_code(POINT, suffix="\n", monitors=(factory,), max_tokens=8, path="geo.py")
    assert out.text and not out.text.startswith("y") and ".y" not in "." + out.text, out
    assert made[0].text[0] == POINT[:-1].encode()           # the monitor sees the buffer less the healed "."
    assert out.stats.triggers >= 1 and out.stats.monitors["forbid-after-dot"]["triggers"] == out.stats.triggers


def test_grammar_middle_fits_the_suffix():
    from guidewire.grammar import compile_regex
    from guidewire.runtime.registry import get_model

    doc = r"xs = \[\d+(, \d+)*\]\n"
    g = compile_regex(doc, get_model().vocab)
    prefix, suffix = "xs = [1, 2, 3, ", "]\n"
    out = guidewire.complete_code(prefix, suffix=suffix, grammar=g, monitors=(), stop=[","], max_tokens=12)
    assert out.finish_reason == "stop" and out.stats.suffix_fits, out
    assert re.fullmatch(doc, prefix + out.text + suffix), out.text
    with pytest.raises(GuidewireError, match="line 1, column 6"):
        guidewire.complete_code("xs = (", grammar=g, monitors=())


def test_cancel_and_time_limit():
    ev = threading.Event()
    ev.set()
    out = guidewire.complete_code("numbers = [\n", monitors=(), max_tokens=50, stop=[], cancel=ev)
    assert out.finish_reason == "cancelled" and out.stats.completion_tokens == 1
    out = guidewire.complete_code("numbers = [\n", monitors=(), max_tokens=50, stop=[], time_limit_s=1e-9)
    assert out.finish_reason == "time_limit" and out.stats.completion_tokens == 1


def test_argument_errors():
    with pytest.raises(TypeError, match="prefix"):
        guidewire.complete_code(b"x", monitors=())
    with pytest.raises(ValueError, match="max_tokens"):
        guidewire.complete_code("x", monitors=(), max_tokens=0)
    with pytest.raises(ValueError, match="time_limit_s"):
        guidewire.complete_code("x", monitors=(), time_limit_s=0)
    with pytest.raises(TypeError, match=r"monitors\[0\]"):
        guidewire.complete_code("x", monitors=(3,))


def test_named_monitor_is_created_and_reported():
    """The default monitor by name: its trigger after ``os.`` shows in the stats, and a completion
    the monitor answered names an attribute ``dir(os)`` lists."""
    import os

    out = guidewire.complete_code("import os\nos.", max_tokens=4, monitor_deadline_s=30)
    assert "dereference" in out.stats.monitors and out.stats.triggers >= 1
    assert out.stats.abstentions == 0, out.stats
    name = re.match(r"[A-Za-z_][A-Za-z_0-9]*", out.text)
    assert name and name.group() in dir(os), out.text
    # at temperature 0 the name was chosen by the name search, within its budget of model calls
    assert out.stats.segment_search["searches"] >= 1
    assert 0 <= out.stats.segment_search["expansions"] <= 8 * out.stats.segment_search["searches"]
    # decoding waits for the analysis and the thread hand-off after it (a few ms on a loaded
    # machine: CI saw 6.7), never for more than its own analysis beyond that
    assert 0 <= out.stats.wait_s <= out.stats.analysis_s + 0.1
    assert out.stats.wait_s < out.stats.total_s
    off = guidewire.complete_code("import os\nos.", max_tokens=4, monitor_deadline_s=30, segment_search=False)
    assert off.stats.segment_search == {}
    name = re.match(r"[A-Za-z_][A-Za-z_0-9]*", off.text)
    assert name and name.group() in dir(os), off.text


def test_token_healing_can_be_switched_off():
    on = guidewire.complete_code(POINT, monitors=(), max_tokens=2, stop=[])
    off = guidewire.complete_code(POINT, monitors=(), max_tokens=2, stop=[], token_healing=False)
    assert on.stats.healed == "." and off.stats.healed == ""
    assert off.stats.prompt_tokens == on.stats.prompt_tokens + 1  # healing feeds the prompt less its last token


BOX = ("class Box:\n    def __init__(self):\n        self._items = []\n        self._size = 0\n\n"
       "    def add(self, x):\n        self.")


def test_the_healed_dot_is_analysed_once_and_may_begin_a_private_name():
    """The prompt's trailing "." is healed, so the output starts with it: the dereference monitor
    analyses that dot before it is written and allows "._" (SmolLM2 spells "self._items" as
    " self" "._" "items"); the name written is one the class really has (``dir`` of an instance)."""
    out = guidewire.complete_code(BOX, max_tokens=6, monitor_deadline_s=30)
    assert out.stats.healed == "."
    # one analysis per dot: the healed one (asked before it was written, not again after) and
    # each dot of the completion (here "_items.append(x")
    assert out.stats.monitors["dereference"]["triggers"] == 1 + out.text.count(".") and out.stats.abstentions == 0
    ns: dict = {}
    exec(BOX + "x\n", ns)  # noqa: S102 -- the test's own class
    name = re.match(r"[A-Za-z_][A-Za-z_0-9]*", out.text)
    assert name and name.group() in dir(ns["Box"]()), out.text
    assert name.group().startswith("_"), out.text  # what the model wants once "._" is allowed


def test_monitor_backend_is_the_one_analysing():
    """``monitor_backend`` reaches the named monitors: a back end that lists one made-up name is
    asked at the dot, and the completion can only name it."""

    class OneName:
        name = "one-name"

        def __init__(self):
            self.asked = 0

        def attributes(self, code, line, column, *, path, deadline_s):
            self.asked += 1
            return ["zqxfrob"]

        def signature(self, *a, **k):
            return None

        def close(self):
            pass

    be = OneName()
    out = guidewire.complete_code("import os\n\nx = os.", max_tokens=12, monitor_backend=be, stop=["\n"])
    assert be.asked >= 1 and out.stats.triggers >= 1 and out.text.startswith("zqxfrob"), (be.asked, out)
    with pytest.raises(ValueError, match="unknown monitor backend"):
        guidewire.complete_code("x.", max_tokens=2, monitor_backend="nope")
