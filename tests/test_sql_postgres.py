"""Text-to-SQL plumbing against a real PostgreSQL server (schema through SQLAlchemy, read-only runs).

Starts a throw-away server (``initdb`` + ``pg_ctl``, Unix socket only, in a temp dir) and skips,
saying why, where that is impossible (no binaries, no driver, no unprivileged user to run it).
Every step is bounded by a timeout.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess

import pytest

from guidewire.grammar import compile_lark
from guidewire.sql import UnsafeQueryError, read_schema
from guidewire.sql.check import analyze
from guidewire.sql.coverage import walk_query
from guidewire.sql.execute import _run_sqlalchemy, compile_error, run_query
from guidewire.sql.grammar import schema_grammar

DDL = """
CREATE TABLE "Order" (id integer PRIMARY KEY, "unit price" numeric, "名前" text);
CREATE TABLE customer (cid integer PRIMARY KEY, name text, "select" text, "City" text);
CREATE TABLE purchase (pid integer PRIMARY KEY, cid integer REFERENCES customer(cid), oid integer REFERENCES "Order"(id));
INSERT INTO customer VALUES (1, 'Ann', 'x', 'Rome'), (2, 'Bob', 'y', 'Oslo');
INSERT INTO "Order" VALUES (1, 2.5, 'りんご');
INSERT INTO purchase VALUES (1, 1, 1), (2, 2, 1);
"""


def _tool(name):
    path = shutil.which(name)
    if path is None:
        for d in sorted(os.listdir("/usr/lib/postgresql"), reverse=True) if os.path.isdir("/usr/lib/postgresql") else []:
            cand = f"/usr/lib/postgresql/{d}/bin/{name}"
            if os.path.exists(cand):
                return cand
    return path


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory):
    pytest.importorskip("sqlalchemy", reason="SQLAlchemy is not installed")
    pytest.importorskip("psycopg", reason="the psycopg driver is not installed")
    initdb, pg_ctl, psql = _tool("initdb"), _tool("pg_ctl"), _tool("psql")
    if not (initdb and pg_ctl and psql):
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl, psql) not found")
    base = tmp_path_factory.mktemp("pg")
    run_as = []
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to start the server as")
        shutil.chown(base, "postgres")
        os.chmod(base, 0o755)
        run_as = ["runuser", "-u", "postgres", "--"]
        for p in base.parents:  # the postgres user must reach the directory
            if str(p).startswith("/tmp/"):
                os.chmod(p, os.stat(p).st_mode | 0o011)
    data, sock = base / "data", base
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        subprocess.run(run_as + [initdb, "-D", str(data), "-A", "trust", "-U", "postgres"], check=True,
                       capture_output=True, timeout=120)
        subprocess.run(run_as + [pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "-o",
                                 f"-k {sock} -p {port} -c listen_addresses=''", "start"],
                       check=True, capture_output=True, timeout=90)
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"could not start a PostgreSQL server: {exc}")
    try:
        subprocess.run(run_as + [psql, "-h", str(sock), "-p", str(port), "-U", "postgres", "-v", "ON_ERROR_STOP=1",
                                 "-c", DDL], check=True, capture_output=True, timeout=60)
        yield f"postgresql+psycopg://postgres@/postgres?host={sock}&port={port}"
    finally:
        subprocess.run(run_as + [pg_ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "30", "stop"],
                       capture_output=True, timeout=60)


def _count(url):
    return run_query(url, "SELECT count(*) FROM customer", dialect="postgres").rows[0][0]


def test_postgres_schema_grammar_and_read_only_runs(pg_url, smollm2):
    s = read_schema(pg_url)
    assert s.dialect == "postgresql"
    assert {t.name for t in s.tables} == {"Order", "customer", "purchase"}
    assert {(f.column, f.ref_table) for f in s.table("purchase").foreign_keys} == {("cid", "customer"), ("oid", "Order")}
    g = compile_lark(schema_grammar(s), smollm2)
    q = 'SELECT T1.name, T3."名前" FROM customer AS T1 JOIN purchase AS T2 ON T1.cid = T2.cid JOIN "Order" AS T3 ON T2.oid = T3.id'
    assert walk_query(g, q) == -1 and analyze(q, s).ok
    assert sorted(run_query(pg_url, q, dialect="postgres").rows) == [("Ann", "りんご"), ("Bob", "りんご")]
    assert walk_query(g, "SELECT name FROM Order") != -1  # a keyword must be quoted
    assert walk_query(g, "SELECT City FROM customer") != -1  # PostgreSQL folds bare names: quote mixed case
    assert run_query(pg_url, "SELECT City FROM customer", dialect="postgres").error is not None
    assert walk_query(g, 'SELECT "City" FROM customer WHERE NAME = \'Ann\'') == -1
    assert run_query(pg_url, 'SELECT "City" FROM customer WHERE NAME = \'Ann\'', dialect="postgres").rows == [("Rome",)]
    err = run_query(pg_url, "SELECT nme FROM customer", dialect="postgres").error
    assert err is not None and "nme" in err
    with pytest.raises(UnsafeQueryError):
        run_query(pg_url, "DELETE FROM customer", dialect="postgres")
    # below the sqlglot gate the READ ONLY transaction refuses writes
    res = _run_sqlalchemy(pg_url, "DELETE FROM customer", 5.0, 10)
    assert res.error is not None and "read-only" in res.error
    slow = _run_sqlalchemy(pg_url, "SELECT pg_sleep(3)", 0.3, 10)
    assert slow.error is not None and "timeout" in slow.error
    # the server's own compile check (EXPLAIN plans, runs nothing): pg_sleep(3) passes under a 0.3 s timeout
    assert compile_error(pg_url, "SELECT pg_sleep(3)", dialect="postgres", timeout_s=0.3) is None
    assert compile_error(pg_url, q, dialect="postgres") is None
    for bad in ["SELECT nme FROM customer", "SELECT cid FROM customer JOIN purchase ON customer.cid = purchase.cid",
                "SELECT name FROM customer WHERE count(*) > 1", "SELECT name FROM customer GROUP BY cid HAVING City = 'x'"]:
        want = run_query(pg_url, bad, dialect="postgres").error
        assert want is not None and compile_error(pg_url, bad, dialect="postgres") == want, bad
    assert _count(pg_url) == 2
