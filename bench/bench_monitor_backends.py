"""The monitors' analysis back ends side by side on dot-completion dev-set points.

For each point (``bench/results/monitors/devset_*.jsonl``, built by ``bench_dot_completion.py``)
each back end (jedi in-process, jedi in a child process, jedi-language-server through multilspy,
``jedi-complete``: plain ``jedi.Script.complete`` in-process, the reference the jedi back
ends' attribute listing is checked against, and ``jedi-fresh``: in-process jedi without the
inference states shared across queries) lists the attributes at the dot, cold (first query
of the file's buffer) and warm (the same buffer again, answer cache bypassed where a back end
has one); the back ends take turns going first. In-process back ends of one run share parso's
in-memory cache of parsed library modules (the child process does not), which flatters their
latency: for one back end's latency, run it alone (``--backends jedi``). Reported: latency p50/p95/max per back end,
whether ``attr`` is listed, and agreement of the name sets with in-process jedi.

    python bench/bench_monitor_backends.py --points 30 --out bench/results/monitors
    python bench/bench_monitor_backends.py --dev bench/results/monitors/seg300/devset_seed23_n300.jsonl \
        --offset 0 --points 300 --backends jedi,jedi-process,jedi-complete --json backends_300.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import sysconfig
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def pct(xs, q):
    """The ``q``-quantile of ``xs`` (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


class CompleteReference:
    """``jedi.Script.complete`` at the dot, nothing cached between queries (the reference)."""

    name = "jedi-complete"

    def attributes(self, code, line, column, *, path, deadline_s):
        """Every identifier ``Script.complete`` lists."""
        import jedi

        from guidewire.monitors.analysis import buffer_path

        return [c.name for c in jedi.Script(code=code, path=buffer_path(path)).complete(line, column)
                if c.name.isidentifier()]

    def close(self):
        """Nothing to release."""


def main(argv=None) -> int:
    """Run the comparison; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=30)
    ap.add_argument("--offset", type=int, default=200, help="first dev-set point used")
    ap.add_argument("--out", default="bench/results/monitors")
    ap.add_argument("--dev", default=None, help="dev-set JSONL (default: the first devset_*.jsonl in --out)")
    ap.add_argument("--backends", default="jedi,jedi-process,lsp",
                    help="comma-separated: jedi, jedi-process, lsp, jedi-complete, jedi-fresh (in-process "
                         "jedi with a fresh inference state per query)")
    ap.add_argument("--json", default="backends.json", help="summary file name in --out")
    args = ap.parse_args(argv)

    from guidewire.monitors.analysis import JediBackend, cursor
    from guidewire.monitors.jediproc import JediProcessBackend
    from guidewire.monitors.lsp import LspBackend

    dev = args.dev or sorted(glob.glob(os.path.join(args.out, "devset_*.jsonl")))[0]
    with open(dev) as f:
        points = [json.loads(x) for x in f][args.offset:args.offset + args.points]
    stdlib = sysconfig.get_paths()["stdlib"]
    makers = {"jedi": JediBackend, "jedi-process": JediProcessBackend, "lsp": LspBackend,
              "jedi-complete": CompleteReference,
              "jedi-fresh": lambda: JediBackend(shared_states=False)}
    backends = {k: makers[k]() for k in args.backends.split(",")}
    if "jedi-process" in backends:
        backends["jedi-process"].attributes("import os\nos.", 2, 3, path=None, deadline_s=60)  # child started
    res = {k: {"cold_s": [], "warm_s": [], "listed": 0, "same_as_jedi": 0} for k in backends}
    for i, p in enumerate(points):
        path = os.path.join(stdlib, p["file"])
        with open(path, encoding="utf-8") as f:
            code = f.read().encode("utf-8")[:p["dot"] + 1].decode("utf-8")
        line, col = cursor(code)
        answers = {}
        order = list(backends.items())
        for name, be in order[i % len(order):] + order[:i % len(order)]:
            for phase, text in (("cold_s", code), ("warm_s", code + "\n")):  # + "\n": a cache miss
                t0 = time.perf_counter()
                names = be.attributes(text, line, col, path=path, deadline_s=60) or []
                res[name][phase].append(time.perf_counter() - t0)
            answers[name] = set(names)
            res[name]["listed"] += p["attr"] in names
        ref = answers.get("jedi", answers.get("jedi-complete"))
        for name in backends:
            res[name]["same_as_jedi"] += answers[name] == ref
    for be in backends.values():
        be.close()
    summary = {"points": len(points), "offset": args.offset}
    for name, r in res.items():
        summary[name] = {"cold_ms_p50": 1e3 * pct(r["cold_s"], .5), "cold_ms_p95": 1e3 * pct(r["cold_s"], .95),
                         "cold_ms_max": 1e3 * max(r["cold_s"]),
                         "cold_ms_mean": 1e3 * sum(r["cold_s"]) / len(r["cold_s"]), "warm_ms_p50": 1e3 * pct(r["warm_s"], .5),
                         "warm_ms_p95": 1e3 * pct(r["warm_s"], .95), "warm_ms_max": 1e3 * max(r["warm_s"]),
                         "attr_listed": r["listed"], "same_names_as_jedi": r["same_as_jedi"]}
    with open(os.path.join(args.out, args.json), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
