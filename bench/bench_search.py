"""Search-layer bench (SmolLM2, CPU, one run): how far each sampler's empirical distribution is
from the exact conditional as forward passes accumulate, and a task where a potential matters.

Part ``finite``: four grammars with finite languages. The exact conditional comes from a
best-first walk of every allowed token sequence (every tokenization of every sentence, the
full mask at each prefix, EOS scored; ``guidewire.search.exact``), stopped when the unexplored
frontier holds at most ``--tol`` of the mass found, so every exact probability is known to
that relative precision (the walk is checked against a brute-force oracle in the tests). Each
method runs on a fresh Sampler (its own prefix cache: a forward pass is a cache miss) and
records KL(empirical || exact) at sample-count checkpoints; AWRS's empirical distribution is
importance-weighted, SMC's combines runs of 16 particles by their normaliser estimates.

Part ``task``: JSON extraction of an order (quantity, unit price, total) whose rule
``total == quantity * unit_price`` no grammar states; SMC with that rule as a potential on the
partial text, against one GCD sample and best-of-N GCD (the rule as a verifier, as many samples
as SMC's wall time allows).

    python bench/bench_search.py --part all      # results in bench/results/search/
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from guidewire.search import Sampler  # noqa: E402
from guidewire.search.exact import enumerate_exact  # noqa: E402
from guidewire.search.problem import Problem  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "search"
CHECKPOINTS = (10, 25, 50, 100, 200, 400, 800, 1500, 2500, 4000)
METHODS = ("gcd", "asap", "cars", "awrs", "smc")
PARITY = [f"{i:05b}" for i in range(32) if f"{i:05b}".count("1") % 2 == 0]
PHRASES = ["Yes.", "No.", "Maybe.", "Sure.", "Of course.", "Absolutely.", "Not at all.", "I think so.",
           "I doubt it.", "Certainly.", "Never.", "Probably.", "Probably not.", "Definitely.",
           "Hard to say.", "It depends.", "Indeed.", "No way.", "Yes, always.", "Rarely."]
FINITE = [
    dict(name="parity5", prompt="Write a binary string of 5 digits with an even number of ones.",
         regex="|".join(PARITY), max_tokens=8),
    dict(name="phrasings20", prompt="Is it going to rain tomorrow? Answer briefly.",
         choices=PHRASES, max_tokens=10),
    dict(name="arith", prompt="Write a short addition or subtraction of two small numbers.",
         regex=r"[1-5][+\-][1-5]", max_tokens=6),
    dict(name="json_enum", prompt="Describe a T-shirt as JSON with its color and size.",
         regex=r'\{"color": "(red|green|blue|black|white)", "size": "(S|M|L)"\}', max_tokens=24),
]


def kl(emp: dict, exact: dict) -> float:
    """KL(empirical || exact) in nats (``inf`` if a sampled text has no exact mass)."""
    total = 0.0
    for k, q in emp.items():
        if q <= 0:
            continue
        p = exact.get(k, 0.0)
        if p <= 0:
            return math.inf
        total += q * math.log(q / p)
    return max(total, 0.0)


def constraint_of(spec: dict) -> dict:
    return {k: spec[k] for k in ("regex", "choices", "grammar", "json_schema") if k in spec}


def run_method(spec: dict, method: str, exact: dict, seed: int, max_samples: int,
               max_seconds: float | None = None) -> dict:
    """One method's KL curve; stops after the first checkpoint past ``max_seconds`` of wall time."""
    s = Sampler(spec["prompt"], max_tokens=spec["max_tokens"], **constraint_of(spec))
    t0 = time.perf_counter()
    counts: Counter = Counter()
    weighted: Counter = Counter()
    curve = []
    checks = toks = drawn = 0
    rejected = proposals = 0
    for cp in [c for c in CHECKPOINTS if c <= max_samples]:
        while drawn < cp:
            k = min(cp - drawn, 16) if method == "smc" else cp - drawn
            ss = s.sample(k, method, seed=seed * 1000 + len(curve) * 100 + drawn)
            drawn += k
            checks += ss.stats.constraint_checks
            toks += ss.stats.tokens_sampled
            rejected += ss.stats.rejected
            proposals += ss.stats.proposals
            if method == "awrs":
                for text, lw in zip(ss.texts, ss.log_weights):
                    weighted[text] += math.exp(lw + ss.log_normalizer) * k
            elif method == "smc":
                z = math.exp(ss.log_normalizer)
                for text, w in ss.distribution().items():
                    weighted[text] += z * w
            else:
                counts.update(ss.texts)
        src = weighted if method in ("awrs", "smc") else counts
        tot = sum(src.values())
        emp = {k: v / tot for k, v in src.items()} if tot > 0 else {}
        curve.append(dict(samples=drawn, forward_passes=s.target.stats.forward_passes,
                          tokens_scored=s.target.stats.tokens_scored, kl=kl(emp, exact),
                          wall_s=round(time.perf_counter() - t0, 2)))
        print(f"  {spec['name']:12s} {method:5s} n={drawn:5d} passes={curve[-1]['forward_passes']:5d} "
              f"KL={curve[-1]['kl']:.4f}", flush=True)
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            break
    return dict(curve=curve, checks_per_token=checks / max(toks, 1), tokens_sampled=toks,
                proposals=proposals, rejected=rejected, vocab_size=s.vocab.vocab_size)


def part_finite(args, results: dict, save) -> None:
    out = results.setdefault("finite", {})
    methods = args.methods or METHODS
    for spec in FINITE:
        if args.only and spec["name"] not in args.only:
            continue
        s = Sampler(spec["prompt"], max_tokens=spec["max_tokens"], **constraint_of(spec))
        pb = Problem(s.target, s.grammar, s.vocab, max_tokens=spec["max_tokens"], rng=np.random.default_rng(0))
        t0 = time.perf_counter()
        res = enumerate_exact(pb, tol=args.tol, max_expansions=args.max_expansions)
        exact = res.conditional()
        print(f"{spec['name']}: {len(exact)} texts, {res.sequences} token sequences, Z={res.found:.3e}, "
              f"frontier/Z={res.relative_error_bound:.1e}, {res.expansions} expansions, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        row = dict(texts=len(exact), sequences=res.sequences, z=res.found, frontier_over_z=res.relative_error_bound,
                   expansions=res.expansions, exact_top=dict(list(exact.items())[:5]), exact=exact, methods={})
        old = out.get(spec["name"])
        if old and old.get("expansions") == res.expansions and math.isclose(old.get("z", 0.0), res.found,
                                                                           rel_tol=1e-6):
            row["methods"] = old.get("methods", {})          # same exact law: earlier methods' KLs still hold
        out[spec["name"]] = row
        for method in methods:
            row["methods"][method] = run_method(spec, method, exact, args.seed, args.max_samples,
                                                args.method_seconds)
            save()                               # each method saved as it ends


# -- task: a semantic rule as a potential -----------------------------------------------------
ORDERS = [(3, 4), (12, 5), (7, 8), (25, 3), (6, 15), (9, 9)]
ORDER_RE = r'\{"quantity": [1-9][0-9]?, "unit_price": [1-9][0-9]?, "total": [1-9][0-9]{0,3}\}'
_NUMS = re.compile(r'"quantity": (\d+), "unit_price": (\d+), "total": (\d*)(\}?)')


def consistent_prefix(text: str) -> float:
    """1 while the partial JSON can still satisfy total == quantity * unit_price, else 0."""
    m = _NUMS.search(text)
    if not m:
        return 1.0
    want = str(int(m.group(1)) * int(m.group(2)))
    got = m.group(3)
    return 1.0 if (want == got if m.group(4) else want.startswith(got)) else 0.0


def judge(text: str, q: int, p: int) -> tuple[bool, bool]:
    m = _NUMS.search(text)
    if not m or not m.group(4):
        return False, False
    a, b, c = int(m.group(1)), int(m.group(2)), int(m.group(3))
    return a * b == c, (a, b, c) == (q, p, q * p)


def part_task(args) -> dict:
    rows = []
    for q, p in ORDERS[:args.orders]:
        prompt = (f"An order of {q} notebooks at {p} dollars each. Reply with JSON giving quantity, "
                  f"unit_price and total (quantity times unit_price).")
        runs = {}
        for variant, in_check in (("smc_checkpoints", False), ("smc_in_check", True)):
            s = Sampler(prompt, regex=ORDER_RE, max_tokens=32)
            t0 = time.perf_counter()
            ss = s.sample(args.particles, "smc", seed=args.seed, potential=consistent_prefix,
                          potential_in_check=in_check)
            wall = time.perf_counter() - t0
            alive = [i for i, w in enumerate(ss.log_weights) if math.isfinite(w)]
            text = ss.texts[max(alive, key=lambda i: ss.log_weights[i])] if alive else ""
            cons, ok = judge(text, q, p)
            runs[variant] = dict(text=text, consistent=cons, correct=ok, wall_s=wall, alive=len(alive),
                                 forward_passes=ss.stats.forward_passes, resamples=ss.stats.resamples,
                                 potential_calls=ss.stats.potential_calls)
        t_smc = runs["smc_in_check"]["wall_s"]
        g = Sampler(prompt, regex=ORDER_RE, max_tokens=32)
        t0 = time.perf_counter()
        first = g.sample(1, "gcd", seed=args.seed)
        t_gcd = time.perf_counter() - t0
        g_cons, g_ok = judge(first.texts[0], q, p)
        b = Sampler(prompt, regex=ORDER_RE, max_tokens=32)
        t0 = time.perf_counter()
        tried, pick = 0, None
        while time.perf_counter() - t0 < t_smc:
            text = b.sample(1, "gcd", seed=args.seed + 1 + tried).texts[0]
            tried += 1
            if judge(text, q, p)[0]:
                pick = text
                break
        pick = pick if pick is not None else text
        b_cons, b_ok = judge(pick, q, p)
        rows.append(dict(order=[q, p], **runs,
                         gcd=dict(text=first.texts[0], consistent=g_cons, correct=g_ok, wall_s=t_gcd),
                         best_of_n=dict(text=pick, consistent=b_cons, correct=b_ok, samples=tried,
                                        wall_s=time.perf_counter() - t0)))
        print(f"  order {q}x{p}: SMC {runs['smc_checkpoints']['text']!r} / in-check {runs['smc_in_check']['text']!r} "
              f"({t_smc:.0f} s) | GCD {first.texts[0]!r} | best-of-{tried} {pick!r}", flush=True)
    summary = {m: dict(consistent=sum(r[m]["consistent"] for r in rows), correct=sum(r[m]["correct"] for r in rows),
                       wall_s=sum(r[m]["wall_s"] for r in rows))
               for m in ("smc_checkpoints", "smc_in_check", "gcd", "best_of_n")}
    return dict(orders=rows, summary=summary, particles=args.particles)


# -- reporting --------------------------------------------------------------------------------
def first_below(curve: list, level: float) -> dict | None:
    """The first checkpoint from which KL stays <= ``level`` (``None``: never)."""
    for i, pt in enumerate(curve):
        if all(c["kl"] <= level for c in curve[i:]):
            return pt
    return None


def to_level(m: dict, method: str, level: float = 0.05) -> str:
    """``passes (samples), ratio`` to GCD's passes after as many samples, or "never"."""
    pt = first_below(m[method]["curve"], level)
    if pt is None:
        return "never"
    gcd = {c["samples"]: c["forward_passes"] for c in m.get("gcd", {}).get("curve", [])}
    g = gcd.get(pt["samples"])
    ratio = f", {pt['forward_passes'] / g:.2f}x GCD" if g else ""
    return f"{pt['forward_passes']} ({pt['samples']}){ratio}"


def report(results: dict) -> str:
    lines = ["# Search bench (SmolLM2-135M, CPU)", ""]
    fin = results.get("finite", {})
    if fin:
        lines += ["## KL(empirical || exact) at each method's last checkpoint (samples), and forward passes to "
                  "stay <= 0.05 (ratio to GCD's passes after as many samples)", "",
                  "| grammar | texts | frontier/Z | " + " | ".join(METHODS) + " | ASAp to 0.05: passes (samples) | "
                  "CARS to 0.05 | AWRS checks/token (V / that) |", "|---" * (6 + len(METHODS)) + "|"]
        for name, row in fin.items():
            m = row["methods"]

            def last(k):
                if k not in m:
                    return "-"
                c = m[k]["curve"][-1]
                return f"{c['kl']:.3f} ({c['samples']})"

            aw = m.get("awrs")
            awc = f"{aw['checks_per_token']:.1f} ({aw['vocab_size'] / aw['checks_per_token']:.0f}x)" if aw else "-"
            lines.append(f"| {name} | {row['texts']} | {row['frontier_over_z']:.1e} | "
                         + " | ".join(last(k) for k in METHODS)
                         + f" | {to_level(m, 'asap') if 'asap' in m else '-'} | "
                         f"{to_level(m, 'cars') if 'cars' in m else '-'} | {awc} |")
        lines.append("")
    task = results.get("task")
    if task:
        n = len(task["orders"])
        lines += [f"## Order extraction, rule total == quantity * unit_price ({n} orders, SMC with "
                  f"{task['particles']} particles)", "", "| method | consistent | correct | wall s |", "|---|---|---|---|"]
        for k, v in task["summary"].items():
            lines.append(f"| {k} | {v['consistent']}/{n} | {v['correct']}/{n} | {v['wall_s']:.0f} |")
        lines.append("")
    return "\n".join(lines)


def plot(results: dict, path: Path) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    fin = results.get("finite", {})
    cols = max(len(fin), 1)
    fig, axes = plt.subplots(2, cols, figsize=(4.2 * cols, 7.0), squeeze=False)
    for j, (name, row) in enumerate(fin.items()):
        for r, key, label in ((0, "forward_passes", "target forward passes (prefix-cache misses)"),
                              (1, "samples", "samples drawn")):
            ax = axes[r][j]
            for method in METHODS:
                if method not in row["methods"]:
                    continue
                c = row["methods"][method]["curve"]
                ax.plot([max(x[key], 1) for x in c], [max(x["kl"], 1e-4) for x in c], marker="o", ms=3,
                        label=method)
            ax.axhline(0.05, color="grey", ls="--", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(name)
            ax.set_xlabel(label)
    for r in range(2):
        axes[r][0].set_ylabel("KL(empirical || exact), nats")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("finite", "task", "all", "report"), default="all",
                    help="report: only rewrite search.md and the plot from the saved JSON files")
    ap.add_argument("--only", nargs="*", help="finite grammars to run (default all)")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--max-expansions", type=int, default=600)
    ap.add_argument("--max-samples", type=int, default=1500, help="last sample-count checkpoint")
    ap.add_argument("--methods", nargs="*", choices=METHODS, help="finite: methods to run (default all; the "
                    "others are kept from the results file when its exact law is the same)")
    ap.add_argument("--method-seconds", type=float, default=None,
                    help="finite: stop a method after the first checkpoint past this wall time")
    ap.add_argument("--orders", type=int, default=len(ORDERS), help="task: how many orders")
    ap.add_argument("--particles", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="search.json", help="results file under bench/results/search/ "
                    "(the report merges every search*.json there)")
    args = ap.parse_args()
    from guidewire.runtime.loading import set_num_threads

    set_num_threads(int(os.environ.get("GUIDEWIRE_NUM_THREADS", "1")))
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / args.json
    results = json.loads(path.read_text()) if path.exists() else {}

    def save() -> None:
        path.write_text(json.dumps(results, indent=1, default=float))

    if args.part in ("finite", "all"):
        part_finite(args, results, save)
    if args.part in ("task", "all"):
        results["task"] = part_task(args)
        save()
    for other in sorted(OUT.glob("search*.json")):      # runs of the parts into separate files
        if other != path:
            for k, v in json.loads(other.read_text()).items():
                if isinstance(v, dict) and isinstance(results.get(k), dict) and k == "finite":
                    for name, row in v.items():
                        results[k].setdefault(name, row)
                else:
                    results.setdefault(k, v)
    results["plot"] = plot(results, OUT / "kl_vs_passes.png") if results.get("finite") else "no finite part yet"
    md = report(results) + f"\nPlot: {os.path.relpath(results['plot'], OUT) if os.path.exists(results['plot']) else results['plot']}\n"
    (OUT / "search.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
