"""``guidewire`` command line: constrained generation and benchmarks.

    guidewire json SCHEMA_FILE "PROMPT"
    guidewire generate "PROMPT" [--regex R | --grammar FILE.lark | --json-schema FILE | --choices a,b,c]
    guidewire sql DATABASE "QUESTION" [--execute] [--candidates K]
    guidewire bench maskbench|spider ARGS...

Common flags: ``--model``, ``--max-tokens``, ``--temperature``, ``--seed``, ``--top-p``,
``--stream``, ``--raw`` (no chat template), ``--quiet``. Progress (model load, compile) goes to
stderr; guidewire errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

EXIT_ERROR = 2


class Spinner:
    """A context manager that shows ``label`` with a spinner on stderr while work runs.

    On a terminal the spinner animates; otherwise one line is printed when the work is done.
    Silent when ``enabled`` is False.
    """

    def __init__(self, label: str, enabled: bool = True, stream=None):
        self.label = label
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _spin(self) -> None:
        for ch in itertools.cycle("|/-\\"):
            if self._stop.wait(0.1):
                break
            self.stream.write(f"\r{ch} {self.label} {time.monotonic() - self._t0:4.1f}s")
            self.stream.flush()

    def __enter__(self) -> "Spinner":
        self._t0 = time.monotonic()
        if self.enabled and self.stream.isatty():
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.stream.write("\r\033[K")
        if self.enabled:
            status = "done" if exc_type is None else "failed"
            self.stream.write(f"guidewire: {self.label} {status} ({time.monotonic() - self._t0:.1f}s)\n")
            self.stream.flush()


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="smollm2 (default), gemma3, a model dir or a .gguf file")
    p.add_argument("--max-tokens", type=int, default=None, help="token budget (json: 512, generate: 256)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=None, help="makes sampling reproducible")
    p.add_argument("--stream", action="store_true", help="print text as it is generated")
    p.add_argument("--raw", action="store_true", help="do not wrap the prompt in the chat template")
    p.add_argument("--system", default=None, help="system message for the chat template")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: $GUIDEWIRE_NUM_THREADS or torch's default)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    p.add_argument("--speculative", nargs="?", const=True, default=False, metavar="DRAFTERS",
                   help="speculative decoding (same output, fewer forwards); optional drafter list, "
                        "default forced,copy,lookup,sam")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``guidewire`` command."""
    parser = argparse.ArgumentParser(prog="guidewire", description="Structured decoding with exact token masks.")
    sub = parser.add_subparsers(dest="command", required=True)
    pj = sub.add_parser("json", help="generate a JSON value valid for a JSON Schema file")
    pj.add_argument("schema_file", help="JSON Schema file ('-' reads stdin)")
    pj.add_argument("prompt")
    pj.add_argument("--indent", type=int, default=None, help="pretty-print the validated value")
    pj.add_argument("--any-order", action="store_true", help="allow object properties in any order")
    pj.add_argument("--lenient", action="store_true", help="over-approximate unsupported keywords")
    _common(pj)
    pg = sub.add_parser("generate", help="generate text, optionally constrained")
    pg.add_argument("prompt")
    group = pg.add_mutually_exclusive_group()
    group.add_argument("--regex", help="the output must fully match this regex (Python syntax)")
    group.add_argument("--grammar", help="a Lark grammar file, or json / sql / arithmetic")
    group.add_argument("--json-schema", help="a JSON Schema file")
    group.add_argument("--choices", help="comma-separated list; the output is exactly one of them")
    _common(pg)
    from .sql.cli import add_parser as _add_sql_parser

    _add_sql_parser(sub)
    pb = sub.add_parser("bench", help="run a benchmark")
    pb.add_argument("name", choices=["maskbench", "spider"])
    pb.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    return parser


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def _read_schema(path: str):
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        from .core.errors import GuidewireError

        raise GuidewireError(f"{path}: not valid JSON ({exc})") from None


def _prepare(args, kind, spec, options):
    """Compile the constraint (before loading weights, so grammar errors surface fast), then load."""
    from . import api

    from .runtime.loading import set_num_threads

    set_num_threads(args.threads)
    loud = not args.quiet
    grammar = None
    if kind is not None:
        vocab = api.get_vocab(args.model)  # cheap for named models: no weights loaded
        with Spinner(f"compiling {kind.replace('_', ' ')}", loud):
            grammar = api.get_grammar(kind, spec, vocab, **options)
    with Spinner(f"loading model {args.model or 'smollm2'}", loud):
        lm = api.get_model(args.model)
    if grammar is not None and grammar.vocab.content_hash != lm.vocab.content_hash:
        grammar = api.get_grammar(kind, spec, lm.vocab, **options)
    return lm, grammar


def _decode(args, lm, grammar, max_tokens: int, check):
    """Run generation; print the stream if asked; return the finished result (after ``check``)."""
    from .api import _sampling, speculation_drafter
    from .runtime.decode import TextStream, iter_decode
    from .runtime.speculative import iter_speculative_decode

    ids = lm.encode_prompt(args.prompt, chat=not args.raw, system=args.system)
    sampling = _sampling(args.temperature, args.top_p, args.top_k, args.min_p, args.seed)
    constraint = None if grammar is None else grammar.matcher()
    drafter = speculation_drafter(lm, args.speculative)
    if drafter is not None:
        steps = iter_speculative_decode(lm.sequence(), ids, constraint, vocab=lm.vocab, drafter=drafter,
                                        max_tokens=max_tokens, sampling=sampling)
    else:
        steps = iter_decode(lm.sequence(), ids, constraint, vocab=lm.vocab, max_tokens=max_tokens,
                            sampling=sampling)
    stream = TextStream(steps, lm.vocab)
    for delta in stream:
        if args.stream:
            sys.stdout.write(delta)
            sys.stdout.flush()
    if args.stream:
        sys.stdout.write("\n")
    return check(stream.result)


def _cmd_json(args) -> int:
    from .api import validate_json_output

    schema = _read_schema(args.schema_file)
    options = {}
    if args.any_order:
        options["any_order"] = True
    if args.lenient:
        options["lenient"] = True
    lm, grammar = _prepare(args, "json_schema", schema, options)
    value = _decode(args, lm, grammar, args.max_tokens or 512, lambda r: validate_json_output(schema, r))
    if not args.stream:
        print(json.dumps(value, ensure_ascii=False, indent=args.indent))
    return 0


def _cmd_generate(args) -> int:
    from .api import _require_complete, validate_json_output
    from .runtime.errors import OutputValidationError

    kind, spec = None, None
    if args.regex is not None:
        kind, spec = "regex", args.regex
    elif args.grammar is not None:
        from .api import BUILTIN_GRAMMARS

        kind, spec = "lark", args.grammar if args.grammar in BUILTIN_GRAMMARS else _read_text(args.grammar)
    elif args.json_schema is not None:
        kind, spec = "json_schema", _read_schema(args.json_schema)
    elif args.choices is not None:
        kind, spec = "choices", [c for c in args.choices.split(",")]
    lm, grammar = _prepare(args, kind, spec, {})

    def _check(result):
        if kind is None:
            return result.text
        _require_complete(result, "output")
        if kind == "json_schema":
            validate_json_output(spec, result)
        if kind == "choices" and result.text not in spec:
            raise OutputValidationError(f"output {result.text!r} is not one of the choices", result)
        return result.text

    text = _decode(args, lm, grammar, args.max_tokens or 256, _check)
    if not args.stream:
        print(text)
    return 0


def _cmd_bench(args) -> int:
    if args.name == "maskbench":
        from .maskbench import main as maskbench_main

        return int(maskbench_main(list(args.args)) or 0)
    if args.name == "spider":
        from .sql.bench import main as spider_main

        return int(spider_main(list(args.args)) or 0)
    return EXIT_ERROR  # pragma: no cover (argparse restricts the choices)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``guidewire`` console script; returns the exit status."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    from .core.errors import GuidewireError

    try:
        if args.command == "json":
            return _cmd_json(args)
        if args.command == "generate":
            return _cmd_generate(args)
        if args.command == "sql":
            from .sql.cli import run as _cmd_sql

            return _cmd_sql(args)
        return _cmd_bench(args)
    except GuidewireError as exc:
        print(f"guidewire: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except (OSError, ValueError) as exc:
        print(f"guidewire: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("guidewire: interrupted", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if len(text) <= 500 else text[:497] + "..."


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
