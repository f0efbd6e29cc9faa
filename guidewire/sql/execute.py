"""A read-only execution sandbox: only a single ``SELECT`` ever runs, bounded in time and rows.

SQLite: a ``mode=ro`` URI connection with ``PRAGMA query_only``, an authorizer that denies every
action but reading and functions, a deadline enforced by the progress handler and a row cap.
SQLAlchemy URLs: a ``READ ONLY`` transaction (PostgreSQL, MySQL), a statement timeout where the
dialect has one, always rolled back. Before either, sqlglot must read the text as one read-only
``SELECT`` (:func:`guidewire.sql.check.is_read_only`).

:func:`compile_error` asks the database to compile a query without running it (``EXPLAIN``, under
the same read-only guards): the database's own name resolution, aggregate rules and column counts
of compound selects and ``IN`` subqueries, a semantic check with no rows read.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from .check import is_read_only, parse_one
from .errors import UnsafeQueryError
from .schema import connect_sqlite_readonly, is_url, sqlalchemy_engine

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ROWS = 1000

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


@dataclass
class Execution:
    """The outcome of running one query: ``rows`` (at most the cap), ``error`` (None or the database's message)."""

    rows: list[tuple] | None
    error: str | None
    truncated: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the query ran without error."""
        return self.error is None


def require_select(sql: str, dialect: str = "sqlite") -> None:
    """Raise :class:`UnsafeQueryError` unless sqlglot reads ``sql`` as one read-only ``SELECT``."""
    try:
        tree = parse_one(sql, dialect)
    except ValueError as exc:
        raise UnsafeQueryError(f"refusing to run a statement sqlglot cannot parse ({exc})") from None
    if not is_read_only(tree):
        raise UnsafeQueryError(f"refusing to run {type(tree).__name__}: only a single SELECT is executed")


def _authorizer(action, arg1, arg2, dbname, source):
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def _run_sqlite(path, sql: str, timeout_s: float, max_rows: int) -> Execution:
    conn = connect_sqlite_readonly(path)
    deadline = time.monotonic() + timeout_s
    conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
    conn.set_authorizer(_authorizer)
    t0 = time.monotonic()
    try:
        cur = conn.execute(sql)
        rows = cur.fetchmany(max_rows + 1)
        truncated = len(rows) > max_rows
        return Execution([tuple(r) for r in rows[:max_rows]], None, truncated, time.monotonic() - t0)
    except sqlite3.OperationalError as exc:
        msg = str(exc)
        if msg == "interrupted":
            msg = f"statement timeout: interrupted after {timeout_s:g} s"
        return Execution(None, msg, False, time.monotonic() - t0)
    except (sqlite3.DatabaseError, sqlite3.Warning, OverflowError, ValueError) as exc:
        return Execution(None, str(exc), False, time.monotonic() - t0)
    finally:
        conn.close()


def _explain_sql(sql: str) -> str:
    return "EXPLAIN " + sql.strip().rstrip(";")


def _run_sqlalchemy(url: str, sql: str, timeout_s: float, max_rows: int) -> Execution:
    import sqlalchemy

    engine = sqlalchemy_engine(url)
    t0 = time.monotonic()
    try:
        with engine.connect() as conn:
            name = engine.dialect.name
            if name == "postgresql":
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}")
            elif name in ("mysql", "mariadb"):
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
            try:
                result = conn.exec_driver_sql(sql)
                rows = result.fetchmany(max_rows + 1)
                return Execution([tuple(r) for r in rows[:max_rows]], None, len(rows) > max_rows,
                                 time.monotonic() - t0)
            finally:
                conn.rollback()
    except sqlalchemy.exc.DBAPIError as exc:
        msg = str(getattr(exc, "orig", exc)).strip().splitlines()
        return Execution(None, msg[0] if msg else type(exc).__name__, False, time.monotonic() - t0)
    finally:
        engine.dispose()


def compile_error(database, sql: str, *, dialect: str = "sqlite", timeout_s: float = DEFAULT_TIMEOUT_S) -> str | None:
    """The database's message if it cannot compile ``sql``, ``None`` if it can; nothing is executed.

    ``sql`` must pass :func:`require_select` first (else :class:`UnsafeQueryError`). The database
    compiles ``EXPLAIN <sql>``, which resolves every name and checks the statement's shape but reads
    no rows of the tables (SQLite lists the program, PostgreSQL/MySQL the plan), on the same
    read-only connection :func:`run_query` uses.
    """
    if timeout_s <= 0:
        raise ValueError("timeout_s must be > 0")
    require_select(sql, dialect)
    explain = _explain_sql(sql)
    if is_url(str(database)):
        ex = _run_sqlalchemy(str(database), explain, timeout_s, 10_000)
    else:
        ex = _run_sqlite(database, explain, timeout_s, 100_000)
    return ex.error


def run_query(database, sql: str, *, dialect: str = "sqlite", timeout_s: float = DEFAULT_TIMEOUT_S,
              max_rows: int = DEFAULT_MAX_ROWS) -> Execution:
    """Run ``sql`` read-only on ``database`` (SQLite path or SQLAlchemy URL).

    Raises :class:`UnsafeQueryError` (nothing runs) unless ``sql`` is one read-only ``SELECT``;
    database errors and timeouts come back in :attr:`Execution.error`.
    """
    if timeout_s <= 0 or max_rows < 1:
        raise ValueError("timeout_s must be > 0 and max_rows >= 1")
    require_select(sql, dialect)
    if is_url(str(database)):
        return _run_sqlalchemy(str(database), sql, timeout_s, max_rows)
    return _run_sqlite(database, sql, timeout_s, max_rows)
