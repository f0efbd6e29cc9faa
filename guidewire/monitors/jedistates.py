"""jedi inference states kept across queries (see :class:`InferenceStates`).

Like :mod:`.jedifast`, this module imports nothing from guidewire: the jedi child process
(:mod:`.jediproc`) runs it from its source file.
"""

from __future__ import annotations

import os
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

_MEMO_ENTRY_BYTES = 16 << 10  # measured: ~14 KiB of heap per memoised inference, stdlib buffers


class _Slot(NamedTuple):
    """One kept state: the jedi inference state, the files its modules came from (path ->
    modification time) and the paths of its modules' parse trees in parso's cache."""

    state: object
    files: dict
    trees: set


class InferenceStates:
    """jedi inference states kept across queries: one per (project, sys path).

    ``jedi.Script`` starts every query from an empty inference state, so each query loads and
    infers ``builtins``, ``typing`` and every imported library module again (and re-fetches
    compiled objects from jedi's subprocess). Here a query's script runs on the state of its
    project and of the sys path jedi derives for it (the project's, plus the directories between
    the script and the project root that are not packages: the only use jedi makes of a state's
    script path), so modules the buffer imports are inferred once for the queries after it, from
    any directory that resolves imports the same way (on the dot-completion dev set, 300 buffers
    in 27 standard-library directories share one state). The buffer is a new
    module value each query (its inferences are never reused) and leaves the state's module
    cache after its query.

    What jedi keeps per query stays per query: the recursion detectors and the count of
    inferences per node (past 300 jedi infers nothing for that node) start empty each time.
    Kept honest by these rules: a state whose modules' files changed on disk since they were
    loaded (modification time, or gone) is dropped before it answers (and an import that failed
    is forgotten after its query, so a module created since is found); so is a state one of whose
    modules' parse trees left parso's in-memory cache (jedi reads a module's tree back from that
    cache and fails with a ``KeyError`` when it is gone; parso evicts the trees unused for 10
    minutes once it holds 600 modules, so each query marks its state's trees used); a query that raised drops
    its state (an inference cut short can leave its caches half-filled); and the states' memoised
    inferences are charged ``entry_bytes`` each against ``max_bytes`` (least recently used states
    go first; one over the bound alone is dropped after its query).
    """

    def __init__(self, max_bytes: int = 256 << 20, max_states: int = 32,
                 entry_bytes: int = _MEMO_ENTRY_BYTES):
        self.max_bytes, self.max_states, self.entry_bytes = max_bytes, max_states, entry_bytes
        self._states: OrderedDict = OrderedDict()  # key -> _Slot
        self.reused = self.created = self.stale = self.dropped = 0
        self.dropped_bytes = 0  # charge of the states dropped so far (their heap is garbage now)

    def run(self, code: str, path: str | None, project, query):
        """``query(script)`` on a ``jedi.Script`` of ``code`` at ``path`` (the script
        ``jedi.Script(code=code, path=path, project=project)`` is) running on the shared state
        of its project and sys path; the state is tidied after the query (dropped if the query raised)."""
        script, key = self._open(code, path, project)
        try:
            value = query(script)
        except BaseException:
            self._close(key, script, ok=False)
            raise
        self._close(key, script)
        return value

    def _open(self, code: str, path: str | None, project):
        import jedi

        kw = {"code": code, "path": path}
        if project is not None:
            kw["project"] = project
        script = jedi.Script(**kw)
        own = script._inference_state
        key = (str(own.project.path), tuple(own.get_sys_path()))
        slot = self._states.get(key)
        if slot is not None and (self._changed(slot.files) or not _keep_trees(slot.trees)):
            self.stale += 1
            self._drop(key)
            slot = None
        if slot is None:
            self.created += 1
            slot = self._states[key] = _Slot(own, {}, set())
        else:
            self.reused += 1
            self._states.move_to_end(key)
            script._inference_state = slot.state
        state = slot.state
        state.reset_recursion_limitations()
        state.inferred_element_counts.clear()  # a budget per query (jedi gives up on a node
        state.analysis.clear()                 # inferred over 300 times), never across queries
        return script, key

    @staticmethod
    def _changed(files: dict) -> bool:
        for path, mtime in files.items():
            try:
                if os.stat(path).st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False

    def _close(self, key, script, ok: bool = True) -> None:
        """After a query: note its state's loaded files, drop the buffer module from it (or the
        whole state when the query raised), keep the byte bound."""
        slot = self._states.get(key)
        if slot is None or slot.state is not script._inference_state:
            return
        if not ok:
            self._drop(key)
            return
        from parso.cache import parser_cache

        state, files, trees = slot
        cache = state.module_cache._name_cache
        for names, values in list(cache.items()):
            if not values:  # an import that failed: tried again next query (the file may appear)
                cache.pop(names, None)
                continue
            for value in values:
                file_io = getattr(value, "file_io", None)
                path = getattr(file_io, "path", None)
                if path is None:
                    continue
                path = str(path)
                if path == str(script.path):
                    cache.pop(names, None)  # the buffer: never imported, a new one each query
                elif path not in files:
                    try:
                        files[path] = os.stat(path).st_mtime_ns
                    except OSError:  # not a plain file (a zip member): as jedi itself, unchecked
                        pass
                    tree = Path(path)
                    if any(tree in c for c in parser_cache.values()):
                        trees.add(tree)
        while self._states and (len(self._states) > self.max_states or self.nbytes > self.max_bytes):
            self._drop(next(iter(self._states)))

    def trees(self) -> int:
        """Parse trees the states rely on parso's cache to keep (their modules')."""
        return sum(len(slot.trees) for slot in self._states.values())

    def _charge(self, state) -> int:
        return self.entry_bytes * sum(len(d) for d in state.memoize_cache.values())

    def _drop(self, key) -> None:
        state = self._states.pop(key).state
        self.dropped += 1
        self.dropped_bytes += self._charge(state)

    @property
    def nbytes(self) -> int:
        """Bytes charged: the states' memoised inferences at ``entry_bytes`` each."""
        return sum(self._charge(slot.state) for slot in self._states.values())

    def clear(self) -> None:
        """Drop every state."""
        self._states.clear()


def _keep_trees(trees: set) -> bool:
    """Mark the parse trees ``trees`` (module paths) used in parso's in-memory cache, so that
    parso's eviction of trees unused for 10 minutes spares them; False if one is gone already."""
    from parso.cache import parser_cache

    now = time.time()
    caches = list(parser_cache.values())
    for tree in trees:
        found = False
        for c in caches:
            item = c.get(tree)
            if item is not None:
                item.last_used = now
                found = True
        if not found:
            return False
    return True


def parse_buffer(code: str, path: str | None, project=None) -> bool:
    """Parse ``code`` exactly as ``jedi.Script(code=code, path=path, project=project)`` does, ahead
    of the queries on it: parso's diff cache then holds the module under ``path``, and a query on
    a later version of the buffer re-parses only the lines that changed (a 144 KB module: ~130 ms
    whole, ~10 ms after a one-character edit). A no-op without ``path`` (the cache is per path).
    Returns whether it parsed."""
    if path is None:
        return False
    import jedi

    kw = {"code": code, "path": path}
    if project is not None:
        kw["project"] = project
    jedi.Script(**kw)
    return True


def _idle_collector():
    """:class:`guidewire.core.collector.IdleCollector`, run from its source file (this module imports
    nothing from guidewire; that file imports only the standard library)."""
    import runpy

    here = os.path.dirname(os.path.abspath(__file__))
    return runpy.run_path(os.path.join(here, os.pardir, "core", "collector.py"))["IdleCollector"]


class FrozenHeap(_idle_collector()):
    """The collector's policy of a process whose heap is mostly jedi's and parso's caches.

    Those caches hold millions of objects that live as long as the process; every full
    collection walks them all (0.2-0.7 s, measured inside queries on the dot-completion dev set,
    the largest part of the analysis tail). :meth:`after_query`, called once an answer is out,
    collects what the query left and freezes what survives (``IdleCollector.collect``: a full
    collection once the frozen set has grown ``growth`` times), and also fully once
    ``max_dropped_bytes`` of inference state were dropped since the last full collection (a
    dropped state's frozen objects are garbage only a full collection finds). ``collections``,
    ``full``, ``seconds`` and ``max_s`` say what it cost. Freezing is process-wide: objects other
    threads made before the call are frozen too (and collected at the next full collection).
    """

    def __init__(self, *states: InferenceStates, growth: float = 2.0, max_dropped_bytes: int = 64 << 20):
        super().__init__(growth)
        self.max_dropped_bytes = max_dropped_bytes
        self._seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # states -> dropped bytes seen
        self._pending = 0  # bytes of states dropped since the last full collection
        for st in states:
            self.watch(st)

    def watch(self, states: InferenceStates) -> None:
        """Count the states ``states`` drops from now on (one heap serves every back end of a
        process: the frozen set is the process's)."""
        self._seen.setdefault(states, states.dropped_bytes)

    def after_query(self) -> None:
        """Collect the last query's garbage and freeze the survivors (see the class docstring)."""
        for st, seen in list(self._seen.items()):
            self._pending += st.dropped_bytes - seen
            self._seen[st] = st.dropped_bytes
        self.collect()

    def _full_due(self) -> bool:
        return self._pending > self.max_dropped_bytes

    def _on_full(self) -> None:
        self._pending = 0
