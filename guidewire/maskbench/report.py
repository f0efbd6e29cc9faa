"""Summaries, the Markdown report and the TTFM/TBM plots of a MaskBench run."""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict

import numpy as np

from .data import SERIALIZATIONS
from .evaluate import STATUSES

ERROR_STATUSES = STATUSES[1:]
_SHORT = {"compile_error": "C", "validation_error": "V", "invalidation_error": "I", "timeout": "T",
          "memory": "M", "error": "E"}
_POINTER = re.compile(r" at #\S*")
TIMING_NOTE = ("TTFM = compile + first mask of a fresh matcher (ms); TBM = every later mask computed while "
               "walking the test instances, including the final EOS-deciding mask (µs). Timings are only "
               "meaningful with `--jobs 1` on an otherwise idle machine.")


def _pct(values, qs=(50, 90, 99), mean: bool = False) -> dict:
    """Percentiles (and optionally the mean) of ``values``; ``None`` entries when empty."""
    a = np.asarray(values, dtype=np.float64)
    out = {f"p{q}": (round(float(np.percentile(a, q)), 3) if a.size else None) for q in qs}
    if mean:
        out["mean"] = round(float(a.mean()), 3) if a.size else None
    return out


def summarize(records: list[dict], tbm: dict[str, np.ndarray], info: dict) -> dict:
    """Per-engine counts and timing percentiles (the content of summary.json)."""
    engines: dict[str, dict] = {}
    for engine in info["engines"]:
        recs = [r for r in records if r["engine"] == engine]
        status = Counter(r["status"] for r in recs)
        inst = Counter()
        notes = 0
        for r in recs:
            inst.update(r.get("counts") or {})
            notes += sum(1 for o in r.get("instances", []) if o.get("note"))
        samples = tbm.get(engine, np.zeros(0))
        engines[engine] = {
            "schemas": len(recs),
            "passing": status["pass"],
            **{s: status[s] for s in ERROR_STATUSES},
            "instances": {k: inst[k] for k in ("valid", "valid_ok", "invalid", "invalid_ok",
                                               "skipped_untokenizable")},
            "inconsistencies": notes,
            "compile_ms": _pct([r["compile_ms"] for r in recs if r.get("compile_ms") is not None]),
            "ttfm_ms": _pct([r["ttfm_ms"] for r in recs if r.get("ttfm_ms") is not None]),
            "tbm_us": {**_pct(samples, mean=True), "count": int(samples.size),
                       "max": round(float(samples.max()), 1) if samples.size else None},
        }
    return {"run": info, "engines": engines}


def write_outputs(out: str, records: list[dict], tbm: dict[str, np.ndarray], info: dict,
                  plots: bool = True) -> dict:
    """Write summary.json, TBM samples, plots and report.md into ``out``; return the summary."""
    summary = summarize(records, tbm, info)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    os.makedirs(os.path.join(out, "samples"), exist_ok=True)
    for engine, a in tbm.items():
        np.save(os.path.join(out, "samples", f"tbm_us_{engine}.npy"), a)
    images = plot_distributions(out, records, tbm, info["engines"]) if plots else []
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write(render_report(summary, records, images))
    return summary


def plot_distributions(out: str, records: list[dict], tbm: dict[str, np.ndarray],
                       engines: list[str]) -> list[str]:
    """Log-x CDF plots of TTFM (ms) and TBM (µs) per engine; returns the PNG file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {
        "ttfm_cdf.png": ("TTFM (compile + first mask), ms",
                         {e: np.asarray([r["ttfm_ms"] for r in records
                                         if r["engine"] == e and r.get("ttfm_ms") is not None]) for e in engines}),
        "tbm_cdf.png": ("TBM (mask computation), µs", {e: tbm.get(e, np.zeros(0)) for e in engines}),
    }
    names = []
    for fname, (label, data) in series.items():
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for engine, a in data.items():
            a = np.sort(np.asarray(a, dtype=np.float64))
            a = a[a > 0]
            if a.size:
                ax.step(a, np.arange(1, a.size + 1) / a.size, where="post",
                        label=f"{engine} (n={a.size:,}, p50={np.median(a):.3g})")
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.01)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title(f"MaskBench {label.split(',')[0]} CDF")
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=110)
        plt.close(fig)
        names.append(fname)
    return names


def _fmt(v, digits: int = 3) -> str:
    """A timing for a table cell: 3 significant digits, thousands written out."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"
    return str(v)


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _error_cell(counter: Counter) -> str:
    parts = [f"{_SHORT[s]}{counter[s]}" for s in ERROR_STATUSES if counter[s]]
    return " ".join(parts) or "0"


def _group_table(records: list[dict], engines: list[str], key_fn, title: str) -> str:
    """Passing and error counts per group (subset or feature), engines side by side."""
    groups: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    sizes: Counter = Counter()
    for r in records:
        for key in key_fn(r):
            groups[key][r["engine"]][r["status"]] += 1
            if r["engine"] == engines[0]:
                sizes[key] += 1
    header = [title, "schemas"]
    for e in engines:
        header += [f"{e} pass", f"{e} errors"]
    rows = []
    for key in sorted(groups, key=lambda k: (-sizes[k], k)):
        row = [key, sizes[key]]
        for e in engines:
            c = groups[key][e]
            n = sum(c.values())
            row += [f"{c['pass']} ({100 * c['pass'] / n:.0f}%)" if n else "–", _error_cell(c)]
        rows.append(row)
    return _table(header, rows)


def _instance_text(path: str, test: int, ser: str, limit: int = 160) -> str:
    """The serialized text of one test instance, shortened for the report."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["tests"][test]["data"]
        text = SERIALIZATIONS[ser](data)
    except Exception:  # noqa: BLE001 - the report must not fail on a vanished file
        return "?"
    text = text if len(text) <= limit else text[:limit] + "…"
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def _bad_instances(records: list[dict], valid: bool, per_engine: int) -> list[list]:
    rows = []
    taken: Counter = Counter()
    for r in records:
        for o in r.get("instances", []):
            if o.get("ok") is False and o["valid"] == valid and taken[r["engine"]] < per_engine:
                taken[r["engine"]] += 1
                where = "end" if o.get("pos") is not None and o.get("pos") == o.get("ntok") else o.get("pos")
                rows.append([r["engine"], os.path.basename(r["file"]), o["test"], o["ser"],
                             "–" if valid is False else where, _instance_text(r["file"], o["test"], o["ser"])])
    return rows


def _compile_errors(records: list[dict], engines: list[str], top: int = 15) -> str:
    parts = []
    for e in engines:
        msgs = Counter(_POINTER.sub(" at #…", (r.get("error") or "").split("\n")[0])[:110] for r in records
                       if r["engine"] == e and r["status"] in ("compile_error", "memory", "error"))
        if msgs:
            parts.append(f"**{e}**\n\n" + _table(["count", "message"],
                                                 [[n, m.replace("|", "\\|")] for m, n in msgs.most_common(top)]))
    return "\n".join(parts) or "None.\n"


def _disagreements(records: list[dict], engines: list[str], limit: int = 40) -> str:
    if len(engines) < 2:
        return ""
    by_file: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in records:
        by_file[r["file"]][r["engine"]] = r
    base = engines[0]
    out = ["## Disagreements\n"]
    for peer in engines[1:]:
        rows = [[os.path.basename(f), d[base]["status"], d[peer]["status"], (d[base].get("error") or "")[:90]]
                for f, d in by_file.items()
                if base in d and peer in d and (d[base]["status"] == "pass") != (d[peer]["status"] == "pass")]
        only_peer = sum(1 for row in rows if row[2] == "pass")
        out.append(f"**{base} vs {peer}**: {len(rows)} schemas differ; {peer} passes and {base} fails on "
                   f"{only_peer}, the reverse on {len(rows) - only_peer}.\n")
        if rows:
            rows.sort(key=lambda row: (row[2] != "pass", row[0]))
            out.append(_table(["file", base, peer, f"{base} error"],
                              [[a, b, c, d.replace("|", "\\|")] for a, b, c, d in rows[:limit]]))
    return "\n".join(out) + "\n"


def render_report(summary: dict, records: list[dict], images: list[str]) -> str:
    """The Markdown report: headline table, plots, per-subset/feature tables, error lists."""
    info, eng = summary["run"], summary["engines"]
    engines = info["engines"]
    versions = ", ".join(f"{e} {info['versions'].get(e, '')}".strip() for e in engines)
    md = ["# MaskBench results\n",
          f"{info['files']} schema files; tokenizer `{info['tokenizer']}` (vocab {info['vocab_size']:,}, "
          f"EOS {info['eos_ids']}); engines: {versions}; serializations: {', '.join(info['serializations'])}; "
          f"timeout {info['timeout_s']:g}s, memory cap {info['memory_mb']} MiB, jobs {info['jobs']}; "
          f"wall time {info['wall_s']}s; processes: {info.get('process', 'one worker per engine (warm)')}"
          + (f"; warm-up compile before the heap freeze: "
             + ", ".join(f"{e} {info['warm_up'].get(e, 'off')}" for e in engines) if info.get("warm_up") else "")
          + (f"; a seeded sample of {info['sample']} files (seed {info.get('seed', 0)})" if info.get("sample") else "")
          + ".\n",
          f"{TIMING_NOTE}" + (" **This run used more than one job: treat the timings as rough.**"
                              if info["jobs"] > 1 else "") + "\n",
          "A schema passes iff it compiled and every tokenizable test instance behaved right in every "
          "serialization: valid ones accepted in full (EOS allowed at the end), invalid ones rejected at "
          "some token or at the end. Errors: C compile, V valid instance rejected, I invalid instance "
          "accepted (unsound), T timeout, M memory, E engine crash.\n",
          "## Summary\n"]
    rows = []
    for e in engines:
        s = eng[e]
        n = s["schemas"] or 1
        rows.append([e, s["schemas"], f"{s['passing']} ({100 * s['passing'] / n:.1f}%)",
                     *[s[k] for k in ERROR_STATUSES],
                     " / ".join(_fmt(s["ttfm_ms"][k]) for k in ("p50", "p90", "p99")),
                     " / ".join(_fmt(s["tbm_us"][k]) for k in ("p50", "p90", "p99", "mean", "max"))])
    md.append(_table(["engine", "schemas", "passing", "compile_error", "validation_error", "invalidation_error",
                      "timeout", "memory", "error", "TTFM ms p50/p90/p99", "TBM µs p50/p90/p99/mean/max"], rows))
    rows = [[e, f"{i['valid_ok']}/{i['valid']}", f"{i['invalid_ok']}/{i['invalid']}",
             i["skipped_untokenizable"], eng[e]["inconsistencies"]]
            for e in engines for i in [eng[e]["instances"]]]
    md.append("\nInstances (over compiled schemas):\n\n" + _table(
        ["engine", "valid accepted", "invalid rejected", "skipped (untokenizable)", "mask/matcher inconsistencies"],
        rows))
    md += [f"\n![{img}]({img})\n" for img in images]
    md += ["## Per subset\n", _group_table(records, engines, lambda r: [r["subset"]], "subset"),
           "## Per feature\n", "Each schema counts once under every feature in its `meta.features`.\n",
           _group_table(records, engines, lambda r: r.get("features") or ["(none)"], "feature")]
    bad = _bad_instances(records, valid=False, per_engine=10 ** 9)
    md += ["## Invalidation errors (soundness bugs)\n",
           _table(["engine", "file", "test", "serialization", "pos", "instance"], bad) if bad else "None.\n"]
    bad = _bad_instances(records, valid=True, per_engine=100)
    md += ["## Validation errors (first 100 per engine)\n",
           _table(["engine", "file", "test", "serialization", "rejected at token", "instance"], bad)
           if bad else "None.\n",
           "## Compile errors (most common messages)\n", _compile_errors(records, engines),
           _disagreements(records, engines)]
    return "\n".join(md)


def merge_runs(dirs: list[str], out: str, plots: bool = True) -> dict:
    """Rebuild summary, plots and report from earlier runs' outputs (e.g. one run per engine).

    Each directory must hold results.jsonl, summary.json and samples/; an engine present in
    two of them is taken from the first.
    """
    records: list[dict] = []
    tbm: dict[str, np.ndarray] = {}
    info: dict = {}
    walls: list[float] = []
    for d in dirs:
        with open(os.path.join(d, "summary.json")) as f:
            run_info = json.load(f)["run"]
        new = [e for e in run_info["engines"] if e not in tbm]
        with open(os.path.join(d, "results.jsonl"), encoding="utf-8") as f:
            records += [r for r in map(json.loads, f) if r["engine"] in new]
        for e in new:
            path = os.path.join(d, "samples", f"tbm_us_{e}.npy")
            tbm[e] = np.load(path) if os.path.exists(path) else np.zeros(0, dtype=np.float32)
        if not info:
            info = dict(run_info, engines=[], versions={}, warm_up={}, heap_reserve={}, gc_between={})
        info["engines"] += new
        info["versions"].update({e: run_info["versions"].get(e, "") for e in new})
        for key in ("warm_up", "heap_reserve", "gc_between"):     # per engine: each from its own run
            per = run_info.get(key) or {}
            info[key].update({e: per[e] for e in new if isinstance(per, dict) and e in per})
        info["merged_from"] = info.get("merged_from", []) + [d]
        walls.append(run_info.get("wall_s", 0.0))
    info["wall_s"] = round(sum(walls), 1)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return write_outputs(out, records, tbm, info, plots=plots)
