"""The ``guidewire lsp`` subcommand (pygls is imported only when it runs)."""

from __future__ import annotations

import logging


def add_lsp_parser(sub):
    """Register ``lsp`` on the ``guidewire`` command's subparsers."""
    p = sub.add_parser("lsp", help="language server over stdio (textDocument/inlineCompletion)")
    p.add_argument("--model", default=None, help="smollm2 (default), gemma3, a model dir or a .gguf file")
    p.add_argument("--monitors", default="dereference", help="comma-separated monitor names ('' for none)")
    p.add_argument("--max-tokens", type=int, default=64, help="tokens per completion (default 64)")
    p.add_argument("--latency-budget-ms", type=float, default=2000.0,
                   help="time per completion before it returns what it has (default 2000)")
    p.add_argument("--max-prompt-tokens", type=int, default=1024, help="context tokens (default 1024)")
    p.add_argument("--monitor-backend", default="jedi-process", choices=("jedi-process", "jedi", "lsp"),
                   help="the monitors' analysis back end (default jedi-process: jedi in a child process)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    return p


def run_lsp(args) -> int:
    """Serve the language server on stdin/stdout until the client exits."""
    if args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    if args.latency_budget_ms <= 0:
        raise ValueError(f"--latency-budget-ms must be > 0, got {args.latency_budget_ms}")
    if args.max_prompt_tokens < 8:
        raise ValueError(f"--max-prompt-tokens must be >= 8, got {args.max_prompt_tokens}")
    from ..core.errors import GuidewireError
    from ..runtime.loading import set_num_threads

    try:
        from .lsp import LspConfig, create_server
    except ModuleNotFoundError as exc:
        if exc.name not in ("pygls", "lsprotocol"):
            raise
        raise GuidewireError(f"guidewire lsp needs {exc.name}: pip install 'guidewire[ide]'") from None

    set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    monitors = tuple(m.strip() for m in args.monitors.split(",") if m.strip())
    cfg = LspConfig(model=args.model, monitors=monitors, max_tokens=args.max_tokens,
                    latency_budget_ms=args.latency_budget_ms, max_prompt_tokens=args.max_prompt_tokens,
                    backend=args.monitor_backend)
    # the model and the workspace's analysis back end are warmed up at ``initialize`` (ide.lsp)
    create_server(cfg).start_io()
    return 0
