"""``guidewire bench spider``: one model, four modes per question, on Spider.

Modes: ``unconstrained`` (free text, the statement cut out), ``generic`` (the built-in ``sql``
grammar), ``schema`` (the grammar of the live schema; a query failing sqlglot's scoping check is
resampled up to ``--retries`` times, then once more under the single-table grammar) and ``schema+exec`` (the schema mode's queries -- its greedy
one and resamples -- plus ``--candidates - 1`` samples in one batch, each run read-only, chosen by
outcome: ``first`` and ``vote`` are both scored from the same candidates). Generation sees the shipped database
(schema only); execution runs on a filled copy (:func:`.spider.filled_copy`) and, for
reference, on the shipped empty database. Results go to ``OUT/results.jsonl`` as they come;
``report.md`` and ``accuracy.png`` are written at the end (or with ``--report-only``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from .check import analyze
from .execute import run_query
from .pipeline import SQLSession, choose
from .spider import database_path, filled_copy, has_order_by, load_questions, same_result

MODES = ("unconstrained", "generic", "schema", "schema+exec")
_SESSION_MODE = {"unconstrained": "none", "generic": "generic", "schema": "schema"}


def _execute(db, sql: str):
    try:
        return run_query(db, sql, timeout_s=5.0, max_rows=10_000)
    except Exception as exc:  # UnsafeQueryError (unparseable / not a SELECT) counts as an execution error
        from .execute import Execution

        return Execution(None, f"{type(exc).__name__}: {exc}")


def _score(sql, schema, filled_db, empty_db, gold_filled, gold_empty, ordered) -> dict:
    chk = analyze(sql, schema)
    ex = _execute(filled_db, sql)
    ex0 = _execute(empty_db, sql)
    return {"sql": sql, "parsed": chk.parsed, "real_refs": chk.real_references, "scoped": chk.ok,
            "problem": chk.problem(), "exec_error": ex.error,
            "correct": ex.ok and same_result(ex.rows, gold_filled, ordered),
            "correct_empty": ex0.ok and same_result(ex0.rows, gold_empty, ordered)}


def run_question(item, sessions, data, filled, args) -> dict:
    """All four modes for one Spider entry; returns the JSON record."""
    db_id, q = item["db_id"], item["question"]
    empty_db, filled_db = database_path(data, db_id), filled[db_id]
    ordered = has_order_by(item["query"])
    gold_f = run_query(filled_db, item["query"], max_rows=10_000).rows
    gold_e = run_query(empty_db, item["query"], max_rows=10_000).rows
    rec = {"db_id": db_id, "question": q, "gold": item["query"], "ordered": ordered, "modes": {}}
    greedy = None
    for mode in args.modes:
        if mode == "schema+exec":
            s = sessions[(db_id, "schema")]
            ids = s.prompt_ids(q)
            # the schema mode's queries (greedy, then its resamples) come first, then a batch of samples
            first = greedy or [s.evaluate(s._single(ids, 0.0, None))]
            extra = s._batch(ids, args.candidates - 1, args.sample_temperature, args.seed) if args.candidates > 1 else []
            cands = first + [s.evaluate(c) for c in extra]
            entry = {"tokens": sum(c.tokens for c in cands), "seconds": sum(c.seconds for c in cands),
                     "outcomes": [c.outcome for c in cands]}
            for policy in ("first", "vote"):
                pick = choose(cands, policy)
                entry[policy] = _score(pick.sql, s.schema, filled_db, empty_db, gold_f, gold_e, ordered)
            rec["modes"][mode] = entry
            continue
        s = sessions[(db_id, _SESSION_MODE[mode])]
        ids = s.prompt_ids(q)
        cands = [s.evaluate(s._single(ids, 0.0, None))]
        if mode == "schema":  # as text_to_sql: resamples, then the single-table grammar
            greedy = s.repair(ids, cands, retries=args.retries, fallback_tries=args.retries + 1,
                              sample_temperature=args.sample_temperature, seed=args.seed)
        final = next((c for c in cands if c.check.ok), cands[-1]) if mode == "schema" else cands[0]
        entry = {"tokens": sum(c.tokens for c in cands), "seconds": sum(c.seconds for c in cands),
                 "tries": len(cands), "finish": final.finish}
        entry.update(_score(final.sql, s.schema, filled_db, empty_db, gold_f, gold_e, ordered))
        rec["modes"][mode] = entry
    return rec


def summarize(records: list[dict], modes=MODES, policy: str = "vote") -> dict:
    """Per-mode shares (parse, real references, scoping, execution errors, accuracy) and tokens/s."""
    summary = {}
    for mode in modes:
        entries = [r["modes"][mode] for r in records if mode in r["modes"]]
        if not entries:
            continue
        picks = [e[policy] if mode == "schema+exec" else e for e in entries]
        n = len(picks)
        tokens = sum(e["tokens"] for e in entries)
        secs = sum(e["seconds"] for e in entries)
        row = {"n": n, "parsed": sum(p["parsed"] for p in picks) / n,
               "real_refs": sum(p["real_refs"] for p in picks) / n,
               "scoped": sum(p["scoped"] for p in picks) / n,
               "exec_error": sum(p["exec_error"] is not None for p in picks) / n,
               "accuracy": sum(p["correct"] for p in picks) / n,
               "accuracy_empty": sum(p["correct_empty"] for p in picks) / n,
               "tokens": tokens, "tok_per_s": tokens / secs if secs else 0.0}
        if mode == "schema+exec":
            row["accuracy_first"] = sum(e["first"]["correct"] for e in entries) / n
            row["exec_error_first"] = sum(e["first"]["exec_error"] is not None for e in entries) / n
        summary[mode] = row
    return summary


def write_report(records: list[dict], out: Path, meta: dict) -> str:
    """``report.md`` and ``accuracy.png`` under ``out``; returns the Markdown."""
    summary = summarize(records)
    lines = ["# Spider text-to-SQL bench", "",
             f"{meta.get('questions', len(records))} questions of `{meta.get('split', 'dev_subset.json')}`"
             f" ({meta.get('selection', '')}), model {meta.get('model', 'smollm2')}, max_tokens "
             f"{meta.get('max_tokens')}, candidates {meta.get('candidates')} (sampled at T="
             f"{meta.get('sample_temperature')}), retries {meta.get('retries')}. Execution on filled copies "
             f"({meta.get('fill_rows')} synthetic rows per table; the shipped databases are empty).", "",
             "| mode | n | parseable | real references | in scope | execution errors | execution accuracy "
             "(filled) | accuracy (empty DBs) | tokens/s |", "|---|---|---|---|---|---|---|---|---|"]
    for mode, r in summary.items():
        lines.append(f"| {mode} | {r['n']} | {r['parsed']:.1%} | {r['real_refs']:.1%} | {r['scoped']:.1%} | "
                     f"{r['exec_error']:.1%} | {r['accuracy']:.1%} | {r['accuracy_empty']:.1%} | "
                     f"{r['tok_per_s']:.1f} |")
    if "schema+exec" in summary:
        r = summary["schema+exec"]
        lines += ["", f"schema+exec (table: majority vote) choice policies on the same candidates: majority vote "
                      f"{r['accuracy']:.1%} (errors {r['exec_error']:.1%}), first-with-rows {r['accuracy_first']:.1%} "
                      f"(errors {r['exec_error_first']:.1%})."]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    (out / "summary.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = list(summary)
        metrics = [("parsed", "parseable"), ("real_refs", "real refs"), ("exec_error", "exec errors"),
                   ("accuracy", "exec accuracy")]
        fig, ax = plt.subplots(figsize=(8, 4))
        w = 0.8 / len(names)
        for i, mname in enumerate(names):
            ax.bar([k + i * w for k in range(len(metrics))], [summary[mname][m] * 100 for m, _ in metrics], w,
                   label=mname)
        ax.set_xticks([k + 0.4 - w / 2 for k in range(len(metrics))], [label for _, label in metrics])
        ax.set_ylabel("% of questions")
        ax.set_title(f"Spider ({len(records)} questions), {meta.get('model', 'smollm2')}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "accuracy.png", dpi=100)
        plt.close(fig)
    except ImportError:
        pass
    return text


def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``guidewire bench spider``."""
    p = argparse.ArgumentParser(prog="guidewire bench spider", description=__doc__.splitlines()[0])
    p.add_argument("--data", default="../shared/data/spider", help="Spider directory (dev_subset.json, database/)")
    p.add_argument("--split", default="dev_subset.json")
    p.add_argument("--limit", type=int, default=None, help="the first N questions of a fixed random order (seed 0)")
    p.add_argument("--out", default="bench/results/spider")
    p.add_argument("--model", default=None)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--candidates", type=int, default=4)
    p.add_argument("--retries", type=int, default=2)
    p.add_argument("--sample-temperature", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fill-rows", type=int, default=12)
    p.add_argument("--report-only", action="store_true", help="rewrite the report from OUT/results.jsonl")
    return p


def main(argv=None) -> int:
    """Run the bench; returns the exit status."""
    args = build_parser().parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or args.candidates < 1 or args.max_tokens < 1 or args.retries < 0:
        raise ValueError(f"bad arguments: modes {bad} (choose from {MODES}); candidates, max-tokens >= 1, retries >= 0")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    items = load_questions(args.data, args.split)
    # a fixed random order (seed 0): the first N of it, or any prefix of an interrupted run, is a random sample
    order = random.Random(0).sample(range(len(items)), len(items))
    n = len(items) if args.limit is None else min(args.limit, len(items))
    items = [items[i] for i in order[:n]]
    selection = f"the first {n} of a fixed random order (seed 0)"
    meta = {"split": args.split, "questions": len(items), "selection": selection, "model": args.model or "smollm2",
            "max_tokens": args.max_tokens, "candidates": args.candidates, "retries": args.retries,
            "sample_temperature": args.sample_temperature, "fill_rows": args.fill_rows}
    results = out / "results.jsonl"
    if args.report_only:
        records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        meta.update(questions=len(records), selection=f"the first {len(records)} of a fixed random order (seed 0)")
        print(write_report(records, out, meta))
        return 0
    from tqdm import tqdm

    tmp = tempfile.TemporaryDirectory(prefix="guidewire-spider-")
    filled = {db: filled_copy(database_path(args.data, db), Path(tmp.name) / f"{db}.sqlite", args.fill_rows, args.seed)
              for db in sorted({it["db_id"] for it in items})}
    sessions, compile_s = {}, {}
    records = []
    t0 = time.time()
    with results.open("w") as fh:
        for item in tqdm(items, desc="spider", file=sys.stderr):
            for mode in {_SESSION_MODE.get(m, "schema") for m in args.modes}:
                key = (item["db_id"], mode)
                if key not in sessions:
                    # prompts show the shipped schema; execution (checks, guidance) uses the filled copy
                    sessions[key] = SQLSession(filled[item["db_id"]], model=args.model, mode=mode,
                                               sample_rows_per_table=0, max_tokens=args.max_tokens)
                    compile_s[f"{item['db_id']}/{mode}"] = sessions[key].compile_seconds
            rec = run_question(item, sessions, args.data, filled, args)
            records.append(rec)
            fh.write(json.dumps(rec, default=str) + "\n")
            fh.flush()
    meta["wall_s"] = round(time.time() - t0, 1)
    meta["compile_s"] = compile_s
    print(write_report(records, out, meta))
    tmp.cleanup()
    return 0
