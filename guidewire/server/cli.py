"""The ``guidewire serve`` subcommand (FastAPI + uvicorn)."""

from __future__ import annotations

import argparse
import sys


def add_serve_parser(sub) -> argparse.ArgumentParser:
    """Register ``serve`` on the ``guidewire`` command's subparsers."""
    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)")
    p.add_argument("--model", default=None, help="smollm2 (default), gemma3, a model dir or a .gguf file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=int, default=16, help="sequences decoded together (default 16)")
    p.add_argument("--max-queue", type=int, default=64, help="waiting requests before 429 (default 64)")
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds per request (default 300)")
    p.add_argument("--max-tokens", type=int, default=1024, help="default chat max_tokens (default 1024)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    return p


def run_serve(args) -> int:
    """Load the model and serve until interrupted."""
    for flag, v in (("--port", args.port), ("--max-batch", args.max_batch), ("--max-queue", args.max_queue),
                    ("--max-tokens", args.max_tokens)):
        if v < (0 if flag == "--port" else 1) or (flag == "--port" and v > 65535):
            raise ValueError(f"{flag} out of range: {v}")
    if args.time_limit <= 0:
        raise ValueError(f"--time-limit must be > 0, got {args.time_limit}")
    import uvicorn

    from ..runtime.loading import load_model
    from .app import create_app

    lm = load_model(args.model, num_threads=args.threads)
    app = create_app(lm, max_batch=args.max_batch, max_queue=args.max_queue, time_limit=args.time_limit,
                     default_max_tokens=args.max_tokens)
    print(f"guidewire: serving {lm.name} on http://{args.host}:{args.port}/v1", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
