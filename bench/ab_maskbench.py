"""Interleaved A/B of MaskBench mask times (TBM) between two code trees.

Runs ``python -m guidewire.maskbench`` (guidewire only, one schema at a time) on the same
random sample of schemas with each tree, alternating which tree goes first in each round,
and prints TBM p50/p99/max per tree and round plus the pooled new/base ratios.

    git archive <base-commit> | tar -x -C /tmp/base     # the old code, outside the repository
    python bench/ab_maskbench.py --base /tmp/base --n 200 --rounds 2 --out /tmp/ab

Timings on a shared machine are noisy: compare the ratios of one interleaved run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(HERE, "..", "shared", "data", "maskbench")


def run_tree(tree: str, list_file: str, out: str, timeout: int) -> np.ndarray:
    """TBM samples (µs) of one maskbench run of the code in ``tree``."""
    env = {**os.environ, "PYTHONPATH": tree, "HF_HUB_OFFLINE": "1", "GUIDEWIRE_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "guidewire.maskbench", "--list", list_file, "--engines", "guidewire",
           "--tokenizer", "smollm2", "--jobs", "1", "--no-plots", "--no-progress", "--timeout", str(timeout),
           "--out", out]
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)["engines"]["guidewire"]
    print(f"  {out}: passing {summary['passing']}/{summary['schemas']}", flush=True)
    return np.load(os.path.join(out, "samples", "tbm_us_guidewire.npy")).astype(np.float64)


def stats(a: np.ndarray) -> dict:
    """p50/p99/max of TBM samples, µs."""
    return {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max())}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="tree with the old code")
    p.add_argument("--new", default=HERE, help="tree with the new code (default: this repository)")
    p.add_argument("--data", default=DEFAULT_DATA, help="MaskBench directory")
    p.add_argument("--n", type=int, default=200, help="schemas in the sample")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=30)
    p.add_argument("--out", default="ab-out")
    args = p.parse_args(argv)
    files = sorted(f for f in os.listdir(args.data) if f.endswith(".json"))
    sample = random.Random(args.seed).sample(files, min(args.n, len(files)))
    os.makedirs(args.out, exist_ok=True)
    list_file = os.path.abspath(os.path.join(args.out, "sample.txt"))
    with open(list_file, "w") as f:
        f.write("".join(os.path.abspath(os.path.join(args.data, x)) + "\n" for x in sample))
    pooled: dict[str, list] = {"base": [], "new": []}
    rows = []
    for r in range(args.rounds):
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        for name in order:
            tree = getattr(args, name)
            a = run_tree(os.path.abspath(tree), list_file, os.path.abspath(os.path.join(args.out, f"{name}-{r}")),
                         args.timeout)
            pooled[name].append(a)
            rows.append({"round": r, "tree": name, **stats(a)})
            print(json.dumps(rows[-1]), flush=True)
    base, new = (np.concatenate(pooled[k]) for k in ("base", "new"))
    sb, sn = stats(base), stats(new)
    result = {"base": sb, "new": sn, "ratio_p50": sn["p50"] / sb["p50"], "ratio_p99": sn["p99"] / sb["p99"],
              "rounds": rows}
    with open(os.path.join(args.out, "ab.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in ("base", "new", "ratio_p50", "ratio_p99")}, indent=1))


if __name__ == "__main__":
    main()
