"""The text-to-SQL prompt: the schema as compact ``CREATE TABLE`` lines, a few sample rows, the question."""

from __future__ import annotations

from .schema import Schema
from .schema import quote_identifier as _quote

INSTRUCTION = "Write one SQLite SELECT query that answers the question. Answer with the SQL only."
_MAX_VALUE_CHARS = 24


def create_table_lines(schema: Schema) -> list[str]:
    """One ``CREATE TABLE`` line per table: columns with types, primary and foreign keys."""
    lines = []

    def quote_identifier(name):
        return _quote(name, dialect=schema.dialect)

    for t in schema.tables:
        cols = [f"{quote_identifier(c.name)} {c.type}".rstrip() for c in t.columns]
        pk = [quote_identifier(c.name) for c in t.columns if c.primary_key]
        if pk:
            cols.append("PRIMARY KEY (" + ", ".join(pk) + ")")
        for fk in t.foreign_keys:
            ref = f"{quote_identifier(fk.ref_table)}({quote_identifier(fk.ref_column)})" if fk.ref_column \
                else quote_identifier(fk.ref_table)
            cols.append(f"FOREIGN KEY ({quote_identifier(fk.column)}) REFERENCES {ref}")
        lines.append(f"CREATE TABLE {quote_identifier(t.name)} (" + ", ".join(cols) + ");")
    return lines


def _value(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, bytes):
        return "<blob>"
    s = str(v).replace("\n", " ")
    if len(s) > _MAX_VALUE_CHARS:
        s = s[:_MAX_VALUE_CHARS - 3] + "..."
    return "'" + s.replace("'", "''") + "'"


def schema_text(schema: Schema, samples: dict[str, list[tuple]] | None = None) -> str:
    """The schema block of the prompt; ``samples`` maps a table name to a few of its rows."""
    out = []
    for t, line in zip(schema.tables, create_table_lines(schema)):
        out.append(line)
        rows = (samples or {}).get(t.name) or []
        if rows:
            out.append("/* rows: " + "; ".join("(" + ", ".join(_value(v) for v in r) + ")" for r in rows) + " */")
    return "\n".join(out)


def build_prompt(question: str, schema: Schema, samples: dict[str, list[tuple]] | None = None) -> str:
    """The user message: schema, question, instruction."""
    return f"{schema_text(schema, samples)}\n\nQuestion: {question.strip()}\n{INSTRUCTION}"
