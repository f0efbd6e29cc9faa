"""The ``guidewire sql`` subcommand: ``guidewire sql DATABASE "question" [--execute] [--candidates K]``."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub) -> argparse.ArgumentParser:
    """Register ``sql`` on the ``guidewire`` command's subparsers."""
    p = sub.add_parser("sql", help="answer a question with one SELECT over a live database")
    p.add_argument("database", help="a SQLite file or a SQLAlchemy URL (postgresql+psycopg://...)")
    p.add_argument("question")
    p.add_argument("--execute", action="store_true", help="run the query (read-only) and print its rows")
    p.add_argument("--candidates", type=int, default=1, help="generate K queries, choose by execution outcome")
    p.add_argument("--policy", choices=["first", "vote"], default="vote",
                   help="vote (default: better on Spider) or first-with-rows")
    p.add_argument("--model", default=None)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--max-rows", type=int, default=100)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print the result (and candidates) as JSON")
    return p


def run(args) -> int:
    """Execute ``guidewire sql``; returns the exit status (errors propagate to the caller).

    Arguments and a local database file are checked before torch or a model is loaded."""
    import os

    if args.candidates < 1 or args.max_tokens < 1 or args.max_rows < 1:
        raise ValueError("--candidates, --max-tokens and --max-rows must be >= 1")
    if "://" not in args.database and not os.path.exists(args.database):
        from .errors import DatabaseError

        raise DatabaseError(f"database file {args.database!r} does not exist (give a SQLite file or a SQLAlchemy URL)")

    from ..runtime.loading import set_num_threads
    from .pipeline import text_to_sql

    set_num_threads(args.threads)
    execute = args.execute or args.candidates > 1
    r = text_to_sql(args.question, args.database, model=args.model, candidates=args.candidates,
                    temperature=args.temperature, seed=args.seed, execute=execute, policy=args.policy,
                    max_tokens=args.max_tokens, max_rows=args.max_rows)
    if args.json:
        print(json.dumps({"sql": r.sql, "rows": r.rows, "error": r.error,
                          "candidates": [{"sql": c.sql, "outcome": c.outcome} for c in r.candidates]}, default=str))
        return 0 if r.error is None else 1
    print(r.sql)
    if args.execute:
        if r.error is not None:
            print(f"error: {r.error}", file=sys.stderr)
            return 1
        for row in r.rows or []:
            print("\t".join("NULL" if v is None else str(v) for v in row))
    return 0
