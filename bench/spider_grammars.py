"""Compile the schema-aware SQL grammar of every Spider database and walk the gold queries.

    python bench/spider_grammars.py [--data ../shared/data/spider] [--vocab smollm2]

Prints per-database compile time (wall and CPU ms: a fresh compile of each schema in one process) and
the number of tables/columns, the gold-query acceptance of the databases that have questions
(token ids of the model's tokenizer walked through a matcher, and raw bytes), and a summary.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from guidewire.core import Vocab  # noqa: E402
from guidewire.grammar import compile_lark  # noqa: E402
from guidewire.sql.coverage import gold_coverage  # noqa: E402
from guidewire.sql.grammar import schema_grammar  # noqa: E402
from guidewire.sql.schema import read_schema  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "spider"))
    p.add_argument("--vocab", default="smollm2")
    p.add_argument("--out", default=None, help="write the per-database rows as JSON here")
    args = p.parse_args(argv)
    data = Path(args.data)
    vocab = Vocab.load(args.vocab)
    encode = None
    try:
        from guidewire.core.vocab import _named_tokenizer

        tok = _named_tokenizer(args.vocab)[0]
        encode = lambda q: tok.encode(q, add_special_tokens=False)  # noqa: E731
    except Exception:  # a path vocab: bytes only
        pass
    questions = collections.defaultdict(list)
    if (data / "dev_subset.json").is_file():
        for it in json.loads((data / "dev_subset.json").read_text()):
            questions[it["db_id"]].append(it["query"])
    rows, failures = [], []
    acc_tok = acc_bytes = walked = 0
    for f in sorted((data / "database").glob("*.sqlite")):
        try:
            s = read_schema(f)
            t0, c0 = time.perf_counter(), time.process_time()
            g = compile_lark(schema_grammar(s), vocab)
            ms = (time.perf_counter() - t0) * 1000
            cpu_ms = (time.process_time() - c0) * 1000
        except Exception as exc:
            failures.append((f.stem, f"{type(exc).__name__}: {exc}"))
            continue
        row = {"db": f.stem, "tables": len(s.tables), "columns": sum(len(t.columns) for t in s.tables),
               "compile_ms": round(ms, 1), "compile_cpu_ms": round(cpu_ms, 1)}
        if f.stem in questions:
            rb = gold_coverage(g, questions[f.stem])
            rt = gold_coverage(g, questions[f.stem], encode) if encode else rb
            row.update(gold=rb.total, accepted_bytes=rb.accepted, accepted_tokens=rt.accepted)
            walked += rb.total
            acc_bytes += rb.accepted
            acc_tok += rt.accepted
        rows.append(row)
        print(json.dumps(row), flush=True)
    ms = sorted(r["compile_ms"] for r in rows)
    cpu = sorted(r["compile_cpu_ms"] for r in rows)
    cols = max(rows, key=lambda r: r["columns"])
    print(f"\n{len(rows)} databases compiled, {len(failures)} failed {failures}")
    print(f"compile CPU ms: median {statistics.median(cpu):.0f}, p90 {cpu[int(0.9 * (len(cpu) - 1))]:.0f}, "
          f"max {cpu[-1]:.0f}; widest schema {cols['compile_cpu_ms']:.0f} ms CPU")
    print(f"compile wall ms: median {statistics.median(ms):.0f}, p90 {ms[int(0.9 * (len(ms) - 1))]:.0f}, "
          f"max {ms[-1]:.0f}; widest schema {cols['db']} ({cols['tables']} tables, {cols['columns']} columns) "
          f"{cols['compile_ms']:.0f} ms")
    print(f"gold queries accepted: tokens {acc_tok}/{walked}, bytes {acc_bytes}/{walked}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "failures": failures}, indent=1))
    return 1 if failures or acc_bytes < walked else 0


if __name__ == "__main__":
    sys.exit(main())
