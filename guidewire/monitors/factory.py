"""``create_monitor``: a monitor by name, with its analysis back end."""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import OrderedDict

from ..core.vocab import Vocab
from .analysis import PREPARE_S, Backend, JediBackend
from .base import Monitor

MONITORS = ("dereference", "arity")
_LSP_SERVERS = 2  # language servers kept running per process (one per project root)
_lsp: OrderedDict = OrderedDict()
_lsp_lock = threading.Lock()
_JEDI_ROOTS = 8
_jedi: OrderedDict = OrderedDict()
BACKENDS = ("jedi", "jedi-process", "lsp")


def _shared_jedi(project_root: str | None) -> JediBackend:
    """The process's jedi back end for ``project_root`` (an LRU of ``_JEDI_ROOTS``), so repeated
    requests on one buffer share its answer cache."""
    key = os.path.abspath(project_root) if project_root else None
    with _lsp_lock:
        be = _jedi.get(key)
        if be is None:
            be = _jedi[key] = JediBackend(project_root)
            while len(_jedi) > _JEDI_ROOTS:
                _jedi.popitem(last=False)
        _jedi.move_to_end(key)
    return be


def _shared_server(kind: str, project_root: str | None):
    """The running server (language server or jedi process) for ``project_root`` (started on
    first use; the least recently used is shut down beyond ``_LSP_SERVERS``; all at exit)."""
    key = (kind, os.path.abspath(project_root) if project_root else None)
    with _lsp_lock:
        be = _lsp.get(key)
        if be is not None and not be.closed:
            _lsp.move_to_end(key)
            return be
        if kind == "lsp":
            from .lsp import LspBackend

            be = _lsp[key] = LspBackend(project_root)
        else:
            from .jediproc import JediProcessBackend

            be = _lsp[key] = JediProcessBackend(project_root)
        while len(_lsp) > _LSP_SERVERS:
            _lsp.popitem(last=False)[1].close()
        if len(_lsp) == 1:
            atexit.register(close_backends)
    return be


def close_backends() -> None:
    """Shut down the shared language servers."""
    with _lsp_lock:
        while _lsp:
            _lsp.popitem()[1].close()


def make_backend(backend: str | Backend = "jedi", *, project_root: str | None = None) -> Backend:
    """An analysis back end: ``"jedi"`` (in-process), ``"jedi-process"`` (jedi in a child process:
    strict deadlines, see :mod:`.jediproc`), ``"lsp"`` (jedi-language-server through
    multilspy, see :class:`~.lsp.LspBackend`); one per project root, shared by every monitor of
    the process (so one server, one answer cache), or a :class:`~.analysis.Backend` object as is."""
    if not isinstance(backend, str):
        return backend
    if backend == "jedi":
        return _shared_jedi(project_root)
    if backend in ("lsp", "jedi-process"):
        return _shared_server(backend, project_root)
    raise ValueError(f"unknown monitor backend {backend!r}; expected one of {BACKENDS}")


# dots whose answers load what nearly every query needs: jedi's builtins and typing stubs, os.path
_WARM_UP = ("x = ''\nx.", "x = b''\nx.", "x = []\nx.", "x = {}\nx.", "import os\nos.path.")


def warm_up_backend(backend: str | Backend = "jedi", *, project_root: str | None = None,
                    deadline_s: float = 30.0) -> float:
    """Ask the back end (as :func:`make_backend` resolves it) a few attribute questions about
    builtins, so that the first real trigger does not pay for loading jedi's builtins and typing
    stubs (a fresh process's first dot query: ~300 ms, ~15 ms after this). Servers call it at
    start-up, before freezing their heap. Returns the seconds spent; raises what the back end
    raises (:class:`~.analysis.AnalysisError`, :class:`~.analysis.AnalysisTimeout`)."""
    from .analysis import cursor

    be = make_backend(backend, project_root=project_root)
    t0 = time.monotonic()
    for code in _WARM_UP:
        line, column = cursor(code)
        be.attributes(code, line, column, path=None, deadline_s=deadline_s)
    return time.monotonic() - t0


def prepare_buffer(code: str, *, path: str | None, project_root: str | None = None,
                   backend: str | Backend = "jedi", deadline_s: float = PREPARE_S, wait: bool = False) -> bool:
    """Parse the buffer ``code`` of ``path`` in the analysis back end (as :func:`make_backend`
    resolves it for ``project_root``) ahead of completions on it: an editor calls this when it
    opens a document and as it changes (``guidewire lsp`` does, on ``didOpen``/``didChange``), so
    that a trigger in it re-parses only the lines edited since. Returns whether the back end took
    it (False for back ends without ``prepare``, a None ``path``, or a parse not done within
    ``deadline_s``: the next query then parses what it needs itself). ``wait``: return only once
    the parse is done (a child-process back end otherwise parses while the caller goes on)."""
    be = make_backend(backend, project_root=project_root)
    prepare = getattr(be, "prepare", None)
    if prepare is None:
        return False
    return bool(prepare(code, path=path, deadline_s=deadline_s, wait=wait))


def create_monitor(name: str, *, vocab: Vocab, prefix: str, suffix: str = "", path: str | None = None,
                   project_root: str | None = None, deadline_s: float = 0.5,
                   backend: str | Backend = "jedi", prefetch: bool = True, dot_follows: bool = False) -> Monitor:
    """A monitor named ``name`` (``"dereference"`` or ``"arity"``) over the buffer ``prefix``.

    ``suffix`` is the text after the cursor (given to the analysis), ``path`` where the buffer
    lives and ``project_root`` the project it belongs to (so imports resolve; the buffer itself is
    what is analysed, never the file on disk), ``deadline_s`` the limit of each analysis query
    (past it the monitor abstains for that trigger), ``backend`` ``"jedi"``, ``"jedi-process"``,
    ``"lsp"`` or a
    back-end object (share one between monitors to share its process or server); ``prefetch``
    starts each trigger's analysis on a thread as soon as the trigger fires, so that it runs while
    the model does (else it runs when the mask is asked for). ``dot_follows`` says the output
    starts with a ``.`` after ``prefix`` (token healing re-spells one): the dereference monitor
    then analyses that dot at once and allows tokens that start with it (``._``, ``.append``).
    """
    if name not in MONITORS:
        raise ValueError(f"unknown monitor {name!r}; expected one of {MONITORS}")
    be = make_backend(backend, project_root=project_root)
    kw = dict(suffix=suffix, path=path, backend=be, deadline_s=deadline_s, prefetch=prefetch)
    if name == "dereference":
        from .dereference import DereferenceMonitor

        return DereferenceMonitor(vocab, prefix, dot_follows=dot_follows, **kw)
    from .arity import ArityMonitor

    return ArityMonitor(vocab, prefix, **kw)
