"""Text-to-SQL over a live database: constrained generation, static checks, guarded execution.

:class:`SQLSession` binds one database and one model: it reads the live schema, compiles the
schema-aware grammar (or uses the built-in generic ``sql`` grammar, or none), builds the prompt,
generates candidates (one greedy run, or a lockstep batch of samples), checks each with sqlglot
(:mod:`.check`) and with the database's own compiler (``EXPLAIN``, nothing runs), resamples those
that fail, and runs the good ones read-only (:mod:`.execute`). :func:`text_to_sql` is the front door.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

from .check import QueryCheck, analyze
from .execute import DEFAULT_TIMEOUT_S, Execution, compile_error, run_query
from .grammar import schema_grammar
from .prompt import build_prompt
from .schema import Schema, connect_sqlite_readonly, is_url, quote_identifier, read_schema
from .statement_end import StatementEnd

MODES = ("none", "generic", "schema")
POLICIES = ("first", "vote")


@dataclass
class Candidate:
    """One generated query with its outcome.

    ``finish`` is ``stop``, ``length`` (cut by ``max_tokens``) or ``truncated`` (cut, then rolled
    back to its longest complete prefix); ``check`` is sqlglot's verdict; ``execution`` is set
    when it ran.
    """

    sql: str
    tokens: int
    finish: str
    seconds: float
    temperature: float
    check: QueryCheck | None = None
    execution: Execution | None = None

    @property
    def outcome(self) -> str:
        """``rows``, ``empty`` (ran, no rows), ``error`` (the database refused it), ``rejected`` (static check) or ``unchecked``."""
        if self.execution is not None:
            if not self.execution.ok:
                return "error"
            return "rows" if self.execution.rows else "empty"
        if self.check is not None and not self.check.ok:
            return "rejected"
        return "unchecked"


@dataclass
class SQLResult:
    """What :func:`text_to_sql` returns: the chosen ``sql``, its ``rows`` (capped; None if not run),
    ``error`` (None or why it failed) and every ``candidates`` tried, with outcomes."""

    sql: str
    rows: list[tuple] | None
    error: str | None
    candidates: list[Candidate] = field(default_factory=list)


_FENCE = re.compile(r"```(?:sql|sqlite)?\s*(.*?)(?:```|$)", re.S | re.I)
_SELECT = re.compile(r"\b(select|with)\b", re.I)


def extract_sql(text: str) -> str:
    """The SQL statement in free model text: a fenced block's body, else from the first ``SELECT``
    to the first ``;`` or blank line (the semicolon dropped)."""
    m = _FENCE.search(text)
    body = m.group(1) if m else text
    s = _SELECT.search(body)
    if s is None:
        return body.strip()
    body = body[s.start():]
    body = re.split(r";|\n\s*\n", body, maxsplit=1)[0]
    return body.strip()


def _statement_done(text: str) -> bool:
    """Whether free text already holds a whole statement (so unconstrained decoding can stop)."""
    s = _SELECT.search(text)
    if s is None:
        return False
    tail = text[s.start():]
    if ";" in tail or re.search(r"\n\s*\n", tail):
        return True
    return "```" in text[:s.start()] and "```" in tail


def sample_rows(database, schema: Schema, per_table: int) -> dict[str, list[tuple]]:
    """Up to ``per_table`` rows of each table (SQLite only; other databases give none)."""
    if per_table <= 0 or is_url(str(database)):
        return {}
    conn = connect_sqlite_readonly(database)
    out = {}
    try:
        for t in schema.tables:
            try:
                out[t.name] = conn.execute(f"SELECT * FROM {quote_identifier(t.name, always=True)} LIMIT ?",
                                           (per_table,)).fetchall()
            except Exception:  # a view over a missing table, an odd type: no samples for it
                out[t.name] = []
    finally:
        conn.close()
    return out


class SQLSession:
    """One database and one model; :meth:`candidates` generates, :meth:`evaluate` checks and runs.

    ``mode`` is ``schema`` (the grammar built from the live schema), ``generic`` (the built-in
    ``sql`` grammar) or ``none`` (unconstrained; the statement is cut out of the text).
    """

    def __init__(self, database, *, model=None, mode: str = "schema", sample_rows_per_table: int = 2,
                 max_tokens: int = 128, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = 100):
        from .. import api
        from ..grammar import builtin_grammar

        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        self.database = database
        self.schema = read_schema(database)
        self.mode = mode
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.samples = sample_rows(database, self.schema, sample_rows_per_table)
        self.lm = api.get_model(model)
        self.grammar = None
        t0 = time.perf_counter()
        if mode == "schema":
            self.grammar = api.get_grammar("lark", schema_grammar(self.schema), self.lm.vocab)
        elif mode == "generic":
            self.grammar = api.get_grammar("lark", builtin_grammar("sql"), self.lm.vocab)
        self.compile_seconds = time.perf_counter() - t0

    @property
    def dialect(self) -> str:
        """sqlglot's name for the database's dialect."""
        return {"postgresql": "postgres"}.get(self.schema.dialect, self.schema.dialect)

    def prompt_ids(self, question: str) -> list[int]:
        """The chat-templated prompt token ids for ``question``."""
        from ..api import fit_context

        ids = self.lm.encode_prompt(build_prompt(question, self.schema, self.samples))
        fit_context(len(ids), self.max_tokens, self.lm.max_context)
        return ids

    def _finish(self, token_ids: list[int], finish: str, complete: bool, grammar=None) -> tuple[str, int, str]:
        """Text of a finished run; a cut grammar run is rolled back to its longest complete prefix."""
        from ..runtime.streaming import decode_text

        grammar = grammar if grammar is not None else self.grammar
        if grammar is not None and not complete:
            m = grammar.matcher()
            last = -1
            for i, t in enumerate(token_ids):
                if not m.advance(t):
                    break
                if m.is_accepting():
                    last = i
            if last >= 0:
                return decode_text(self.lm.vocab, token_ids[:last + 1]).strip(), last + 1, "truncated"
        text = decode_text(self.lm.vocab, token_ids)
        if self.grammar is None:
            text = extract_sql(text)
        return text.strip(), len(token_ids), finish

    def strict_grammar(self):
        """The single-table grammar (every column in scope by construction), compiled on first use."""
        from .. import api

        if self.mode != "schema":
            raise ValueError("the strict grammar exists only in schema mode")
        return api.get_grammar("lark", schema_grammar(self.schema, joins=False), self.lm.vocab)

    def _single(self, ids: list[int], temperature: float, seed: int | None, grammar=None) -> Candidate:
        from ..api import _sampling
        from ..runtime.decode import iter_decode
        from ..runtime.streaming import decode_text

        t0 = time.perf_counter()
        grammar = grammar if grammar is not None else self.grammar
        constraint = None if grammar is None else StatementEnd(grammar.matcher(), self.lm.vocab)
        steps = iter_decode(self.lm.sequence(), ids, constraint, vocab=self.lm.vocab, max_tokens=self.max_tokens,
                            sampling=_sampling(temperature, 1.0, 0, 0.0, seed))
        out: list[int] = []
        finish, complete = "length", False
        while True:
            try:
                out.extend(next(steps))
            except StopIteration as stop:
                finish, complete = stop.value.finish_reason, stop.value.complete
                break
            if constraint is None and _statement_done(decode_text(self.lm.vocab, out)):
                finish, complete = "stop", True
                break
        text, n, finish = self._finish(out, finish, complete, grammar)
        return Candidate(text, n, finish, time.perf_counter() - t0, temperature)

    def _batch(self, ids: list[int], n: int, temperature: float, seed: int | None) -> list[Candidate]:
        from ..api import _sampling
        from ..runtime.decode import decode_batch

        t0 = time.perf_counter()
        constraints = [None if self.grammar is None else StatementEnd(self.grammar.matcher(), self.lm.vocab)
                       for _ in range(n)]
        results = decode_batch(self.lm.batch(), [ids] * n, constraints, vocab=self.lm.vocab,
                               max_tokens=self.max_tokens, sampling=_sampling(temperature, 1.0, 0, 0.0, seed))
        dt = (time.perf_counter() - t0) / n
        out = []
        for r in results:
            text, k, finish = self._finish(r.token_ids, r.finish_reason, r.complete)
            out.append(Candidate(text, k, finish, dt, temperature))
        return out

    def candidates(self, question: str, n: int = 1, *, temperature: float = 0.0, seed: int | None = None,
                   sample_temperature: float = 0.8) -> list[Candidate]:
        """``n`` queries: the first at ``temperature``, the rest sampled in one batch at
        ``sample_temperature`` (or ``temperature`` when that is not 0)."""
        if n < 1:
            raise ValueError("candidates must be >= 1")
        ids = self.prompt_ids(question)
        first = self._single(ids, temperature, seed)
        if n == 1:
            return [first]
        t = temperature if temperature > 0 else sample_temperature
        rest_seed = None if seed is None else seed + 1
        return [first] + self._batch(ids, n - 1, t, rest_seed if rest_seed is not None else 0)

    def evaluate(self, candidate: Candidate, *, execute: bool = True) -> Candidate:
        """Check ``candidate`` with sqlglot, then have the database compile it (nothing runs); if
        both pass and ``execute``, run it read-only."""
        candidate.check = analyze(candidate.sql, self.schema)
        if candidate.check.ok:
            candidate.check.compile_error = compile_error(self.database, candidate.sql, dialect=self.dialect,
                                                          timeout_s=self.timeout_s)
        if execute and candidate.check.ok:
            candidate.execution = run_query(self.database, candidate.sql, dialect=self.dialect,
                                            timeout_s=self.timeout_s, max_rows=self.max_rows)
        return candidate

    def repair(self, ids: list[int], cands: list[Candidate], *, retries: int, fallback_tries: int,
               sample_temperature: float = 0.8, seed: int | None = None, execute: bool = True) -> list[Candidate]:
        """Append candidates to ``cands`` until one passes the checks (:meth:`evaluate`).

        First up to ``retries`` samples at ``sample_temperature`` under the session's grammar; then,
        in schema mode, up to ``fallback_tries`` under the single-table grammar (its greedy query,
        then samples), whose columns are in scope by construction.
        """
        base = seed or 0
        for attempt in range(retries):
            if any(c.check.ok for c in cands):
                return cands
            cands.append(self.evaluate(self._single(ids, sample_temperature, base + 1000 + attempt), execute=execute))
        if self.mode != "schema":
            return cands
        strict = None
        for attempt in range(fallback_tries):
            if any(c.check.ok for c in cands):
                break
            strict = strict or self.strict_grammar()
            temperature, s = (0.0, seed) if attempt == 0 else (sample_temperature, base + 2000 + attempt)
            cands.append(self.evaluate(self._single(ids, temperature, s, grammar=strict), execute=execute))
        return cands


def _result_key(rows) -> tuple:
    return tuple(sorted(Counter(map(repr, rows)).items()))


def choose(cands: list[Candidate], policy: str = "first") -> Candidate:
    """The candidate to answer with.

    ``first``: the first that ran and returned rows, else the first that ran, else the first that
    passed the static check, else the first. ``vote``: among those that ran, the largest group with
    equal result multisets (ties: the group with the earliest member), answered by its first member.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
    ran = [c for c in cands if c.execution is not None and c.execution.ok]
    if policy == "vote" and ran:
        groups: dict[tuple, list[Candidate]] = {}
        for c in ran:
            groups.setdefault(_result_key(c.execution.rows), []).append(c)
        best = max(groups.values(), key=lambda g: (len(g), -cands.index(g[0])))
        return best[0]
    for pool in ([c for c in ran if c.execution.rows], ran,
                 [c for c in cands if c.check is not None and c.check.ok]):
        if pool:
            return pool[0]
    return cands[0]


def text_to_sql(question: str, database, *, model=None, candidates: int = 1, temperature: float = 0.0,
                seed: int | None = None, execute: bool = True, policy: str = "vote", retries: int = 2,
                max_tokens: int = 128, max_rows: int = 100, timeout_s: float = DEFAULT_TIMEOUT_S,
                sample_rows_per_table: int = 2, sample_temperature: float = 0.8, mode: str = "schema") -> SQLResult:
    """Answer ``question`` with one ``SELECT`` over ``database`` (a SQLite path or a SQLAlchemy URL).

    The query is generated under the grammar built from the live schema, so every table and
    column it names exists. Every query is checked by sqlglot (names in scope) and compiled by the
    database (``EXPLAIN``: nothing runs). With ``candidates=1`` a query failing the checks is
    resampled up to ``retries`` times; when none passes, up to ``retries + 1`` more are generated
    under the single-table grammar, whose columns are in scope by construction; with
    ``candidates=K`` K queries are generated (the first at
    ``temperature``, the rest sampled in one batch), each that passes the check is run read-only,
    and ``policy`` (``first`` or ``vote``) picks the answer. ``execute=False`` only generates and checks.
    Raises :class:`~guidewire.sql.errors.DatabaseError` / :class:`~guidewire.sql.errors.EmptySchemaError`
    for a database that cannot be read or has no tables.
    """
    session = SQLSession(database, model=model, mode=mode, sample_rows_per_table=sample_rows_per_table,
                         max_tokens=max_tokens, timeout_s=timeout_s, max_rows=max_rows)
    return answer(session, question, candidates=candidates, temperature=temperature, seed=seed, execute=execute,
                  policy=policy, retries=retries, sample_temperature=sample_temperature)


def answer(session: SQLSession, question: str, *, candidates: int = 1, temperature: float = 0.0,
           seed: int | None = None, execute: bool = True, policy: str = "vote", retries: int = 2,
           sample_temperature: float = 0.8) -> SQLResult:
    """:func:`text_to_sql` over an open :class:`SQLSession` (reuses its schema, grammar and model)."""
    if retries < 0:
        raise ValueError("retries must be >= 0")
    cands = [session.evaluate(c, execute=execute) for c in session.candidates(
        question, candidates, temperature=temperature, seed=seed, sample_temperature=sample_temperature)]
    session.repair(session.prompt_ids(question), cands, retries=retries if candidates == 1 else 0,
                   fallback_tries=retries + 1, sample_temperature=sample_temperature, seed=seed, execute=execute)
    chosen = choose(cands, policy) if execute else next((c for c in cands if c.check.ok), cands[0])
    ex = chosen.execution
    if ex is not None:
        return SQLResult(chosen.sql, ex.rows, ex.error, cands)
    return SQLResult(chosen.sql, None, None if chosen.check.ok else chosen.check.problem(), cands)
