"""jedi in a child process: strict deadlines, and no GIL shared with the decoding loop.

In-process jedi (:class:`~.analysis.JediBackend`) shares the interpreter lock with the caller: a
long jedi step (loading a pickled stub cache, say) can hold the caller past its deadline, and a
query that runs on past its deadline competes with decoding for the lock until it ends. Here the
caller only waits on a pipe. A query past its deadline runs on in the child; its answer is read
(and cached) before the next query is sent, within that query's deadline; a child that died is
started again on the next query, and so is one still busy ``RUNAWAY_S`` after its query was
sent (jedi's tail reaches 14 s). The child is a fresh interpreter (``python -c``, no copy of the
caller's threads or model, no re-import of the caller's main module) talking pickled messages
over its stdin/stdout, and keeps jedi's caches warm across queries.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from multiprocessing.connection import Connection

from .analysis import PREPARE_S, AnalysisError, AnalysisTimeout, Param, Signature, buffer_path

_ANSWER_ENTRIES = 128
_PARSE = b"parse"  # in flight: a parse ahead (answer keys are 16-byte digests)
RUNAWAY_S = 10.0  # a query still running this long after it was sent gets its child killed


# The child's program: no guidewire import (it runs with any sys.path), answers are plain data.
_CHILD = r"""
import os, sys
from multiprocessing.connection import Connection
out_fd = os.dup(1)
os.dup2(2, 1)  # anything jedi prints goes to stderr, never into the protocol
rx, tx = Connection(0, writable=False), Connection(out_fd, readable=False)
import jedi
import runpy
fast = runpy.run_path(sys.argv[2])  # guidewire/monitors/jedifast.py: no guidewire imports
names_cache = fast["NameCache"]()
kept = runpy.run_path(sys.argv[3])  # jedistates.py: no guidewire imports
states = kept["InferenceStates"]()
heap = kept["FrozenHeap"](states)
root = sys.argv[1] or None
project = jedi.Project(root) if root else None
while True:
    try:
        msg = rx.recv()
    except EOFError:
        break
    if msg is None:
        break
    qid, kind, code, line, column, path = msg
    try:
        if kind == "prepare":
            tx.send((qid, "ok", kept["parse_buffer"](code, path, project)))
            if not rx.poll(0):
                heap.after_query()
            continue
        def answer(script):
            if kind == "attributes":
                return [n for n in fast["attribute_names"](script, line, column, names_cache) if n.isidentifier()]
            value = []
            for s in script.get_signatures(line, column):
                ps = []
                for p in s.params:
                    d = p.description
                    rest = d.split(p.name, 1)[1] if p.name in d else d
                    ps.append((p.name, getattr(p.kind, "name", str(p.kind)), "=" in rest))
                value.append((s.name, tuple(ps)))
            return value
        value = states.run(code, path, project, answer)
        tx.send((qid, "ok", value))
    except Exception as exc:
        tx.send((qid, "error", "%s: %s" % (type(exc).__name__, exc)))
    # the answer is out: collect this query's garbage and freeze what survives (jedistates.py,
    # FrozenHeap), unless the next query is already waiting
    if not rx.poll(0):
        heap.after_query()
"""


class JediProcessBackend:
    """jedi in a child process (see the module docstring); one query at a time."""

    name = "jedi-process"
    keeps_late_answers = True  # a query past its deadline still answers a later identical one

    def __init__(self, project_root: str | None = None):
        self.project_root = project_root
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._inflight: dict[int, bytes] = {}
        self._answers: OrderedDict = OrderedDict()
        self._proc = None
        self._conn = self._tx = None
        self._closed = False
        self._sent = 0.0
        self.restarts = -1
        self.prepared = 0  # buffers the child reported parsed ahead (see prepare)
        self._start()

    def _start(self) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        fast, states = os.path.join(here, "jedifast.py"), os.path.join(here, "jedistates.py")
        self._proc = subprocess.Popen([sys.executable, "-c", _CHILD, self.project_root or "", fast, states],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, close_fds=True)
        self._tx = Connection(os.dup(self._proc.stdin.fileno()), readable=False)
        self._conn = Connection(os.dup(self._proc.stdout.fileno()), writable=False)
        self._proc.stdin.close()
        self._proc.stdout.close()
        self._inflight.clear()
        self.restarts += 1

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(1.0)
        for c in (self._conn, self._tx):
            if c is not None and not c.closed:
                c.close()

    def _keep(self, key: bytes, value) -> None:
        self._answers[key] = value
        while len(self._answers) > _ANSWER_ENTRIES:
            self._answers.popitem(last=False)

    def _receive(self, t_end: float):
        """One message, or None at ``t_end``."""
        if not self._conn.poll(max(0.0, t_end - time.monotonic())):
            return None
        return self._conn.recv()

    def _query(self, kind: str, code: str, line: int, column: int, path, deadline_s: float):
        if deadline_s <= 0:
            raise ValueError("deadline_s must be > 0")
        if self._closed:
            raise AnalysisError("the jedi process back end was closed")
        key = hashlib.blake2b(repr((kind, code, line, column, path)).encode("utf-8", "surrogatepass"),
                              digest_size=16).digest()
        t_end = time.monotonic() + deadline_s
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key]
            try:
                if not self._alive():
                    self._kill()
                    self._start()
                if self._inflight and time.monotonic() - self._sent > RUNAWAY_S:
                    self._kill()
                    self._start()
                if not self._drain(t_end):
                    raise AnalysisTimeout(f"the previous analysis was still running after {deadline_s:.3f} s")
                if key in self._answers:  # the late answer was this very question's
                    return self._answers[key]
                qid = next(self._ids)
                self._tx.send((qid, kind, code, line, column, buffer_path(path)))
                self._sent = time.monotonic()
                self._inflight[qid] = key
                msg = self._receive(t_end)
                if msg is None:
                    raise AnalysisTimeout(f"analysis did not finish within {deadline_s:.3f} s")
                self._inflight.pop(msg[0], None)
            except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
                self._proc = None
                raise AnalysisError(f"the jedi process died: {type(exc).__name__}: {exc}") from exc
            if msg[1] != "ok":
                raise AnalysisError(f"analysis failed: {msg[2]}")
            value = self._decode(key, msg[2])
            self._keep(key, value)
            return value

    def _drain(self, t_end: float) -> bool:
        """Read the answers of earlier questions (queries past their deadline, parses ahead)
        until none is outstanding; False if one is still out at ``t_end``."""
        while self._inflight:
            msg = self._receive(t_end)
            if msg is None:
                return False
            late_key = self._inflight.pop(msg[0], None)
            if late_key == _PARSE:
                self.prepared += msg[1] == "ok" and msg[2] is True
            elif late_key is not None and msg[1] == "ok":
                self._keep(late_key, self._decode(late_key, msg[2]))
        return True

    def prepare(self, code: str, *, path: str | None, deadline_s: float = PREPARE_S, wait: bool = False) -> bool:
        """Have the child parse the buffer ``code`` of ``path`` ahead of the queries on it (see
        :meth:`.analysis.JediBackend.prepare`). The caller does not wait for the parse (the next
        query does, within its own deadline) unless ``wait``: then it waits up to ``deadline_s``
        and returns whether the parse finished. Skipped while the child is still busy with an
        earlier question, so an editor's stream of changes never queues up. Returns whether the
        buffer was sent (None ``path``: never)."""
        bp = buffer_path(path)
        if bp is None or self._closed or not self._lock.acquire(timeout=deadline_s):
            return False
        try:
            if not self._alive():
                self._kill()
                self._start()
            if not self._drain(time.monotonic()):
                return False
            qid = next(self._ids)
            self._tx.send((qid, "prepare", code, 0, 0, bp))
            self._sent = time.monotonic()
            self._inflight[qid] = _PARSE
            return self._drain(time.monotonic() + deadline_s) if wait else True
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
            self._proc = None
            raise AnalysisError(f"the jedi process died: {type(exc).__name__}: {exc}") from exc
        finally:
            self._lock.release()

    def _decode(self, key: bytes, value):
        if value and isinstance(value[0], tuple):  # signatures as plain tuples
            return [Signature(name, tuple(Param(*p) for p in ps)) for name, ps in value]
        return value

    def attributes(self, code, line, column, *, path, deadline_s):
        """Names jedi lists at the cursor (None when it lists none)."""
        return self._query("attributes", code, line, column, path, deadline_s) or None

    def signature(self, code, line, column, *, path, deadline_s):
        """The one signature jedi gives at the cursor (None: none, or different overloads)."""
        sigs = self._query("signature", code, line, column, path, deadline_s)
        if not sigs or len(set(sigs)) != 1:
            return None
        return sigs[0]

    def forget_answers(self) -> None:
        """Drop the answers kept for repeated questions (see :meth:`.analysis.JediBackend.forget_answers`)."""
        with self._lock:
            self._answers.clear()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Stop the child process."""
        if self._closed:
            return
        self._closed = True
        if self._alive():
            try:
                self._tx.send(None)
                self._proc.wait(1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter shutdown
            pass
