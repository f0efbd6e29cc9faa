"""Live schema introspection: tables, columns, types, primary and foreign keys.

SQLite files are opened read-only (``file:...?mode=ro`` URI, stdlib ``sqlite3``); any other
database is read through a SQLAlchemy URL (``inspect``). Names are kept exactly as the database
spells them; quoting for SQL text is :func:`quote_identifier`'s job.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .errors import DatabaseError, EmptySchemaError

#: SQLite's keywords (https://sqlite.org/lang_keywords.html): a bare identifier spelled like one is quoted.
SQL_KEYWORDS = frozenset("""
ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN BETWEEN BY
CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE
CURRENT_TIME CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DO DROP
EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE EXISTS EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM
FULL GENERATED GLOB GROUP GROUPS HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD
INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING NOTNULL
NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE
RANGE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT ROLLBACK ROW
ROWS SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE
UPDATE USING VACUUM VALUES VIEW VIRTUAL WHEN WHERE WINDOW WITH WITHOUT TRUE FALSE
""".split())

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def needs_quotes(name: str, dialect: str = "sqlite") -> bool:
    """Whether ``name`` must be double-quoted in SQL: not a plain ASCII word, a keyword, or (in
    PostgreSQL, which folds bare names to lower case) not all lower case."""
    if not _BARE.match(name) or name.upper() in SQL_KEYWORDS:
        return True
    return dialect == "postgresql" and name != name.lower()


def quote_identifier(name: str, *, always: bool = False, dialect: str = "sqlite") -> str:
    """``name`` as SQL text: bare when it can be, else double-quoted with ``"`` doubled."""
    if always or needs_quotes(name, dialect):
        return '"' + name.replace('"', '""') + '"'
    return name


@dataclass(frozen=True)
class Column:
    """One column: its name as the database spells it, its declared type, whether it is in the PK."""

    name: str
    type: str = ""
    primary_key: bool = False


@dataclass(frozen=True)
class ForeignKey:
    """``table.column`` references ``ref_table.ref_column``."""

    column: str
    ref_table: str
    ref_column: str


@dataclass(frozen=True)
class Table:
    """A table (or view) with its columns and foreign keys."""

    name: str
    columns: tuple[Column, ...]
    foreign_keys: tuple[ForeignKey, ...] = ()

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (SQL's case-insensitive match), or ``None``."""
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)


@dataclass(frozen=True)
class Schema:
    """The tables of one database, read from the live database; ``dialect`` is ``sqlite`` or SQLAlchemy's name."""

    tables: tuple[Table, ...]
    dialect: str = "sqlite"
    source: str = field(default="", compare=False)

    def table(self, name: str) -> Table | None:
        """The table called ``name`` (case-insensitive), or ``None``."""
        low = name.lower()
        return next((t for t in self.tables if t.name.lower() == low), None)

    def fingerprint(self) -> str:
        """A stable text key of the schema (names, types, keys) for grammar caches."""
        parts = [self.dialect]
        for t in self.tables:
            parts.append(t.name + "(" + ",".join(f"{c.name}:{c.type}:{int(c.primary_key)}" for c in t.columns)
                         + ";" + ",".join(f"{f.column}>{f.ref_table}.{f.ref_column}" for f in t.foreign_keys) + ")")
        return "|".join(parts)


def is_url(database: str) -> bool:
    """Whether ``database`` is a SQLAlchemy URL (``dialect[+driver]://...``) rather than a file path."""
    return bool(re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", str(database)))


def sqlite_readonly_uri(path: str | os.PathLike) -> str:
    """The ``file:`` URI that opens ``path`` read-only (``mode=ro``), after checking the file is readable."""
    p = Path(path)
    if not p.exists():
        raise DatabaseError(f"database file {str(p)!r} does not exist")
    if not p.is_file():
        raise DatabaseError(f"database path {str(p)!r} is not a file")
    if not os.access(p, os.R_OK):
        raise DatabaseError(f"database file {str(p)!r} is not readable (permission denied)")
    return "file:" + quote(str(p.resolve())) + "?mode=ro"


def connect_sqlite_readonly(path: str | os.PathLike, timeout: float = 5.0) -> sqlite3.Connection:
    """A read-only ``sqlite3`` connection to ``path`` (``mode=ro`` plus ``PRAGMA query_only``)."""
    uri = sqlite_readonly_uri(path)
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise DatabaseError(f"{str(path)!r} is not a readable SQLite database ({exc})") from None
    return conn


def _sqlite_schema(conn: sqlite3.Connection, source: str) -> Schema:
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
        "ORDER BY rowid")]
    tables = []
    for name in names:
        q = quote_identifier(name, always=True)
        cols = tuple(Column(r[1], r[2] or "", bool(r[5])) for r in conn.execute(f"PRAGMA table_info({q})"))
        fks = tuple(ForeignKey(r[3], r[2], r[4] if r[4] is not None else "")
                    for r in conn.execute(f"PRAGMA foreign_key_list({q})"))
        if cols:
            tables.append(Table(name, cols, fks))
    return Schema(tuple(tables), "sqlite", source)


def sqlalchemy_engine(url: str):
    """A SQLAlchemy engine for ``url``; a missing package or driver is a :class:`DatabaseError`."""
    try:
        import sqlalchemy
    except ImportError:
        raise DatabaseError("a database URL needs SQLAlchemy (pip install sqlalchemy and a driver)") from None
    try:
        return sqlalchemy.create_engine(url)
    except Exception as exc:  # sqlalchemy.exc.ArgumentError, NoSuchModuleError, ImportError of a driver
        raise DatabaseError(f"cannot use database URL {_redact(url)!r}: {exc}") from None


def _redact(url: str) -> str:
    return re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)


def _sqlalchemy_schema(url: str) -> Schema:
    import sqlalchemy

    engine = sqlalchemy_engine(url)
    try:
        insp = sqlalchemy.inspect(engine)
        tables = []
        for name in insp.get_table_names() + insp.get_view_names():
            pk = set((insp.get_pk_constraint(name) or {}).get("constrained_columns") or [])
            cols = tuple(Column(c["name"], str(c.get("type", "")), c["name"] in pk) for c in insp.get_columns(name))
            fks = []
            for fk in insp.get_foreign_keys(name):
                for a, b in zip(fk.get("constrained_columns") or [], fk.get("referred_columns") or []):
                    fks.append(ForeignKey(a, fk["referred_table"], b))
            if cols:
                tables.append(Table(name, cols, tuple(fks)))
        return Schema(tuple(tables), engine.dialect.name, _redact(url))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise DatabaseError(f"cannot read the schema of {_redact(url)!r}: {_first_line(exc)}") from None
    finally:
        engine.dispose()


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def read_schema(database: str | os.PathLike, *, allow_empty: bool = False) -> Schema:
    """The live schema of ``database`` (a SQLite path or a SQLAlchemy URL).

    Raises :class:`DatabaseError` when it cannot be opened or read and :class:`EmptySchemaError`
    when it has no tables (unless ``allow_empty``).
    """
    if is_url(str(database)):
        schema = _sqlalchemy_schema(str(database))
    else:
        conn = connect_sqlite_readonly(database)
        try:
            schema = _sqlite_schema(conn, str(database))
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(f"cannot read the schema of {str(database)!r}: {exc}") from None
        finally:
            conn.close()
    if not schema.tables and not allow_empty:
        raise EmptySchemaError(f"database {schema.source!r} has no tables: no question can be answered from it")
    return schema
