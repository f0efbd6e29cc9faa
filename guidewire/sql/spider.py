"""Spider data: questions, databases, result comparison, and filled copies of empty databases.

The Spider databases shipped in ``shared/data/spider`` hold schemas without rows, where every
``SELECT`` without aggregates returns nothing and execution accuracy cannot tell queries apart.
:func:`filled_copy` writes a copy (never the original) with deterministic synthetic rows: keys
``1..n``, foreign keys drawn from the same range, numbers and short words by column type.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

from .schema import quote_identifier, read_schema

_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "France", "USA", "cat", "dog", "Live final",
          "CD", "DVD", "red", "blue", "north", "south")


def load_questions(data_dir: str | Path, split: str = "dev_subset.json") -> list[dict]:
    """Spider entries (``db_id``, ``question``, ``query``) of ``data_dir/split``."""
    path = Path(data_dir) / split
    if not path.is_file():
        raise FileNotFoundError(f"no Spider question file at {str(path)!r}")
    return json.loads(path.read_text(encoding="utf-8"))


def database_path(data_dir: str | Path, db_id: str) -> Path:
    """The SQLite file of ``db_id``."""
    return Path(data_dir) / "database" / f"{db_id}.sqlite"


def _value(col_type: str, i: int, rng: random.Random, n: int):
    t = col_type.lower()
    if any(k in t for k in ("int", "num", "real", "float", "double", "dec", "bool", "year")):
        return rng.randint(1, n) if rng.random() < 0.7 else rng.randint(1, 300)
    return rng.choice(_WORDS) + ("" if rng.random() < 0.5 else f" {i % 7}")


def filled_copy(source: str | Path, target: str | Path, rows: int = 12, seed: int = 0) -> Path:
    """Copy SQLite file ``source`` to ``target`` and insert ``rows`` synthetic rows per table."""
    target = Path(target)
    shutil.copyfile(source, target)
    target.chmod(0o644)
    schema = read_schema(target)
    rng = random.Random(seed)
    conn = sqlite3.connect(str(target))
    try:
        conn.execute("PRAGMA foreign_keys = OFF")
        for t in schema.tables:
            fk_cols = {f.column.lower() for f in t.foreign_keys}
            cols = ", ".join(quote_identifier(c.name, always=True) for c in t.columns)
            marks = ", ".join("?" for _ in t.columns)
            for i in range(1, rows + 1):
                vals = []
                for c in t.columns:
                    if c.primary_key:
                        vals.append(i if c.name.lower() not in fk_cols else rng.randint(1, rows))
                    elif c.name.lower() in fk_cols:
                        vals.append(rng.randint(1, rows))
                    else:
                        vals.append(_value(c.type, i, rng, rows))
                try:
                    conn.execute(f"INSERT INTO {quote_identifier(t.name, always=True)} ({cols}) VALUES ({marks})", vals)
                except sqlite3.DatabaseError:
                    pass  # a unique or check constraint refused this synthetic row: fewer rows
        conn.commit()
    finally:
        conn.close()
    target.chmod(0o444)
    return target


def same_result(pred_rows, gold_rows, ordered: bool) -> bool:
    """Spider's execution match: equal rows as multisets, or as sequences when ``ordered``."""
    if pred_rows is None or gold_rows is None:
        return False
    p = [tuple(r) for r in pred_rows]
    g = [tuple(r) for r in gold_rows]
    if ordered:
        return p == g
    return Counter(map(repr, p)) == Counter(map(repr, g))


def has_order_by(query: str) -> bool:
    """Whether the outermost query orders its rows (so results compare as sequences)."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(query, read="sqlite")
    except SqlglotError:
        return "order by" in query.lower()
    return tree.args.get("order") is not None
