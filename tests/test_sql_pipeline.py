"""The text-to-SQL pipeline end to end with a fake model (random logits over a byte vocabulary),
and once with the real SmolLM2 (``@pytest.mark.model``).

Oracles: SQLite (the chosen query's rows, the file never changes), sqlglot's parser, the
compiled grammar walked byte by byte.
"""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
import torch

from guidewire.runtime.loading import LoadedModel
from guidewire.sql import SQLSession, read_schema, text_to_sql
from guidewire.sql.check import analyze, parse_one
from guidewire.sql.coverage import walk_query

from runtime_fakes import FakeBatchModel, FakeModel, byte_id, tiny_vocab
from sql_fixtures import make_db


TARGETS = [b"SELECT name FROM customer WHERE city = 'Rome'", b'SELECT "unit price" FROM "order" ORDER BY id',
           b"SELECT T1.name FROM customer AS T1 JOIN purchase AS T2 ON T1.cid = T2.cid WHERE T2.qty > 1",
           b"SELECT count(*) FROM purchase GROUP BY cid HAVING count(*) > 1"]
PROMPT_LEN = 32


class ScriptedModel(FakeModel):
    """Random logits plus a pull toward one of :data:`TARGETS` while the output still follows it:
    sampled at temperature 1 it writes near-miss queries, some complete, some not, some invalid."""

    def __init__(self, vocab, target: bytes):
        super().__init__(vocab.vocab_size, None, 2.0)
        self.vocab, self.target = vocab, target

    def logits_for(self, prefix):
        x = super().logits_for(prefix)
        out = b"".join(self.vocab.token_bytes[t] for t in prefix[PROMPT_LEN:])
        if self.target.startswith(out):
            j = len(out)
            if j < len(self.target):
                x[byte_id(self.target[j:j + 1])] += 11.0
            else:
                x[0] += 12.0
        else:
            x[0] += 8.0  # off the script: stop as soon as the grammar allows
        return x


class FakeLM(LoadedModel):
    """A LoadedModel whose sequences are :class:`ScriptedModel` s over the tiny byte vocabulary."""

    def __init__(self, target: bytes = TARGETS[0]):
        super().__init__(module=None, tokenizer=None, vocab=tiny_vocab(), name="fake")
        self._extra["target"] = target

    @property
    def max_context(self):
        return None

    def encode_prompt(self, prompt, *, chat=True, system=None):
        return [byte_id(bytes([b])) for b in prompt.encode().rjust(PROMPT_LEN)[-PROMPT_LEN:]]

    def sequence(self):
        return ScriptedModel(self.vocab, self._extra["target"])

    def batch(self):
        b = FakeBatchModel(self.vocab.vocab_size)
        b.inner = ScriptedModel(self.vocab, self._extra["target"])
        return b


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


def test_candidates_are_grammar_sentences_checked_and_run_read_only(tmp_path):
    db = make_db(tmp_path / "odd.sqlite")
    before = _digest(db)
    session = SQLSession(db, model=FakeLM(), max_tokens=96)
    complete = ran = 0
    for seed in range(8):
        res = text_to_sql("Which customers bought the most?", db, model=FakeLM(TARGETS[seed % 4]), candidates=3, seed=seed,
                          max_tokens=96, sample_temperature=1.0)
        assert len(res.candidates) == 3
        for c in res.candidates:
            if c.finish == "length":  # no complete prefix within the budget
                continue
            complete += 1
            assert walk_query(session.grammar, c.sql) == -1, c.sql
            parse_one(c.sql)  # sqlglot reads every complete grammar sentence
            assert c.check is not None and c.check.parsed and not c.check.unknown, c.sql
            assert c.outcome in ("rows", "empty", "error", "rejected")
            if c.execution is not None:
                ran += 1
                conn = sqlite3.connect(str(db))
                try:
                    direct = conn.execute(c.sql).fetchall()
                except sqlite3.Error as exc:
                    direct = str(exc)
                conn.close()
                assert (c.execution.rows if c.execution.ok else c.execution.error) == (
                    direct[:100] if isinstance(direct, list) else direct), c.sql
        if res.error is None and res.rows is not None:
            assert any(c.sql == res.sql and c.execution is not None for c in res.candidates)
    assert complete >= 10, complete
    assert ran >= 6, ran
    assert _digest(db) == before


def test_execute_false_only_checks(tmp_path):
    db = make_db(tmp_path / "odd.sqlite")
    res = text_to_sql("Count the orders.", db, model=FakeLM(), execute=False, max_tokens=40, seed=3)
    assert res.rows is None and all(c.execution is None for c in res.candidates)


def test_unconstrained_and_generic_modes(tmp_path):
    db = make_db(tmp_path / "odd.sqlite")
    for mode in ("none", "generic"):
        s = SQLSession(db, model=FakeLM(), mode=mode, max_tokens=24)
        assert (s.grammar is None) == (mode == "none")
        c = s.evaluate(s.candidates("How many?", 1, seed=1)[0])
        assert c.check is not None
    with pytest.raises(ValueError):
        SQLSession(db, model=FakeLM(), mode="nope")


@pytest.mark.model
def test_smollm2_answers_with_a_real_in_scope_query(smol_model, tmp_path):
    db = make_db(tmp_path / "odd.sqlite")
    before = _digest(db)
    res = text_to_sql("What are the names of all customers?", db, model=smol_model, max_tokens=40)
    s = read_schema(db)
    chk = analyze(res.sql, s)
    assert chk.parsed and chk.real_references, res.sql
    assert res.candidates and res.candidates[0].finish in ("stop", "truncated")
    if res.error is None and res.rows is not None:
        conn = sqlite3.connect(str(db))
        assert sorted(map(repr, conn.execute(res.sql).fetchall()))[:100] == sorted(map(repr, res.rows))
        conn.close()
    assert _digest(db) == before


def test_generation_stops_at_the_statement_semicolon(tmp_path, smollm2):
    """After the closing ';' the grammar still allows whitespace; StatementEnd stops there."""
    from guidewire.grammar import compile_lark
    from guidewire.sql.grammar import schema_grammar
    from guidewire.sql.statement_end import StatementEnd

    db = make_db(tmp_path / "odd.sqlite")
    g = compile_lark(schema_grammar(read_schema(db)), smollm2)
    enc = {t: i for i, t in enumerate(smollm2.token_bytes)}
    c = StatementEnd(g.matcher(), smollm2)
    for piece in [b"SELECT", b" name", b" FROM", b" customer", b" WHERE", b" name", b" =", b" '"]:
        assert c.advance(enc[piece]) and not c.is_terminated()
    for piece in [b"a", b";", b"'"]:  # a ';' inside a string literal does not end the statement
        assert c.advance(enc[piece]) and not c.is_terminated()
    assert c.advance(enc[b";"]) and c.is_terminated() and c.is_accepting() and c.forced_tokens() == []
    f = c.fork()
    c.rollback(1)
    assert not c.is_terminated() and f.is_terminated()
    assert c.advance(enc[b" "]) and not c.is_terminated()  # whitespace before ';' is fine


def test_generation_stops_at_a_blank_line_after_a_complete_statement(tmp_path, smollm2):
    """A blank line ends a complete statement (a model ends SQL in prose so), not an incomplete one;
    blank lines split over tokens count, fork/rollback keep them."""
    from guidewire.grammar import compile_lark
    from guidewire.sql.grammar import schema_grammar
    from guidewire.sql.statement_end import StatementEnd

    db = make_db(tmp_path / "odd.sqlite")
    g = compile_lark(schema_grammar(read_schema(db)), smollm2)
    enc = {t: i for i, t in enumerate(smollm2.token_bytes)}
    assert b"\n\n" in enc and b"\n" in enc
    c = StatementEnd(g.matcher(), smollm2)
    for piece in [b"SELECT", b" name", b"\n\n"]:  # incomplete: a blank line is only whitespace
        assert c.advance(enc[piece]) and not c.is_terminated()
    for piece in [b"FROM", b" customer", b" WHERE", b" name", b" =", b" '", b"a"]:
        assert c.advance(enc[piece]) and not c.is_terminated(), piece
    assert c.advance(enc[b"'"]) and c.is_accepting() and not c.is_terminated()
    assert c.advance(enc[b"\n"]) and not c.is_terminated()
    f = c.fork()
    assert c.advance(enc[b"\n"]) and c.is_terminated()  # the blank line, over two tokens
    c.rollback(1)
    assert not c.is_terminated() and not f.is_terminated()
    assert f.advance(enc[b"\n\n"]) and f.is_terminated()


def test_queries_the_database_cannot_compile_are_resampled_then_reported(tmp_path):
    """A grammar sentence that sqlglot accepts but SQLite cannot compile (an aggregate in WHERE)
    is never run: each try gets the database's own message (oracle: a plain sqlite3 connection),
    the pipeline resamples (retries), then tries the single-table grammar (retries + 1), and the
    result names the problem; a query that compiles is answered on the first try."""
    db = make_db(tmp_path / "odd.sqlite")
    before = _digest(db)
    bad = b"SELECT name FROM customer WHERE count(*) > 1"
    conn = sqlite3.connect(str(db))
    with pytest.raises(sqlite3.OperationalError) as oracle:
        conn.execute(bad.decode())
    conn.close()
    assert analyze(bad.decode(), read_schema(db)).ok  # sqlglot alone lets it through
    res = text_to_sql("Who?", db, model=FakeLM(bad), retries=2, seed=0, max_tokens=64, sample_temperature=0.05)
    assert len(res.candidates) == 1 + 2 + 3
    assert [c.sql for c in res.candidates] == [bad.decode()] * 6
    for c in res.candidates:
        assert c.check.compile_error == str(oracle.value) and not c.check.ok and c.execution is None
        assert c.outcome == "rejected"
    assert res.rows is None and "cannot compile" in res.error and str(oracle.value) in res.error
    good = text_to_sql("Who?", db, model=FakeLM(TARGETS[0]), retries=2, seed=0, max_tokens=64,
                       sample_temperature=0.05)
    assert len(good.candidates) == 1 and good.error is None and good.rows == [("Bob",)]
    assert _digest(db) == before
