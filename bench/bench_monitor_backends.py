"""The monitors' analysis back ends side by side on dot-completion dev-set points.

For each point (``bench/results/monitors/devset_*.jsonl``, built by ``bench_dot_completion.py``)
each back end (jedi in-process, jedi in a child process, jedi-language-server through multilspy)
lists the attributes at the dot, cold (first query of the file's buffer) and warm (the same
buffer again, answer cache bypassed where a back end has one); reported: latency p50/p95/max per
back end, whether ``attr`` is listed, and agreement of the name sets with in-process jedi.

    python bench/bench_monitor_backends.py --points 30 --out bench/results/monitors
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


def main(argv=None) -> int:
    """Run the comparison; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=30)
    ap.add_argument("--offset", type=int, default=200, help="first dev-set point used")
    ap.add_argument("--out", default="bench/results/monitors")
    args = ap.parse_args(argv)

    from guidewire.monitors.analysis import JediBackend, cursor
    from guidewire.monitors.jediproc import JediProcessBackend
    from guidewire.monitors.lsp import LspBackend

    dev = sorted(glob.glob(os.path.join(args.out, "devset_*.jsonl")))[0]
    with open(dev) as f:
        points = [json.loads(x) for x in f][args.offset:args.offset + args.points]
    stdlib = sysconfig.get_paths()["stdlib"]
    backends = {"jedi": JediBackend(), "jedi-process": JediProcessBackend(), "lsp": LspBackend()}
    backends["jedi-process"].attributes("import os\nos.", 2, 3, path=None, deadline_s=60)  # child started
    res = {k: {"cold_s": [], "warm_s": [], "listed": 0, "same_as_jedi": 0} for k in backends}
    for p in points:
        path = os.path.join(stdlib, p["file"])
        with open(path, encoding="utf-8") as f:
            code = f.read().encode("utf-8")[:p["dot"] + 1].decode("utf-8")
        line, col = cursor(code)
        answers = {}
        for name, be in backends.items():
            for phase, text in (("cold_s", code), ("warm_s", code + "\n")):  # + "\n": a cache miss
                t0 = time.perf_counter()
                names = be.attributes(text, line, col, path=path, deadline_s=60) or []
                res[name][phase].append(time.perf_counter() - t0)
            answers[name] = set(names)
            res[name]["listed"] += p["attr"] in names
        for name in backends:
            res[name]["same_as_jedi"] += answers[name] == answers["jedi"]
    for be in backends.values():
        be.close()
    summary = {"points": len(points), "offset": args.offset}
    for name, r in res.items():
        summary[name] = {"cold_ms_p50": 1e3 * pct(r["cold_s"], .5), "cold_ms_p95": 1e3 * pct(r["cold_s"], .95),
                         "cold_ms_max": 1e3 * max(r["cold_s"]), "warm_ms_p50": 1e3 * pct(r["warm_s"], .5),
                         "warm_ms_p95": 1e3 * pct(r["warm_s"], .95), "warm_ms_max": 1e3 * max(r["warm_s"]),
                         "attr_listed": r["listed"], "same_names_as_jedi": r["same_as_jedi"]}
    with open(os.path.join(args.out, "backends.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
