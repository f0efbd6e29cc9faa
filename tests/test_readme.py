"""README.md's code blocks run as written (issue 24, item 2).

Every ```python block is executed; the ones that call the model (``guidewire.generate``) are
``model`` tests. Every ``guidewire ...`` command line of a ```bash block is run in-process through
``guidewire.cli.main`` (``--help``/``--version`` without a model, the others with SmolLM2) and its
output checked by an independent oracle (jsonschema, ``re``, sqlglot). The install commands are not
run; the test command must be the one ``.ci/run`` evaluates.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
PERSON = os.path.join(ROOT, "examples", "person.json")


def blocks(lang: str) -> list[str]:
    """The bodies of README's fenced blocks in ``lang``, in order."""
    text = open(README, encoding="utf-8").read()
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def is_model_block(code: str) -> bool:
    return "guidewire.generate" in code


def is_server_block(code: str) -> bool:
    """A block that talks to ``guidewire serve`` with the ``openai`` client."""
    return "OpenAI(base_url=" in code


def is_sql_block(code: str) -> bool:
    return "text_to_sql" in code


def is_search_block(code: str) -> bool:
    """A block that calls the model through the search layer or a monitor (run as ``model`` tests)."""
    return any(m in code for m in ("from guidewire.search import", "create_monitor(", "complete_code("))


def is_serve_line(line: str) -> bool:
    return line.startswith("guidewire serve")


def is_lsp_line(line: str) -> bool:
    return line.startswith("guidewire lsp")


def cli_lines() -> list[str]:
    """Every ``guidewire ...`` command of the bash blocks (the tail of ``pip ... && guidewire ...``)."""
    out = []
    for body in blocks("bash"):
        for line in body.splitlines():
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("guidewire "):
                    out.append(part)
    return out


def is_fast_line(line: str) -> bool:
    return "--help" in line or "--version" in line


def run_cli(line: str) -> tuple[int, str, str]:
    from guidewire.cli import main

    argv = shlex.split(line, comments=True)
    assert argv[0] == "guidewire"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv[1:])
        except SystemExit as exc:  # --help / --version
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


#: monitors, IDE completion, search sampling, code search (+ the sandbox)
SEARCH_BLOCKS = 4


def test_readme_has_the_blocks_this_test_runs():
    py = blocks("python")
    assert len(py) == 14 + SEARCH_BLOCKS and sum(map(is_model_block, py)) == 1 and sum(map(is_server_block, py)) == 1
    assert sum(map(is_sql_block, py)) == 1 and sum(map(is_search_block, py)) == SEARCH_BLOCKS
    lines = cli_lines()
    assert len(lines) == 11 and sum(map(is_fast_line, lines)) == 2 and sum(map(is_serve_line, lines)) == 1, lines
    assert sum(map(is_lsp_line, lines)) == 1
    # set-up, tests, command line, GPU (not run here: needs CUDA), serve, sql, /infill, lsp, a full
    # MaskBench run and its tail (not run here: minutes): exactly two set-up commands
    assert len(blocks("bash")) == 9 and sum("pip install" in b for b in blocks("bash")) == 2


def test_python_blocks_without_model_run():
    ran = 0
    for code in blocks("python"):
        if is_model_block(code) or is_server_block(code) or is_sql_block(code) or is_search_block(code):
            continue
        namespace: dict = {"__name__": "readme"}
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
        ran += 1
        if "native.set_enabled" in code:   # the compiled-loops block: the switch is restored
            from guidewire.grammar import native
            assert namespace["g"].matcher() is not None
            assert native.module() is not None or not native.available()
            continue
        if ".precompute(" in code:   # the compile-time tables block
            g, lazy = namespace["g"], namespace["lazy"]
            assert g.precomputed["complete"] and g.precomputed["tables"] > 10 and lazy.precomputed is None
            assert g.stats()["token_tables"] > lazy.stats()["token_tables"] == 1
            assert namespace["schema"].stats()["token_tables"] > 1
            continue
        if "HeapReserve" in code:   # the heap-reserve block: its second top-up faults (almost) nothing
            r = namespace["reserve"]
            assert r.nbytes == 64 << 20 and namespace["again"] * 10 < (64 << 20) // 4096
            assert not r.available or r.stats["faulted_pages"] == namespace["first"] + namespace["again"]
            continue
        if "IdleCollector" in code:   # the collector block: garbage collected, survivors frozen
            import gc

            col = namespace["collector"]
            try:
                assert namespace["dead"]() is None and col.collections == 2 and col.full == 1
                assert gc.get_freeze_count() >= len(namespace["memo"]) == 50_000
            finally:
                gc.unfreeze()       # leave the test process as it was
            continue
        if "compile_lark" in code:
            assert namespace["m2"].num_tokens == namespace["m"].num_tokens == 1
            assert len(namespace["allowed"]) > 0
            assert namespace["phone"].matcher() is not None
        if "compile_json_schema" in code:
            assert namespace["g"].matcher() is not None
        if "2**31 - 1" in code:     # the JSON Schema block's elided counter
            assert namespace["fits"] is True and len(namespace["text"].dfa.nfa.eps) < 10_000
        if "projected_states" in code:     # the projected lexer states block: the same masks unprojected
            from guidewire.grammar import compile_json_schema
            from guidewire.grammar import compiled as compiled_mod

            g, m = namespace["g"], namespace["m"]
            assert g.stats()["projected_states"] > 0 and g.stats()["lexer_states"] > 0
            old = compiled_mod.PROJECT_LEXEMES
            compiled_mod.PROJECT_LEXEMES = False
            try:
                plain = compile_json_schema(namespace["schema"], g.vocab)
            finally:
                compiled_mod.PROJECT_LEXEMES = old
            assert plain is not g and plain._projection is None
            ref, one = plain.matcher(), namespace["one"]
            for c in b'{"etag": "a.b-c", "title": "x':
                assert ref.advance(one[bytes([c])])
            assert ref.current_mask().tobytes() == m.current_mask().tobytes()
        if "set_limits" in code:
            g = namespace["g"]
            assert g.limits.step_work == 20_000_000 and g.limits.mask_cache_bytes == 8 << 20
            assert g.matcher().advance(g.vocab.token_bytes.index(b"a"))
        if "compile_python" in code:
            _check_python_grammar(namespace["g"])
        if "prepare_buffer(" in code:   # the document is in parso's diff cache under its buffer path
            from pathlib import Path

            from parso.cache import parser_cache

            from guidewire.monitors.analysis import buffer_path

            key = Path(buffer_path(namespace["path"]))
            assert any(key in c and "".join(c[key].lines) == namespace["text"] for c in parser_cache.values())
    assert ran == 11


def _check_python_grammar(g) -> None:
    """The README's Python grammar against ``ast.parse``: a valid file byte by byte, a broken one refused."""
    import ast

    single = {tb: i for i, tb in enumerate(g.vocab.token_bytes) if len(tb) == 1}
    good, bad = b"def f(x):\n    return (x,\n  1)\n", b"x = (1))"
    ast.parse(good)
    m = g.matcher()
    assert all(m.advance(single[bytes([c])]) for c in good) and m.is_accepting()
    with pytest.raises(SyntaxError):
        ast.parse(bad)
    m = g.matcher()
    assert not all(m.advance(single[bytes([c])]) for c in bad)


def test_fast_cli_lines_run():
    ran = 0
    for line in cli_lines():
        if not is_fast_line(line):
            continue
        rc, out, err = run_cli(line)
        assert rc == 0, (line, err)
        assert out.startswith("usage: guidewire bench maskbench") or out.startswith("guidewire 0."), out[:200]
        ran += 1
    assert ran == 2


def test_ci_runs_readme_test_command():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, ".ci", "readme_test_command.py")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    cmd = proc.stdout.strip()
    test_block = blocks("bash")[1].strip()
    assert cmd == test_block and "python -m pytest" in cmd and '".[test,kernels]"' in cmd
    # -p no:warnings would switch off pytest's warnings plugin and with it the filterwarnings
    # config that turns warnings from guidewire's own code into errors
    assert "no:warnings" not in cmd
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    assert "readme_test_command.py" in ci and "-m venv" in ci and 'eval "$cmd"' in ci


# -- with the model ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.model
def test_generate_block_runs_with_the_model(one_thread, capsys):
    import jsonschema

    code = next(c for c in blocks("python") if is_model_block(c))
    namespace: dict = {"__name__": "readme"}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    jsonschema.validate(namespace["person"], schema)
    sql = capsys.readouterr().out
    import sqlglot

    sqlglot.parse_one(sql, read="sqlite")  # the streamed text is one SQL statement
    assert sql.upper().startswith("SELECT")


@pytest.mark.model
def test_model_cli_lines_run(one_thread):
    import jsonschema
    import sqlglot

    person = json.load(open(PERSON, encoding="utf-8"))
    ran = 0
    for line in cli_lines():
        if is_fast_line(line) or is_serve_line(line) or is_lsp_line(line):
            continue
        rc, out, err = run_cli(line)
        assert rc == 0, (line, err)
        if line.startswith("guidewire json examples/person.json"):
            jsonschema.validate(json.loads(out), person)
        elif "--regex" in line:
            assert re.fullmatch(r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}\n", out), out
        elif "--choices" in line:
            assert out in ("red\n", "green\n", "blue\n")
        elif line.startswith("guidewire sql "):
            sql = out.splitlines()[0]
            assert sqlglot.parse_one(sql, read="sqlite") is not None
            _assert_real_tables(sql, os.path.join(ROOT, "examples", "shop.sqlite"))
        elif "--grammar sql" in line:
            sqlglot.parse_one(out, read="sqlite")
            assert re.search(r"guidewire: \d+ tokens .* tokens/s", err), err  # --verbose
        else:
            pytest.fail(f"no check for README line {line!r}")
        ran += 1
    assert ran == 7


def _assert_real_tables(sql: str, db: str) -> None:
    """Every table the query names exists in the database (sqlglot + sqlite_master, not guidewire)."""
    import sqlite3

    import sqlglot
    from sqlglot import exp

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        real = {r[0].lower() for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        con.close()
    named = {t.name.lower() for t in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Table)}
    assert named and named <= real, (named, real)


@pytest.mark.model
def test_search_blocks_run_with_the_model(one_thread, tmp_path, monkeypatch):
    """Monitors, search sampling and code search as the README shows them, checked by ``dir``,
    Python ``re`` and ``ast`` (not by guidewire)."""
    import ast
    import os.path as osp

    monkeypatch.chdir(tmp_path)   # the search block saves a trie file
    ran = 0
    for code in blocks("python"):
        if not is_search_block(code):
            continue
        namespace: dict = {"__name__": "readme"}
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
        ran += 1
        if "create_monitor(" in code:
            mon, res = namespace["mon"], namespace["res"]
            assert mon.stats.triggers >= 1
            if not mon.stats.abstentions:   # answered within its deadline: the name must exist
                name = re.match(r"[A-Za-z_][A-Za-z_0-9]*", res.text)
                assert name and name.group() in dir(osp), res.text
        elif "complete_code(" in code:
            out = namespace["out"]
            assert out.finish_reason in ("stop", "length") and out.stats.triggers >= 1
            if not out.stats.abstentions:   # "... for f in os." + the completion: the name must exist
                name = re.match(r"[A-Za-z_][A-Za-z_0-9]*", out.text)
                assert name and name.group() in dir(os), out.text
        elif "solve(" in code:
            run, res = namespace["run"], namespace["res"]
            assert run.passed == run.total == 2 and run.error is None
            ast.parse(res.code)
            assert 0.0 <= res.public_pass <= 1.0
        elif "sample(" in code:
            ss = namespace["ss"]
            pattern = "|".join(f"{i:05b}" for i in range(32) if f"{i:05b}".count("1") % 2 == 0)
            assert len(ss.texts) == 200 and all(re.fullmatch(pattern, t) for t in ss.texts)
            assert (tmp_path / "rain.trie.json").exists()
        else:
            pytest.fail("no check for this README block")
    assert ran == SEARCH_BLOCKS


@pytest.mark.model
def test_lsp_line_answers_an_inline_completion(tmp_path):
    """README's ``guidewire lsp`` line, started as a process and driven over stdio by the tests'
    own JSON-RPC client: a monitored completion after ``os.path.`` names a real attribute."""
    import os.path as osp

    from test_ide_lsp import LspClient

    line = next(ln for ln in cli_lines() if is_lsp_line(ln))
    client = LspClient(*shlex.split(line, comments=True)[2:])
    try:
        init = client.call("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {},
                                          "initializationOptions": {"latencyBudgetMs": 120000, "maxTokens": 6}})
        assert "inlineCompletionProvider" in init["result"]["capabilities"], init
        client.notify("initialized", {})
        uri = (tmp_path / "paths.py").as_uri()
        text = "import os\n\ndef config_path(name):\n    return os.path."
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                                "text": text}})
        r = client.call("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 3, "character": len("    return os.path.")},
            "context": {"triggerKind": 1}})
        assert "error" not in r, r
        stats = client.call("guidewire/stats", None)["result"]
        assert len(stats) == 1 and stats[0]["triggers"] >= 1, stats
        items = r["result"]["items"]
        if not stats[0]["abstentions"]:
            name = re.match(r"[A-Za-z_][A-Za-z_0-9]*", items[0]["insertText"])
            assert name and name.group() in dir(osp), items
    finally:
        client.close()


@pytest.mark.model
def test_sql_block_runs_with_the_model(one_thread):
    code = next(c for c in blocks("python") if is_sql_block(c))
    db = os.path.join(ROOT, "examples", "shop.sqlite")
    before = open(db, "rb").read()
    namespace: dict = {"__name__": "readme"}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(cwd)
    r = namespace["r"]
    assert r.error is None and r.rows is not None
    _assert_real_tables(r.sql, db)
    assert open(db, "rb").read() == before   # nothing was written


@pytest.mark.model
def test_serve_line_and_openai_block_run(tmp_path):
    """README's ``guidewire serve`` line, started as a process (on a free port instead of 8000),
    answers README's ``openai`` block; outputs checked with jsonschema and json."""
    import socket
    import time
    import urllib.request

    import jsonschema

    line = next(ln for ln in cli_lines() if is_serve_line(ln))
    code = next(c for c in blocks("python") if is_server_block(c))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    argv = [a if a != "8000" else port for a in shlex.split(line, comments=True)[1:]]
    assert port in argv and "8000" in code
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    log = open(tmp_path / "serve.log", "w+b")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from guidewire.cli import main; sys.exit(main())",
                             *argv], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the README's serve line did not come up"
            time.sleep(0.5)
        namespace: dict = {"__name__": "readme"}
        exec(compile(code.replace("8000", port), "README.md", "exec"), namespace)  # noqa: S102
        schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                  "required": ["name", "age"], "additionalProperties": False}
        jsonschema.validate(json.loads(namespace["person"].choices[0].message.content), schema)
        call = namespace["call"]
        assert call.function.name == "calculator"
        params = namespace["tools"][0]["function"]["parameters"]
        jsonschema.validate(json.loads(call.function.arguments), params)
        assert namespace["chunk"].usage is not None and namespace["chunk"].usage.completion_tokens > 0
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        log.close()
