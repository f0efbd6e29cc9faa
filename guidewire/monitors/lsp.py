"""A language-server back end through multilspy (jedi-language-server for Python).

multilspy starts and initialises the server and speaks the protocol; the buffer is sent with
``textDocument/didOpen`` / ``didChange`` (full text) under the never-imported sibling path of
:func:`~.analysis.buffer_path` (the file on disk is never read), and queries go straight to
``textDocument/completion`` and ``textDocument/signatureHelp``. multilspy's own
``request_completions`` is not used: it first waits for an ``experimental/serverStatus``
notification that only rust-analyzer sends, so with jedi-language-server it never returns. Every
request has the caller's deadline; a late one is cancelled on the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import pathlib
import re
import shutil
import tempfile
import threading

from .analysis import AnalysisError, AnalysisTimeout, Param, Signature, buffer_path

_KEYWORD_KIND = 14  # LSP CompletionItemKind.Keyword


class LspBackend:
    """jedi-language-server through multilspy (see the module docstring)."""

    name = "lsp"

    def __init__(self, project_root: str | None = None, *, start_timeout_s: float = 60.0,
                 server_binary: str | None = None):
        try:
            from multilspy import SyncLanguageServer
            from multilspy.multilspy_config import MultilspyConfig
            from multilspy.multilspy_logger import MultilspyLogger
        except ImportError as exc:  # pragma: no cover - the extra is installed in CI
            raise AnalysisError("the lsp back end needs multilspy: pip install 'guidewire[monitors]'") from exc
        binary = server_binary or shutil.which("jedi-language-server")
        if binary is None:
            raise AnalysisError("the lsp back end needs jedi-language-server on PATH")
        self._tmp = None
        if project_root is None:
            self._tmp = tempfile.mkdtemp(prefix="guidewire-lsp-")
            project_root = self._tmp
        self.project_root = os.path.abspath(project_root)
        config = MultilspyConfig.from_dict({"code_language": "python", "server_binary": binary})
        self._sls = SyncLanguageServer.create(config, MultilspyLogger(), self.project_root,
                                              timeout=int(max(1, start_timeout_s)))
        self._ctx = self._sls.start_server()
        try:
            self._ctx.__enter__()
        except BaseException as exc:
            self._cleanup_tmp()
            raise AnalysisError(f"jedi-language-server did not start: {type(exc).__name__}: {exc}") from exc
        self._server = self._sls.language_server.server
        self._loop = self._sls.loop
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _uri(self, path: str | None) -> str:
        p = buffer_path(path) if path else os.path.join(self.project_root, "__guidewire_buffer__.py")
        return pathlib.Path(p).as_uri()

    def _sync(self, uri: str, code: str) -> None:
        """Send the buffer (runs on the event loop)."""
        v = self._versions.get(uri)
        if v is None:
            self._server.notify.did_open_text_document({"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": code}})
            self._versions[uri] = 1
        else:
            self._versions[uri] = v + 1
            self._server.notify.did_change_text_document({
                "textDocument": {"uri": uri, "version": v + 1}, "contentChanges": [{"text": code}]})

    def _request(self, method: str, code: str, line: int, column: int, path, deadline_s: float):
        if self._closed:
            raise AnalysisError("the language server was closed")
        uri = self._uri(path)
        params = {"textDocument": {"uri": uri}, "position": {"line": line - 1, "character": column}}

        async def go():
            self._sync(uri, code)
            return await getattr(self._server.send, method)(params)

        with self._lock:
            fut = asyncio.run_coroutine_threadsafe(go(), self._loop)
            try:
                return fut.result(timeout=deadline_s)
            except (TimeoutError, concurrent.futures.TimeoutError) as exc:  # distinct before 3.11
                fut.cancel()
                raise AnalysisTimeout(f"{method} did not answer within {deadline_s:.3f} s") from exc
            except Exception as exc:  # noqa: BLE001 -- a protocol or server failure
                raise AnalysisError(f"{method} failed: {type(exc).__name__}: {exc}") from exc

    def attributes(self, code, line, column, *, path, deadline_s):
        """Names from ``textDocument/completion`` at the cursor (keywords dropped)."""
        res = self._request("completion", code, line, column, path, deadline_s)
        items = res.get("items", []) if isinstance(res, dict) else (res or [])
        names = []
        for it in items:
            if it.get("kind") == _KEYWORD_KIND:
                continue
            name = it.get("filterText") or it.get("label") or ""
            if name.isidentifier():
                names.append(name)
        return names or None

    def signature(self, code, line, column, *, path, deadline_s):
        """The active signature from ``textDocument/signatureHelp``, parameters parsed from labels."""
        res = self._request("signature_help", code, line, column, path, deadline_s)
        sigs = (res or {}).get("signatures") or []
        if len(sigs) != 1:
            return None
        return parse_signature_label(sigs[0])

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Shut the server down."""
        if not self._closed:
            self._closed = True
            try:
                self._ctx.__exit__(None, None, None)
            finally:
                self._cleanup_tmp()

    def _cleanup_tmp(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter shutdown
            pass


_NAME = re.compile(r"^\s*(\*{0,2})\s*([A-Za-z_][A-Za-z0-9_]*|)")


def parse_signature_label(sig: dict) -> Signature:
    """A :class:`~.analysis.Signature` from an LSP ``SignatureInformation``: parameter labels like
    ``a``, ``b=1``, ``c: int = 2``, ``*args``, ``**kw``, with ``/`` and ``*`` markers."""
    label = sig.get("label", "")
    labels = []
    for p in sig.get("parameters", []):
        lab = p.get("label", "")
        if isinstance(lab, list):  # [start, end] offsets into the signature label
            lab = label[lab[0]:lab[1]]
        labels.append(lab)
    name = label.split("(", 1)[0].strip().removeprefix("def ").removeprefix("class ").strip()
    params: list[Param] = []
    kind = "POSITIONAL_OR_KEYWORD"
    for lab in labels:
        s = lab.strip()
        if s.startswith("param "):
            s = s[len("param "):]
        if s == "/":
            params = [Param(p.name, "POSITIONAL_ONLY", p.has_default) for p in params]
            continue
        if s == "*":
            kind = "KEYWORD_ONLY"
            continue
        m = _NAME.match(s)
        stars, pname = m.group(1), m.group(2)
        if stars == "**":
            params.append(Param(pname, "VAR_KEYWORD", False))
        elif stars == "*":
            params.append(Param(pname, "VAR_POSITIONAL", False))
            kind = "KEYWORD_ONLY"
        else:
            params.append(Param(pname, kind, "=" in s[m.end():]))
    return Signature(name, tuple(params))
