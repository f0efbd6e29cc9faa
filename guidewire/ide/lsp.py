"""``guidewire lsp``: a language server over stdio answering ``textDocument/inlineCompletion``.

Built on pygls. Each inline-completion request runs :func:`guidewire.complete_code` on the text
before and after the cursor (the buffer as the editor has it, open documents synced in full or
incrementally) in a worker thread. ``$/cancelRequest`` sets the request's cancel flag, which the
decoder checks between steps, so a cancelled request stops decoding at once (the client gets the
RequestCancelled error); a latency budget per request (``latencyBudgetMs``) ends decoding with
what is there. Requests are decoded one at a time. ``guidewire/stats`` (a custom request) returns
the stats of the last completions, newest last (``request`` numbers the inline-completion
requests from 1). Open Python documents are parsed in the analysis back end as they are opened
and changed, while no completion runs (:mod:`guidewire.ide.docsync`), so a trigger re-parses
only what was edited since; ``guidewire/documents`` returns that sync's counters. The workspace
root's back end is warmed up at ``initialize`` (with the model load, before the first request).

Configuration (command-line flags, overridden per client by ``initializationOptions``):
``model``, ``monitors`` (names), ``maxTokens``, ``latencyBudgetMs``, ``temperature``,
``maxPromptTokens``, ``monitorBackend`` (the monitors' analysis back end: ``"jedi-process"`` by
default -- jedi in a child process per workspace: strict deadlines, no interpreter lock shared with
decoding, p95 38.5 against 50.2 ms in-process on the synced dot-completion bench -- or ``"jedi"``,
``"lsp"``).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from dataclasses import dataclass, field, replace

from lsprotocol import types as lsp
from pygls.server import LanguageServer

from .. import __version__
from ..monitors.factory import BACKENDS, prepare_buffer
from .docsync import DocumentPreparer

STATS_REQUEST = "guidewire/stats"
DOCUMENTS_REQUEST = "guidewire/documents"
_KEEP_STATS = 32


@dataclass(frozen=True)
class LspConfig:
    """Per-server completion settings (see the module docstring)."""

    model: str | None = None
    monitors: tuple[str, ...] = ("dereference",)
    max_tokens: int = 64
    latency_budget_ms: float | None = 2000.0
    temperature: float = 0.0
    max_prompt_tokens: int | None = 1024
    backend: str = "jedi-process"

    def updated(self, options) -> "LspConfig":
        """This config with a client's ``initializationOptions`` applied (a dict; unknown keys are
        refused with ``ValueError`` naming them)."""
        if not options:
            return self
        if not isinstance(options, dict):
            raise ValueError("initializationOptions must be an object")
        keys = {"model": "model", "monitors": "monitors", "maxTokens": "max_tokens",
                "latencyBudgetMs": "latency_budget_ms", "temperature": "temperature",
                "maxPromptTokens": "max_prompt_tokens", "monitorBackend": "backend"}
        unknown = sorted(set(options) - set(keys))
        if unknown:
            raise ValueError(f"unknown initializationOptions {unknown}; known: {sorted(keys)}")
        new = {keys[k]: v for k, v in options.items()}
        if "monitors" in new:
            m = new["monitors"]
            if not isinstance(m, list) or not all(isinstance(x, str) and x for x in m):
                raise ValueError("initializationOptions.monitors must be a list of monitor names")
            new["monitors"] = tuple(m)
        for k, lo in (("max_tokens", 1), ("max_prompt_tokens", 8)):
            v = new.get(k)
            if k in new and v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < lo):
                raise ValueError(f"initializationOptions.{k} must be an integer >= {lo}")
        v = new.get("latency_budget_ms")
        if "latency_budget_ms" in new and v is not None and (not isinstance(v, (int, float)) or v <= 0):
            raise ValueError("initializationOptions.latencyBudgetMs must be a number > 0 or null")
        t = new.get("temperature", 0.0)
        if not isinstance(t, (int, float)) or t < 0:
            raise ValueError("initializationOptions.temperature must be a number >= 0")
        if "model" in new and new["model"] is not None and not isinstance(new["model"], str):
            raise ValueError("initializationOptions.model must be a string")
        if "backend" in new and new["backend"] not in BACKENDS:
            raise ValueError(f"initializationOptions.monitorBackend must be one of {list(BACKENDS)}")
        return replace(self, **new)


@dataclass
class _State:
    config: LspConfig
    config_error: str | None = None
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: collections.deque = field(default_factory=lambda: collections.deque(maxlen=_KEEP_STATS))
    docs: DocumentPreparer | None = None


def _complete(state: _State, prefix: str, suffix: str, path: str | None, root: str | None,
              cancel: threading.Event, request_id) -> str:
    from ..code_completion import complete_code

    cfg = state.config
    with state.lock:
        if cancel.is_set():
            state.stats.append({"request": request_id, "finish_reason": "cancelled", "completion_tokens": 0})
            return ""
        out = complete_code(prefix, suffix=suffix, path=path, project_root=root, monitors=cfg.monitors,
                            model=cfg.model, max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                            max_prompt_tokens=cfg.max_prompt_tokens, cancel=cancel, monitor_backend=cfg.backend,
                            time_limit_s=None if cfg.latency_budget_ms is None else cfg.latency_budget_ms / 1e3)
    state.stats.append({"request": request_id, "finish_reason": out.finish_reason, **out.stats.as_dict()})
    return out.text


def _warm(state: _State, root: str | None) -> None:
    """Load the model, and warm up the analysis back end of the workspace ``root`` (the one its
    completions use: jedi's builtins and typing stubs), before the first request (which waits
    for both instead of spending its budget on them)."""
    from ..core.errors import GuidewireError
    from ..runtime.registry import get_model

    with state.lock:
        try:
            get_model(state.config.model)
        except Exception as exc:  # noqa: BLE001 - reported again, to the client, by the first request
            logging.getLogger(__name__).warning("guidewire lsp: cannot load the model: %s", exc)
        if state.config.monitors:
            from ..monitors import warm_up_backend

            try:
                warm_up_backend(state.config.backend, project_root=root)
            except GuidewireError as exc:  # stdout is the protocol: said in the log, not fatal
                logging.getLogger(__name__).warning("guidewire lsp: monitors not warmed up: %s", exc)


def _is_python(doc) -> bool:
    return doc.language_id == "python" or str(doc.path or "").endswith((".py", ".pyi"))


def create_server(config: LspConfig | None = None) -> LanguageServer:
    """The guidewire language server (not started; call ``start_io()``)."""
    server = LanguageServer("guidewire", __version__)
    state = _State(config or LspConfig())
    server.guidewire_state = state
    # open Python documents parsed as they change, while no completion runs (ide.docsync)
    docs = state.docs = DocumentPreparer(busy=state.lock.locked, prepare=lambda text, *, path, project_root:
                                         prepare_buffer(text, path=path, project_root=project_root,
                                                        backend=state.config.backend))

    def _sync(ls: LanguageServer, uri: str) -> None:
        doc = ls.workspace.get_text_document(uri)
        if state.config.monitors and _is_python(doc):
            docs.note(uri, doc.source, doc.path, ls.workspace.root_path)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def _did_open(ls: LanguageServer, params: lsp.DidOpenTextDocumentParams):
        _sync(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def _did_change(ls: LanguageServer, params: lsp.DidChangeTextDocumentParams):
        _sync(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def _did_close(ls: LanguageServer, params: lsp.DidCloseTextDocumentParams):
        docs.forget(params.text_document.uri)

    @server.feature(lsp.SHUTDOWN)
    def _shutdown(ls: LanguageServer, params=None):
        docs.close()

    @server.feature(lsp.INITIALIZE)
    def _initialize(ls: LanguageServer, params: lsp.InitializeParams):
        # pygls 1.3 builds no inlineCompletionProvider capability itself: add it to the reply
        ls.lsp.server_capabilities.inline_completion_provider = lsp.InlineCompletionOptions()
        try:
            state.config = state.config.updated(params.initialization_options)
        except ValueError as exc:   # pygls swallows errors here: answer every completion with it
            state.config_error = f"guidewire: bad initializationOptions: {exc}"
            ls.show_message_log(state.config_error, lsp.MessageType.Error)
            return
        threading.Thread(target=_warm, args=(state, ls.workspace.root_path), name="guidewire-lsp-warm",
                         daemon=True).start()

    @server.feature(lsp.TEXT_DOCUMENT_INLINE_COMPLETION)
    async def _inline(ls: LanguageServer, params: lsp.InlineCompletionParams):
        if state.config_error:
            raise ValueError(state.config_error)
        state.requests += 1
        request_id = state.requests
        doc = ls.workspace.get_text_document(params.text_document.uri)
        source = doc.source
        offset = min(doc.offset_at_position(params.position), len(source))
        cancel = threading.Event()
        loop = asyncio.get_running_loop()
        root = ls.workspace.root_path
        fut = loop.run_in_executor(None, _complete, state, source[:offset], source[offset:], doc.path, root,
                                   cancel, request_id)
        try:
            text = await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.set()           # the worker stops decoding before its next step
            raise
        if not text:
            return lsp.InlineCompletionList(items=[])
        where = lsp.Range(start=params.position, end=params.position)
        return lsp.InlineCompletionList(items=[lsp.InlineCompletionItem(insert_text=text, range=where)])

    @server.feature(STATS_REQUEST)
    def _stats(ls: LanguageServer, params=None):
        return list(state.stats)

    @server.feature(DOCUMENTS_REQUEST)
    def _documents(ls: LanguageServer, params=None):
        return {"prepared": docs.prepared, "declined": docs.declined, "failed": docs.failed,
                "dropped": docs.dropped, "pending": docs.pending, "seconds": round(docs.seconds, 6)}

    return server
