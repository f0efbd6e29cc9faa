"""``guidewire`` command line: constrained generation and benchmarks.

    guidewire json SCHEMA_FILE "PROMPT"
    guidewire generate "PROMPT" [--regex R | --grammar FILE.lark | --json-schema FILE | --choices a,b,c]
    guidewire sql DATABASE "QUESTION" [--execute] [--candidates K]
    guidewire bench maskbench|spider|humaneval ARGS...

Common flags: ``--model``, ``--max-tokens``, ``--temperature``, ``--seed``, ``--top-p``,
``--top-k``, ``--min-p``, ``--stream``, ``--raw`` (no chat template), ``--speculative``
(``--drafters``), ``--quiet``, ``--verbose``. Every argument and input file is checked before
torch, transformers or a model is loaded; a bad one prints one line and exits with status 2, as
guidewire errors do. Progress (tokenizer, compile, model load) goes to stderr.
"""

from __future__ import annotations

import argparse
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


def _number(kind, lo=None, hi=None, lo_open=False, what=""):
    """An argparse ``type`` that parses ``kind`` and checks the range, so bad values exit 2 up front."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") \
                from None
        if value != value or value in (float("inf"), float("-inf")) \
                or (lo is not None and (value < lo or (lo_open and value == lo))) \
                or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be {what}")
        return value

    return parse


def _drafters(text: str) -> str:
    from ._checks import check_drafter_names

    try:
        check_drafter_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="smollm2 (default), gemma3, a model dir or a .gguf file")
    p.add_argument("--max-tokens", type=_number(int, 1, what=">= 1"), default=None,
                   help="most tokens to generate, >= 1 (json: 512, generate: 256); an output cut "
                        "short is an error, never a partial value")
    p.add_argument("--temperature", type=_number(float, 0.0, what=">= 0"), default=0.0,
                   help="sampling temperature >= 0; 0 = greedy (default)")
    p.add_argument("--top-p", type=_number(float, 0.0, 1.0, lo_open=True, what="in (0, 1]"), default=1.0,
                   help="nucleus sampling: keep the most likely tokens up to this mass, in (0, 1] "
                        "(default 1 = off)")
    p.add_argument("--top-k", type=_number(int, 0, what=">= 0"), default=0,
                   help="keep only the K most likely tokens (default 0 = off)")
    p.add_argument("--min-p", type=_number(float, 0.0, 1.0, what="in [0, 1]"), default=0.0,
                   help="drop tokens less likely than MIN_P times the most likely one, in [0, 1] "
                        "(default 0 = off)")
    p.add_argument("--seed", type=_number(int), default=None, help="makes sampling reproducible")
    p.add_argument("--stream", action="store_true", help="print text as it is generated")
    p.add_argument("--raw", action="store_true", help="do not wrap the prompt in the chat template")
    p.add_argument("--system", default=None, help="system message for the chat template")
    p.add_argument("--threads", type=_number(int, 1, what=">= 1"), default=None,
                   help="torch CPU threads (default: $GUIDEWIRE_NUM_THREADS or torch's default)")
    p.add_argument("--device", default=None,
                   help="where the model runs: cpu, cuda, cuda:N (default: $GUIDEWIRE_DEVICE or cpu)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="print tokens, model calls and tokens/s on stderr when generation ends")
    p.add_argument("--speculative", action="store_true",
                   help="speculative decoding: the same output in fewer model forwards")
    p.add_argument("--drafters", type=_drafters, default=None, metavar="NAMES",
                   help="drafters for --speculative (implies it), comma-separated from forced, copy, "
                        "lookup, sam (default: all four)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``guidewire`` command."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="guidewire", description="Structured decoding with exact token masks.")
    parser.add_argument("--version", action="version", version=f"guidewire {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    pj = sub.add_parser("json", help="generate a JSON value valid for a JSON Schema file",
                        description="Generate a JSON value valid for a JSON Schema; it is checked with "
                                    "jsonschema before it is printed.")
    pj.add_argument("schema_file", help="JSON Schema file ('-' reads stdin)")
    pj.add_argument("prompt", help="the instruction for the model (wrapped in its chat template unless --raw)")
    pj.add_argument("--indent", type=_number(int, 0, what=">= 0"), default=None,
                    help="pretty-print the validated value with this indent")
    pj.add_argument("--any-order", action="store_true", help="allow object properties in any order")
    pj.add_argument("--lenient", action="store_true",
                    help="over-approximate keywords that cannot be enforced exactly (listed on stderr)")
    _common(pj)
    pg = sub.add_parser("generate", help="generate text, optionally constrained",
                        description="Generate text, optionally constrained by a regex, a Lark grammar, a "
                                    "JSON Schema or a list of choices.")
    pg.add_argument("prompt", help="the instruction for the model (wrapped in its chat template unless --raw)")
    group = pg.add_mutually_exclusive_group()
    group.add_argument("--regex", help="the output must fully match this regex (Python syntax)")
    group.add_argument("--grammar", help="a Lark grammar file, or a built-in grammar: json, sql, arithmetic, python")
    group.add_argument("--json-schema", help="a JSON Schema file")
    group.add_argument("--choices", help="comma-separated list; the output is exactly one of them")
    _common(pg)
    from .sql.cli import add_parser as _add_sql_parser

    _add_sql_parser(sub)
    pb = sub.add_parser("bench", help="run a benchmark (guidewire bench maskbench --help)",
                        description="Run a benchmark; the arguments after its name go to it.")
    pb.add_argument("name", choices=["maskbench", "spider", "humaneval"],
                    help="maskbench: JSON-Schema token masks on MaskBench files; spider: text-to-SQL on Spider; "
                         "humaneval: code search methods on HumanEval")
    pb.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    from .server.cli import add_serve_parser

    add_serve_parser(sub)
    from .ide.cli import add_lsp_parser

    add_lsp_parser(sub)
    return parser


def _read_text(path: str, what: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _UsageError(f"{what} {path!r} not found") from None
    except IsADirectoryError:
        raise _UsageError(f"{what} {path!r} is a directory") from None
    except UnicodeDecodeError as exc:
        raise _UsageError(f"{what} {path!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_schema(path: str):
    text = _read_text(path, "schema file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _UsageError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _grammar_spec(name: str) -> str:
    """A built-in grammar's name or the text of a grammar file (a file wins over a built-in name)."""
    from ._checks import BUILTIN_GRAMMARS

    if name in BUILTIN_GRAMMARS:
        return name
    path = Path(name)
    if path.is_file():
        return _read_text(name, "grammar file")
    if name.lower() in BUILTIN_GRAMMARS:
        return name.lower()
    raise _UsageError(f"--grammar {name!r}: no such file, and not a built-in grammar "
                      f"(built-in: {', '.join(BUILTIN_GRAMMARS)})")


class _UsageError(Exception):
    """A bad argument or input file found before anything heavy is imported."""


def _tokenizer_label(model) -> str:
    from .core.vocab import _NAMED, cache_dir

    name = model or "smollm2"
    if name in _NAMED and not (cache_dir() / "vocabs" / f"{name}.npz").exists():
        return f"converting the {name} tokenizer from its GGUF (first run only; cached)"
    return f"loading tokenizer {name}"


def _model_label(model) -> str:
    from .core.vocab import _NAMED, cache_dir

    name = model or "smollm2"
    if name in _NAMED and not (cache_dir() / "models" / name / "guidewire_meta.json").exists():
        return f"converting the {name} model from its GGUF to float32 (first run only; cached)"
    return f"loading model {name}"


def _prepare(args, kind, spec, options):
    """Compile the constraint (before loading weights, so grammar errors surface fast), then load."""
    from . import api

    from .runtime.loading import resolve_device, set_num_threads

    set_num_threads(args.threads)
    if args.device is not None:   # checked before anything is compiled or loaded
        os.environ["GUIDEWIRE_DEVICE"] = str(resolve_device(args.device))
    loud = not args.quiet
    grammar = None
    if kind is not None:
        with Spinner(_tokenizer_label(args.model), loud):
            vocab = api.get_vocab(args.model)  # cheap for named models: no weights loaded
        with Spinner(f"compiling {kind.replace('_', ' ')}", loud):
            grammar = api.get_grammar(kind, spec, vocab, **options)
        for note in getattr(grammar, "notes", ()):
            if loud:
                print(f"guidewire: note: {note}", file=sys.stderr)
    with Spinner(_model_label(args.model), loud):
        lm = api.get_model(args.model)
    if grammar is not None and grammar.vocab.content_hash != lm.vocab.content_hash:
        grammar = api.get_grammar(kind, spec, lm.vocab, **options)
    return lm, grammar


def _speculative(args):
    if args.drafters is not None:
        return args.drafters
    return bool(args.speculative)


def _decode(args, lm, grammar, max_tokens: int, check):
    """Run generation; print the stream if asked; return the finished result (after ``check``)."""
    from .api import _sampling, speculation_drafter
    from .runtime.decode import TextStream, iter_decode
    from .runtime.speculative import iter_speculative_decode

    ids = lm.encode_prompt(args.prompt, chat=not args.raw, system=args.system)
    sampling = _sampling(args.temperature, args.top_p, args.top_k, args.min_p, args.seed)
    constraint = None if grammar is None else grammar.matcher()
    drafter = speculation_drafter(lm, _speculative(args))
    t0 = time.monotonic()
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
    if args.verbose:
        _report_speed(stream.result, time.monotonic() - t0)
    return check(stream.result)


def _report_speed(result, seconds: float) -> None:
    u = result.usage
    rate = u.completion_tokens / seconds if seconds > 0 else 0.0
    print(f"guidewire: {u.completion_tokens} tokens ({u.forced_tokens} forced) in {seconds:.1f}s, "
          f"{rate:.1f} tokens/s, {u.model_calls} model calls, finish_reason={result.finish_reason}",
          file=sys.stderr)


def _check_args(args, default_max_tokens: int) -> int:
    from ._checks import check_generation_args

    max_tokens = args.max_tokens or default_max_tokens
    check_generation_args(max_tokens=max_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, min_p=args.min_p, seed=args.seed, speculative=_speculative(args))
    return max_tokens


def _cmd_json(args) -> int:
    schema = _read_schema(args.schema_file)
    max_tokens = _check_args(args, 512)
    options = {}
    if args.any_order:
        options["any_order"] = True
    if args.lenient:
        options["lenient"] = True
    from .api import generation_schema_options, validate_json_output

    lm, grammar = _prepare(args, "json_schema", schema, generation_schema_options(options))
    value = _decode(args, lm, grammar, max_tokens, lambda r: validate_json_output(schema, r))
    if not args.stream:
        print(json.dumps(value, ensure_ascii=False, indent=args.indent))
    return 0


def _cmd_generate(args) -> int:
    kind, spec = None, None
    if args.regex is not None:
        kind, spec = "regex", args.regex
    elif args.grammar is not None:
        kind, spec = "lark", _grammar_spec(args.grammar)
    elif args.json_schema is not None:
        kind, spec = "json_schema", _read_schema(args.json_schema)
    elif args.choices is not None:
        kind, spec = "choices", [c for c in args.choices.split(",")]
        if not all(spec):
            raise _UsageError(f"--choices {args.choices!r}: empty choice (the list is comma-separated)")
    max_tokens = _check_args(args, 256)
    from .api import _require_complete, generation_schema_options, validate_json_output
    from .runtime.errors import OutputValidationError

    lm, grammar = _prepare(args, kind, spec, generation_schema_options({}) if kind == "json_schema" else {})

    def _check(result):
        if kind is None:
            return result.text
        _require_complete(result, "output")
        if kind == "json_schema":
            validate_json_output(spec, result)
        if kind == "choices" and result.text not in spec:
            raise OutputValidationError(f"output {result.text!r} is not one of the choices", result)
        return result.text

    text = _decode(args, lm, grammar, max_tokens, _check)
    if not args.stream:
        print(text)
    return 0


def _cmd_bench(args) -> int:
    if args.name == "maskbench":
        from .maskbench import main as maskbench_main

        return int(maskbench_main(list(args.args), prog="guidewire bench maskbench") or 0)
    if args.name == "spider":
        from .sql.bench import main as spider_main

        return int(spider_main(list(args.args)) or 0)
    if args.name == "humaneval":
        from .search.humaneval_bench import main as humaneval_main

        return int(humaneval_main(list(args.args)) or 0)
    return EXIT_ERROR  # pragma: no cover (argparse restricts the choices)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``guidewire`` console script; returns the exit status."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    try:
        if args.command == "json":
            return _cmd_json(args)
        if args.command == "generate":
            return _cmd_generate(args)
        if args.command == "serve":
            from .server.cli import run_serve

            return run_serve(args)
        if args.command == "lsp":
            from .ide.cli import run_lsp

            return run_lsp(args)
        if args.command == "sql":
            from .sql.cli import run as _cmd_sql

            return _cmd_sql(args)
        return _cmd_bench(args)
    except _UsageError as exc:
        print(f"guidewire: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("guidewire: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - sorted below; anything else propagates
        from .core.errors import GuidewireError

        if isinstance(exc, GuidewireError):
            print(f"guidewire: error: {type(exc).__name__}: {_cli_words(_one_line(exc))}", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(exc, (OSError, ValueError)):
            print(f"guidewire: error: {_cli_words(_one_line(exc))}", file=sys.stderr)
            return EXIT_ERROR
        raise


def _cli_words(text: str) -> str:
    """Python-API advice in an error message, said the command line's way."""
    return text.replace("lenient=True", "--lenient").replace("any_order=True", "--any-order")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text if len(text) <= 500 else text[:497] + "..."


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
