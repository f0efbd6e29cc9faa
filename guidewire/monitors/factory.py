"""``create_monitor``: a monitor by name, with its analysis back end."""

from __future__ import annotations

from ..core.vocab import Vocab
from .analysis import Backend, JediBackend
from .base import Monitor

MONITORS = ("dereference", "arity")
BACKENDS = ("jedi", "lsp")


def make_backend(backend: str | Backend = "jedi", *, project_root: str | None = None) -> Backend:
    """An analysis back end: ``"jedi"`` (in-process), ``"lsp"`` (jedi-language-server through
    multilspy, see :class:`~.lsp.LspBackend`) or a :class:`~.analysis.Backend` object as is."""
    if not isinstance(backend, str):
        return backend
    if backend == "jedi":
        return JediBackend(project_root)
    if backend == "lsp":
        from .lsp import LspBackend

        return LspBackend(project_root)
    raise ValueError(f"unknown monitor backend {backend!r}; expected one of {BACKENDS}")


def create_monitor(name: str, *, vocab: Vocab, prefix: str, suffix: str = "", path: str | None = None,
                   project_root: str | None = None, deadline_s: float = 0.5,
                   backend: str | Backend = "jedi") -> Monitor:
    """A monitor named ``name`` (``"dereference"`` or ``"arity"``) over the buffer ``prefix``.

    ``suffix`` is the text after the cursor (given to the analysis), ``path`` where the buffer
    lives and ``project_root`` the project it belongs to (so imports resolve; the buffer itself is
    what is analysed, never the file on disk), ``deadline_s`` the limit of each analysis query
    (past it the monitor abstains for that trigger), ``backend`` ``"jedi"``, ``"lsp"`` or a
    back-end object (share one between monitors to share its process or server).
    """
    if name not in MONITORS:
        raise ValueError(f"unknown monitor {name!r}; expected one of {MONITORS}")
    be = make_backend(backend, project_root=project_root)
    kw = dict(suffix=suffix, path=path, backend=be, deadline_s=deadline_s)
    if name == "dereference":
        from .dereference import DereferenceMonitor

        return DereferenceMonitor(vocab, prefix, **kw)
    from .arity import ArityMonitor

    return ArityMonitor(vocab, prefix, **kw)
