"""Buffers parsed ahead of their triggers: the back ends' ``prepare`` (a later query diff-parses
the edit instead of parsing the whole buffer, and answers as a cold query does) and the language
server's document sync (``ide.docsync``: coalescing, never beside a completion, bounds)."""

from __future__ import annotations

import ast
import os
import sysconfig
import threading
import time

import pytest

jedi = pytest.importorskip("jedi")
parso = pytest.importorskip("parso")

from guidewire.ide.docsync import DocumentPreparer  # noqa: E402
from guidewire.monitors.analysis import JediBackend, buffer_path, cursor  # noqa: E402


def _turtle_dots(n: int) -> tuple[str, list[str]]:
    """``turtle.py`` (a 144 KB module) and ``n`` of its prefixes ending in the dot of a
    ``self.attr`` inside a method, spread over the file."""
    path = os.path.join(sysconfig.get_paths()["stdlib"], "turtle.py")
    with open(path, encoding="utf-8") as f:
        src = f.read()
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    dots = sorted({starts[node.lineno - 1] + node.value.end_col_offset
                   for node in ast.walk(ast.parse(src))
                   if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                   and node.value.id == "self" and node.value.end_lineno == node.lineno})
    assert src.isascii() and len(dots) > 100
    step = len(dots) // n
    return path, [src[:d + 1] for d in dots[step // 2::step][:n]]


class _ParseSpy:
    """Counts whole parses and diff parses of the module at ``path`` (parso is jedi's parser: an
    oracle outside guidewire for what a query parsed; a whole parse is one of ``path`` with no
    module of it in parso's diff cache)."""

    def __init__(self, monkeypatch, path: str):
        from pathlib import Path

        from parso.cache import parser_cache
        from parso.python.diff import DiffParser

        self.path, self.full, self.diff = str(path), 0, 0
        orig_parse, orig_update = parso.grammar.Grammar.parse, DiffParser.update

        def parse(grammar, code=None, **kw):
            p = kw.get("path")
            if p is not None and str(p) == self.path and Path(p) not in parser_cache.get(grammar._hashed, {}):
                self.full += 1
            return orig_parse(grammar, code, **kw)

        def update(parser, *a, **kw):
            self.diff += 1
            return orig_update(parser, *a, **kw)

        monkeypatch.setattr(parso.grammar.Grammar, "parse", parse)
        monkeypatch.setattr(DiffParser, "update", update)


def test_prepared_buffer_is_diff_parsed_and_answers_as_cold(monkeypatch, tmp_path):
    path, prefixes = _turtle_dots(4)
    be = JediBackend()
    spy = _ParseSpy(monkeypatch, buffer_path(path))
    checked = 0
    for i, code in enumerate(prefixes):
        line, col = cursor(code)
        # the editor's document before the dot was typed, synced ahead of the trigger: parsed
        # whole the first time, then as an edit of the version before
        assert be.prepare(code[:-1], path=path)
        assert (spy.full, spy.diff) == ((1, 0) if i == 0 else (0, 1)), (i, spy.full, spy.diff)
        spy.full = spy.diff = 0
        warm = be.attributes(code, line, col, path=path, deadline_s=60)
        assert (spy.full, spy.diff) == (0, 1)  # the query re-parsed the typed dot only
        # the same buffer where nothing was prepared (a fresh back end, another path): same names
        cold = JediBackend().attributes(code, line, col, path=str(tmp_path / f"other{i}.py"), deadline_s=60)
        assert warm and warm == cold
        spy.full = spy.diff = 0
        checked += 1
    assert checked == 4
    # unprepared, the buffer is parsed whole at its trigger
    code = prefixes[0]
    fresh = str(tmp_path / "fresh.py")
    spy2 = _ParseSpy(monkeypatch, buffer_path(fresh))
    JediBackend().attributes(code, *cursor(code), path=fresh, deadline_s=60)
    assert spy2.full == 1


def test_prepare_without_a_path_does_nothing(monkeypatch):
    spy = _ParseSpy(monkeypatch, "/nonexistent")
    assert JediBackend().prepare("import os\nos.", path=None) is False
    assert spy.full == spy.diff == 0


def test_process_backend_prepares_without_waiting_and_answers_as_cold(tmp_path):
    from guidewire.monitors.jediproc import JediProcessBackend

    path, prefixes = _turtle_dots(2)
    be = JediProcessBackend()
    try:
        for i, code in enumerate(prefixes):
            line, col = cursor(code)
            if i == 0:
                assert be.prepare(code[:-1], path=path) is True  # sent; parsed while we go on
            else:
                assert be.prepare(code[:-1], path=path, wait=True, deadline_s=60) is True
                assert be.prepared == 2 and not be._inflight  # parsed before it returned
            warm = be.attributes(code, line, col, path=path, deadline_s=60)
            assert not be._inflight  # the parse's reply was read before the query was sent
            cold = JediBackend().attributes(code, line, col, path=str(tmp_path / f"o{i}.py"), deadline_s=60)
            assert warm and warm == cold
        assert be.prepared == 2  # the child said it parsed each
        assert be.prepare("x = 1\n", path=None) is False
    finally:
        be.close()
    assert be.prepare("x = 1\n", path=path) is False  # closed


def test_prepare_buffer_declines_back_ends_without_prepare():
    from guidewire.monitors import prepare_buffer

    class Bare:
        name = "bare"

        def attributes(self, *a, **k):
            return None

    assert prepare_buffer("x.", path="/tmp/x.py", backend=Bare()) is False


# -- document sync -------------------------------------------------------------------------

class _Recorder:
    def __init__(self, result=True):
        self.calls: list[tuple] = []
        self.result = result
        self.event = threading.Event()

    def __call__(self, text, *, path, project_root):
        self.calls.append((text, path, project_root))
        self.event.set()
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def _settle(docs: DocumentPreparer, rec: _Recorder, n: int, timeout: float = 30.0) -> None:
    t_end = time.monotonic() + timeout
    while len(rec.calls) < n or docs.pending:
        assert time.monotonic() < t_end, (rec.calls, docs.pending)
        time.sleep(0.01)
    time.sleep(0.05)


def test_docsync_parses_the_newest_text_of_each_document_once():
    rec = _Recorder()
    docs = DocumentPreparer(prepare=rec, quiet_s=0.2)
    for k in range(5):  # typing: five changes inside the quiet period, one parse of the last
        docs.note("file:///a.py", f"x = {k}\n", "/p/a.py", "/p")
    docs.note("file:///b.py", "y = 1\n", "/p/b.py", None)
    _settle(docs, rec, 2)
    assert sorted(rec.calls) == [("x = 4\n", "/p/a.py", "/p"), ("y = 1\n", "/p/b.py", None)]
    assert (docs.prepared, docs.declined, docs.failed) == (2, 0, 0)
    docs.close()


def test_docsync_waits_while_a_completion_runs():
    rec = _Recorder()
    busy = threading.Event()
    busy.set()
    docs = DocumentPreparer(busy=busy.is_set, prepare=rec, quiet_s=0.01)
    docs.note("file:///a.py", "x = 1\n", "/p/a.py", None)
    assert not rec.event.wait(0.5)  # a completion holds the decoder: nothing parsed beside it
    assert docs.pending == 1
    busy.clear()
    _settle(docs, rec, 1)
    assert rec.calls == [("x = 1\n", "/p/a.py", None)]
    docs.close()


def test_docsync_bounds_forget_and_failures():
    rec = _Recorder()
    busy = threading.Event()
    busy.set()
    docs = DocumentPreparer(busy=busy.is_set, prepare=rec, quiet_s=0.0, max_documents=2, max_bytes=100)
    docs.note("file:///a.py", "a" * 10, "/p/a.py", None)
    docs.note("file:///b.py", "b" * 10, "/p/b.py", None)
    docs.note("file:///c.py", "c" * 10, "/p/c.py", None)  # over max_documents: a dropped
    docs.note("file:///d.py", "d" * 10, None, None)         # no path: nothing to key a parse by
    docs.note("file:///e.py", "e" * 95, "/p/e.py", None)    # over max_bytes: b and c dropped
    assert docs.dropped == 3 and docs.pending == 1
    docs.note("file:///f.py", "f", "/p/f.py", None)
    docs.forget("file:///f.py")
    busy.clear()
    _settle(docs, rec, 1)
    assert [c[1] for c in rec.calls] == ["/p/e.py"]
    docs.close()
    failing = _Recorder(result=RuntimeError("boom"))
    docs = DocumentPreparer(prepare=failing, quiet_s=0.0)
    docs.note("file:///a.py", "x", "/p/a.py", None)
    _settle(docs, failing, 1)
    assert (docs.prepared, docs.failed) == (0, 1)
    docs.note("file:///a.py", "y", "/p/a.py", None)  # the thread survived the failure
    _settle(docs, failing, 2)
    assert docs.failed == 2
    docs.close()
    with pytest.raises(ValueError):
        DocumentPreparer(quiet_s=-1)


def test_forget_answers_makes_the_next_question_run_again():
    be = JediBackend()
    code = "import os\nos.path."
    runs = lambda: be.states.created + be.states.reused  # noqa: E731 -- analyses that ran
    first = be.attributes(code, *cursor(code), path=None, deadline_s=60)
    n = runs()
    assert be.attributes(code, *cursor(code), path=None, deadline_s=60) == first and runs() == n  # kept
    be.forget_answers()
    assert be.attributes(code, *cursor(code), path=None, deadline_s=60) == first and runs() == n + 1
