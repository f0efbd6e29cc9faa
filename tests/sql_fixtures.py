"""Small SQLite databases for the text-to-SQL tests, made with the stdlib ``sqlite3`` only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

SPIDER = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "spider"
if not SPIDER.is_dir():
    SPIDER = Path("/work/shared/data/spider")

ODD_DDL = """
CREATE TABLE "order" ("id" INTEGER PRIMARY KEY, "group" TEXT, "unit price" REAL, "名前" TEXT);
CREATE TABLE customer (cid INTEGER PRIMARY KEY, name TEXT, "select" TEXT, city TEXT);
CREATE TABLE purchase (pid INTEGER PRIMARY KEY, cid INTEGER REFERENCES customer(cid),
                       oid INTEGER REFERENCES "order"(id), qty INTEGER);
INSERT INTO "order" VALUES (1, 'a', 2.5, 'りんご'), (2, 'b', 4.0, 'みかん');
INSERT INTO customer VALUES (1, 'Ann', 'x', 'Paris'), (2, 'Bob', 'y', 'Rome');
INSERT INTO purchase VALUES (1, 1, 1, 3), (2, 1, 2, 1), (3, 2, 2, 5);
"""


def make_db(path: Path, ddl: str = ODD_DDL) -> Path:
    """A SQLite file at ``path`` built from ``ddl``; returns the path."""
    conn = sqlite3.connect(str(path))
    conn.executescript(ddl)
    conn.commit()
    conn.close()
    return path
