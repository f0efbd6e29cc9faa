"""Static-analysis back ends for monitors, each query under a deadline.

A back end answers two questions about a buffer at a cursor (1-based line, 0-based column in
code points, as jedi counts): :meth:`~Backend.attributes` (the names legal after ``expr.``) and
:meth:`~Backend.signature` (the parameters of the call being opened). Both return ``None`` when
the analysis has no answer; a query that does not finish by its deadline raises
:class:`AnalysisTimeout`. Monitors turn both into recorded abstentions. A back end may also
offer ``prepare(code, *, path, deadline_s, wait) -> bool``: parse a buffer ahead of the queries
on it (an editor's open document, see :func:`~.factory.prepare_buffer`), so that a trigger pays
for what changed only.

:class:`JediBackend` runs jedi in-process on a worker thread: the caller waits at most the
deadline (see :class:`DeadlineRunner` for what happens to a query past it).
jedi caches parsed source per file path, and a partial buffer analysed under a real path could
be served to a later analysis that imports that file; so the buffer is analysed under a sibling
path that no module imports (``__guidewire_buffer__<name>.py`` in the same directory, so relative
imports still resolve), and the buffer text is always passed explicitly.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

from ..core.errors import GuidewireError


_ANSWER_ENTRIES = 128  # answers are name lists: a few KiB each
PREPARE_S = 5.0  # how long ``prepare`` waits for a buffer's parse (a 230 KB module: ~0.3 s)


class AnalysisTimeout(GuidewireError):
    """A static-analysis query did not finish by its deadline."""


class AnalysisError(GuidewireError):
    """A static-analysis back end failed (could not start, crashed, answered garbage)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a signature: ``kind`` is an :class:`inspect.Parameter` kind name
    (``POSITIONAL_ONLY``, ``POSITIONAL_OR_KEYWORD``, ``VAR_POSITIONAL``, ``KEYWORD_ONLY``,
    ``VAR_KEYWORD``)."""

    name: str
    kind: str
    has_default: bool


@dataclass(frozen=True)
class Signature:
    """The parameters of a callable, as the back end sees them (bound ``self`` already dropped)."""

    name: str
    params: tuple[Param, ...]


def buffer_path(path: str | None) -> str | None:
    """The path a buffer is analysed under: a never-imported sibling of ``path`` (None stays None)."""
    if path is None:
        return None
    d, base = os.path.split(os.path.abspath(path))
    stem = base[:-3] if base.endswith(".py") else base
    return os.path.join(d, f"__guidewire_buffer__{stem}.py")


def cursor(text: str) -> tuple[int, int]:
    """``(line, column)`` of the end of ``text``: 1-based line, 0-based column in code points."""
    line = text.count("\n") + 1
    return line, len(text) - (text.rfind("\n") + 1)


@runtime_checkable
class Backend(Protocol):
    """A static-analysis back end (see the module docstring for the contract)."""

    name: str

    def attributes(self, code: str, line: int, column: int, *, path: str | None,
                   deadline_s: float) -> list[str] | None:
        """Names legal at the cursor, which sits right after ``expr.`` (None: no answer)."""

    def signature(self, code: str, line: int, column: int, *, path: str | None,
                  deadline_s: float) -> Signature | None:
        """The signature of the call whose ``(`` is just before the cursor (None: no answer)."""

    def close(self) -> None:
        """Release the back end's resources (threads, server processes)."""


class DeadlineRunner:
    """Runs one query at a time on a worker thread and waits at most a deadline for it.

    The caller gets :class:`AnalysisTimeout` at the deadline; the query itself runs on to its end
    (interrupting jedi mid-inference, e.g. with an asynchronous exception, corrupts its shared
    caches, which then fail every later query), and the next query waits for it within its own
    deadline. ``on_late(value)`` is called with the answer of a query that finished late, so a
    caller can keep it for a retry of the same question; ``after()`` runs on the worker once
    the caller has the answer (housekeeping off the caller's wait; the next query waits for it).
    """

    def __init__(self):
        self._busy = threading.Lock()
        self.late = 0

    def run(self, fn: Callable[[], object], deadline_s: float, on_late: Callable[[object], None] | None = None,
            after: Callable[[], None] | None = None):
        """``fn()``'s value, or :class:`AnalysisTimeout` after ``deadline_s`` seconds."""
        if deadline_s <= 0:
            raise ValueError("deadline_s must be > 0")
        t_end = time.monotonic() + deadline_s
        if not self._busy.acquire(timeout=deadline_s):
            raise AnalysisTimeout(f"the previous analysis was still running after {deadline_s:.3f} s")
        box: dict = {}
        done = threading.Event()
        state = {"abandoned": False}
        guard = threading.Lock()

        def work():
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller
                box["error"] = exc
            finally:
                with guard:
                    done.set()
                    late = state["abandoned"]
                try:
                    if late and "value" in box and on_late is not None:
                        self.late += 1
                        on_late(box["value"])  # stored before the next query may start
                    if after is not None:
                        after()
                finally:
                    self._busy.release()

        worker = threading.Thread(target=work, name="guidewire-monitor-analysis", daemon=True)
        try:
            worker.start()
        except BaseException:
            self._busy.release()
            raise
        done.wait(max(0.0, t_end - time.monotonic()))
        with guard:
            if not done.is_set():
                state["abandoned"] = True
                raise AnalysisTimeout(f"analysis did not finish within {deadline_s:.3f} s")
        err = box.get("error")
        if err is not None:
            raise AnalysisError(f"analysis failed: {type(err).__name__}: {err}") from err
        return box.get("value")


_JEDI_RUNNER: list = []


def _jedi_runner() -> DeadlineRunner:
    """The one runner every :class:`JediBackend` shares: jedi is not thread-safe, so one query at
    a time per process (a late query delays the next one, which may then time out itself)."""
    if not _JEDI_RUNNER:
        _JEDI_RUNNER.append(DeadlineRunner())
    return _JEDI_RUNNER[0]


_JEDI_HEAP: list = []


def _jedi_heap():
    """The collector policy every in-process :class:`JediBackend` shares (freezing is
    process-wide, so one policy counts the frozen set; it runs on the one runner's worker)."""
    if not _JEDI_HEAP:
        from .jedistates import FrozenHeap

        _JEDI_HEAP.append(FrozenHeap())
    return _JEDI_HEAP[0]


class JediBackend:
    """jedi in-process (``jedi.Script(code=buffer, path=sibling, project=Project(root))``).

    ``shared_states``: imported modules' inference kept across queries (:mod:`.jedistates`);
    ``freeze_heap``: after each answer the query's garbage is collected and the survivors frozen
    (:class:`~.jedistates.FrozenHeap`, one for the process and all its jedi back ends: other
    threads' objects are frozen too until the periodic full collection), so the collector stops
    walking jedi's caches mid-query."""

    name = "jedi"
    keeps_late_answers = True  # a query past its deadline still answers a later identical one

    def __init__(self, project_root: str | None = None, *, shared_states: bool = True,
                 freeze_heap: bool = True):
        try:
            import jedi
        except ImportError as exc:  # pragma: no cover - the extra is installed in CI
            raise AnalysisError("the jedi back end needs jedi: pip install 'guidewire[monitors]'") from exc
        self.project_root = os.path.abspath(project_root) if project_root else None
        self._project = jedi.Project(self.project_root) if self.project_root else None
        self._runner = _jedi_runner()
        self._answers: OrderedDict = OrderedDict()  # LRU of answers, late ones included
        self._alock = threading.Lock()
        from .jedifast import NameCache
        from .jedistates import InferenceStates

        self.names = NameCache()  # library classes' attribute names, across queries
        # imported modules' inference, across queries (``shared_states=False``: a fresh jedi
        # state per query, as ``jedi.Script`` does; kept for comparison)
        self.states = InferenceStates() if shared_states else InferenceStates(max_states=0)
        # after each query: its garbage collected, survivors frozen (jedistates.FrozenHeap; the
        # process's collector then never walks jedi's caches again in the middle of a query)
        self.heap = _jedi_heap() if freeze_heap else None
        if self.heap is not None:
            self.heap.watch(self.states)

    def _ask(self, key: tuple, query: Callable[[], object], deadline_s: float):
        key = hashlib.blake2b(repr(key).encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._alock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key]

        def keep(value):
            with self._alock:
                self._answers[key] = value
                while len(self._answers) > _ANSWER_ENTRIES:
                    self._answers.popitem(last=False)

        value = self._runner.run(query, deadline_s, on_late=keep,
                                 after=self.heap.after_query if self.heap is not None else None)
        keep(value)
        return value

    def _on_script(self, code: str, path: str | None, fn):
        return self.states.run(code, buffer_path(path), self._project, fn)

    def attributes(self, code, line, column, *, path, deadline_s):
        from .jedifast import attribute_names

        def query():
            return [n for n in self._on_script(code, path, lambda s: attribute_names(s, line, column, self.names))
                    if n.isidentifier()]

        names = self._ask(("attributes", code, line, column, path), query, deadline_s)
        return names or None

    def signature(self, code, line, column, *, path, deadline_s):
        def query():
            return self._on_script(code, path, lambda s: [
                Signature(g.name, tuple(_jedi_param(p) for p in g.params)) for g in s.get_signatures(line, column)])

        sigs = self._ask(("signature", code, line, column, path), query, deadline_s)
        if not sigs or len(set(sigs)) != 1:
            return None  # unknown, or overloads with different parameter lists
        return sigs[0]

    def prepare(self, code: str, *, path: str | None, deadline_s: float = PREPARE_S, wait: bool = True) -> bool:
        """Parse the buffer ``code`` of ``path`` ahead of the queries on it (an editor's open
        document, synced as it changes): a later query on it, or on an edited version, re-parses
        only the lines that changed. Waits at most ``deadline_s``, ``wait`` or not (in-process,
        the parse holds the interpreter lock anyway; past the deadline it runs on and the next
        query waits for it within its own deadline); returns whether it finished. A no-op
        without ``path`` (parsed buffers are kept per path)."""
        bp = buffer_path(path)
        if bp is None:
            return False
        from .jedistates import parse_buffer

        try:
            return bool(self._runner.run(lambda: parse_buffer(code, bp, self._project), deadline_s,
                                         after=self.heap.after_query if self.heap is not None else None))
        except AnalysisTimeout:
            return False

    def forget_answers(self) -> None:
        """Drop the answers kept for repeated questions (a benchmark measuring analyses, not
        cache hits, calls it between runs)."""
        with self._alock:
            self._answers.clear()

    def close(self) -> None:
        """Nothing to release (jedi runs in this process)."""


def _jedi_param(p) -> Param:
    desc = p.description  # "param name: T=default" / "param *name" / "param name=1"
    rest = desc.split(p.name, 1)[1] if p.name in desc else desc
    kind = getattr(p.kind, "name", str(p.kind))
    return Param(p.name, kind, "=" in rest)
