"""Front-door defects (issue 24): argument checks before anything loads, CLI switches and help,
one clean error from an incomplete stream, short reprs, the torch bitmask warning, format checks.

No model runs here; checks that must not import torch run in a subprocess and read ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_py(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


# -- CLI: every argument and file checked before torch / transformers / a model --------------------
BAD_CLI = [
    (["json", "examples/person.json", "x", "--max-tokens", "0"], "--max-tokens: 0 is out of range"),
    (["json", "examples/person.json", "x", "--max-tokens", "-5"], "--max-tokens: -5 is out of range"),
    (["generate", "x", "--max-tokens", "many"], "'many' is not an integer"),
    (["generate", "x", "--temperature", "-1"], "--temperature: -1 is out of range"),
    (["generate", "x", "--temperature", "nan"], "--temperature: nan is out of range"),
    (["generate", "x", "--top-p", "0"], "--top-p: 0 is out of range"),
    (["generate", "x", "--top-p", "1.5"], "--top-p: 1.5 is out of range"),
    (["generate", "x", "--top-k", "-1"], "--top-k: -1 is out of range"),
    (["generate", "x", "--min-p", "2"], "--min-p: 2 is out of range"),
    (["generate", "x", "--threads", "0"], "--threads: 0 is out of range"),
    (["json", "examples/person.json", "x", "--indent", "-1"], "--indent: -1 is out of range"),
    (["json", "examples/person.json", "x", "--drafters", "forced,bogus"], "unknown drafter 'bogus'"),
    (["json", "examples/person.json", "x", "--drafters", "model"], "needs a draft model"),
    (["json", "missing-schema.json", "x"], "schema file 'missing-schema.json' not found"),
    (["json", "README.md", "x"], "README.md: not valid JSON (line 1, column 1"),
    (["generate", "x", "--json-schema", "nope.json"], "schema file 'nope.json' not found"),
    (["generate", "x", "--grammar", "SQLite"], "built-in: json, sql, arithmetic"),
    (["generate", "x", "--grammar", "missing.lark"], "no such file, and not a built-in grammar"),
    (["generate", "x", "--choices", "a,,b"], "empty choice"),
]


def test_cli_rejects_bad_arguments_and_files_before_heavy_imports():
    code = f"""
        import contextlib, io, json, sys
        from guidewire.cli import main
        out = []
        for argv in json.loads({json.dumps([a for a, _ in BAD_CLI])!r}):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                try:
                    rc = main(argv)
                except SystemExit as exc:
                    rc = exc.code
            out.append([rc, err.getvalue()])
        heavy = [m for m in ("torch", "transformers", "guidewire.api", "guidewire.runtime") if m in sys.modules]
        print(json.dumps({{"results": out, "heavy": heavy}}))
    """
    proc = _run_py(code)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report["results"]) == len(BAD_CLI)
    for (argv, expected), (rc, err) in zip(BAD_CLI, report["results"]):
        assert rc == 2, (argv, err)
        assert expected in err, (argv, err)
        assert "Traceback" not in err
    assert report["heavy"] == [], f"imported before the arguments were checked: {report['heavy']}"


def test_missing_schema_file_is_reported_without_importing_torch():
    env = {**os.environ, "PYTHONPATH": ROOT, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "guidewire.cli", "json", "no-such.json", "x"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "schema file 'no-such.json' not found" in proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "guidewire" in imported and "json" in imported  # -X importtime did report
    assert not {"torch", "transformers", "guidewire.api"} & imported


def test_speculative_is_a_switch_and_drafters_a_separate_option():
    from guidewire.cli import _speculative, build_parser

    args = build_parser().parse_args(["json", "examples/person.json", "--speculative", "Invent a person."])
    assert args.prompt == "Invent a person." and args.speculative is True and _speculative(args) is True
    args = build_parser().parse_args(["json", "examples/person.json", "Invent a person.", "--drafters", "copy,forced"])
    assert _speculative(args) == "copy,forced"  # --drafters implies --speculative
    args = build_parser().parse_args(["generate", "x"])
    assert _speculative(args) is False


def test_version_and_help_texts(capsys):
    from guidewire import __version__
    from guidewire.cli import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"guidewire {__version__}"
    for sub in ("json", "generate"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([sub, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for flag in ("--top-p TOP_P nucleus", "--top-k TOP_K keep only", "--min-p MIN_P drop tokens",
                     "prompt the instruction for the model", "--drafters NAMES", "--verbose"):
            assert flag in text, (sub, flag)


def test_bench_maskbench_help_names_the_command_and_the_data(capsys):
    from guidewire.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bench", "maskbench", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: guidewire bench maskbench")
    assert "JSONSchemaBench" in out and "../shared/data/maskbench" in out
    assert "/work/" not in out


def test_builtin_grammar_name_in_any_case_and_files():
    from guidewire.cli import _UsageError, _grammar_spec

    assert _grammar_spec("sql") == "sql" and _grammar_spec("SQL") == "sql" and _grammar_spec("Json") == "json"
    lark = os.path.join(ROOT, "guidewire", "grammar", "grammars", "arithmetic.lark")
    assert _grammar_spec(lark).startswith(open(lark, encoding="utf-8").read()[:20])
    with pytest.raises(_UsageError, match="built-in: json, sql, arithmetic"):
        _grammar_spec("sqlite")


def test_cli_says_lenient_flag_not_python_keyword(capsys, tmp_path):
    from guidewire.cli import main

    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "string"}},
                                  "patternProperties": {"(?<=x)a": {"type": "integer"}}}))
    rc = main(["json", str(schema), "x", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "UnsupportedFeatureError" in err, err
    assert "lenient=True" not in err
    from guidewire.cli import _cli_words

    assert _cli_words("compile with lenient=True to over-approximate") == \
        "compile with --lenient to over-approximate"


def test_tokenizer_conversion_is_announced(monkeypatch, tmp_path):
    from guidewire.cli import _tokenizer_label

    monkeypatch.setenv("GUIDEWIRE_CACHE", str(tmp_path))
    assert "converting the smollm2 tokenizer" in _tokenizer_label(None)
    (tmp_path / "vocabs").mkdir()
    (tmp_path / "vocabs" / "gemma3.npz").write_bytes(b"")
    assert _tokenizer_label("gemma3") == "loading tokenizer gemma3"
    from guidewire.cli import _model_label
    from guidewire.runtime.loading import _META

    assert "converting the gemma3 model" in _model_label("gemma3")
    (tmp_path / "models" / "gemma3").mkdir(parents=True)
    (tmp_path / "models" / "gemma3" / _META).write_text("{}")
    assert _model_label("gemma3") == "loading model gemma3"


# -- Python API: arguments checked before any model or tokenizer loads -----------------------------
BAD_API = [
    ({"max_tokens": 0}, "max_tokens must be an integer >= 1"),
    ({"max_tokens": -5}, "max_tokens must be an integer >= 1"),
    ({"max_tokens": True}, "max_tokens must be an integer >= 1"),
    ({"max_tokens": 1.5}, "max_tokens must be an integer >= 1"),
    ({"temperature": -1}, "temperature must be a finite number >= 0"),
    ({"temperature": float("inf")}, "temperature must be a finite number >= 0"),
    ({"top_p": 0}, r"top_p must be a number in \(0, 1\]"),
    ({"top_p": 1.01}, r"top_p must be a number in \(0, 1\]"),
    ({"top_k": -1}, "top_k must be an integer >= 0"),
    ({"top_k": 2.5}, "top_k must be an integer >= 0"),
    ({"min_p": -0.1}, r"min_p must be a number in \[0, 1\]"),
    ({"seed": "1"}, "seed must be an integer"),
    ({"speculative": "forced,nope"}, "unknown drafter 'nope'"),
    ({"speculative": "model"}, "needs a draft model"),
    ({"speculative": "copy,copy"}, "named twice"),
    ({"speculative": ""}, "no drafter named"),
]


@pytest.mark.parametrize("kwargs,message", BAD_API)
def test_api_rejects_bad_arguments_before_loading(monkeypatch, kwargs, message):
    from guidewire import api

    def no_loading(*a, **k):
        raise AssertionError("a model or tokenizer was loaded before the arguments were checked")

    monkeypatch.setattr(api, "get_model", no_loading)
    monkeypatch.setattr(api, "get_vocab", no_loading)
    with pytest.raises(ValueError, match=message):
        api.generate_json({"type": "integer"}, "x", **kwargs)
    with pytest.raises(ValueError, match=message):
        api.generate("x", regex="[0-9]+", **kwargs)


def test_api_unknown_grammar_name_lists_builtins(monkeypatch):
    from guidewire import api

    monkeypatch.setattr(api, "get_model", lambda *a, **k: pytest.fail("loaded a model"))
    with pytest.raises(ValueError, match="built-in grammar .*json, sql, arithmetic"):
        api.generate("x", grammar="SQL")


# -- one clean IncompleteOutputError from a stream -------------------------------------------------
def test_incomplete_stream_raises_one_clean_error():
    from guidewire.core import Vocab
    from guidewire.runtime.decode import GenerationResult, TextStream, Usage
    from guidewire.runtime.errors import IncompleteOutputError

    vocab = Vocab((b"", b"SEL", b"ECT"), frozenset({0}), frozenset({0}), 3, "tiny")
    result = GenerationResult("SELECT", [1, 2], "length", False, Usage(1, 2, 0, 2))

    def steps():
        yield [1]
        yield [2]
        return result

    def finalize(r):
        raise IncompleteOutputError("max_tokens reached inside an incomplete grammar sentence", r)

    stream = TextStream(steps(), vocab, finalize=finalize)
    seen = []
    with pytest.raises(IncompleteOutputError) as info:
        for delta in stream:
            seen.append(delta)
    assert seen == ["SEL", "ECT"] and stream.result is result
    assert info.value.__context__ is None and info.value.__cause__ is None  # no chained StopIteration
    assert list(stream) == []  # finished: no second error


# -- bitmask on a torch tensor: no "NumPy array is not writable" warning ---------------------------
def test_fill_bitmask_on_torch_tensor_warns_nothing():
    proc = _run_py("""
        import warnings
        warnings.simplefilter("error")
        import numpy as np, torch
        from guidewire.core import Vocab, allocate_token_bitmask
        from guidewire.grammar import compile_regex
        vocab = Vocab((b"",) + tuple(bytes([b]) for b in range(256)), frozenset({0}), frozenset({0}), 300, "t")
        m = compile_regex("ab+", vocab).matcher()
        want = allocate_token_bitmask(2, vocab.vocab_size)
        m.fill_bitmask(want, 1)
        got = torch.full((2, want.shape[1]), -1, dtype=torch.int32)
        m.fill_bitmask(got, 1)
        assert (got.numpy()[1] == want[1]).all() and (got.numpy()[0] == -1).all()
        wide = torch.full((1, want.shape[1] + 3), -1, dtype=torch.int32)  # wider than the vocab: zero-padded
        m.fill_bitmask(wide, 0)
        assert (wide.numpy()[0, : want.shape[1]] == want[1]).all() and (wide.numpy()[0, want.shape[1]:] == 0).all()
        print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# -- short reprs -----------------------------------------------------------------------------------
def test_vocab_and_loaded_model_reprs_are_short(smollm2):
    from guidewire.runtime.loading import LoadedModel

    text = repr(smollm2)
    assert len(text) < 200 and "smollm2" in text and "49152" in text
    lm = LoadedModel(module=object(), tokenizer=object(), vocab=smollm2, name="smollm2")
    assert len(repr(lm)) < 300 and "smollm2" in repr(lm)


# -- format checks: what generate_json's output check enforces -------------------------------------
#: each format with a value jsonschema's FormatChecker must reject (needs jsonschema[format-nongpl])
FORMAT_COUNTEREXAMPLES = {
    "date-time": "2024-13-01T00:00:00Z", "date": "2024-02-30", "time": "25:00:00Z", "duration": "P1Y2",
    "email": "no-at-sign", "hostname": "-bad-.example", "idn-hostname": "-bad-",
    "ipv4": "256.1.1.1", "ipv6": "1:::2", "uri": "no scheme", "uri-reference": "a b",
    "iri": "no scheme", "uuid": "not-a-uuid", "json-pointer": "a/b", "relative-json-pointer": "/a",
    "uri-template": "{unclosed", "regex": "(",
}


def test_output_check_enforces_the_documented_formats():
    import jsonschema

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    missing = [f for f in FORMAT_COUNTEREXAMPLES if f not in checker.checkers]
    assert not missing, f"jsonschema cannot check {missing}: install jsonschema[format-nongpl]"
    accepted = [f for f, bad in FORMAT_COUNTEREXAMPLES.items() if checker.conforms(bad, f)]
    assert not accepted, f"the format checker accepts counterexamples of {accepted}"
    assert np.all([checker.conforms("2024-02-29", "date"), checker.conforms("/a~0b", "json-pointer")])


def test_public_names_are_not_shadowed_by_submodules():
    """Importing a package's submodules must not turn an exported function into a module (a lazy
    name spelled like its own submodule, e.g. ``guidewire.search.solve``, is shadowed once the
    submodule is imported)."""
    import importlib
    import pkgutil
    import types

    import guidewire

    checked = 0
    for info in pkgutil.walk_packages(guidewire.__path__, "guidewire."):
        if not info.ispkg:
            continue
        pkg = importlib.import_module(info.name)
        for sub in pkgutil.iter_modules(pkg.__path__):
            if not sub.ispkg and not sub.name.startswith("__"):
                importlib.import_module(f"{info.name}.{sub.name}")
        for name in getattr(pkg, "__all__", ()):
            obj = getattr(pkg, name)
            if name[0].islower() and name != name.upper():
                assert not isinstance(obj, types.ModuleType), f"{info.name}.{name} is a module"
                checked += 1
    assert checked >= 20
