"""The tail of MaskBench runs from their saved TBM samples: percentiles, the share of masks above 3x
a peer's p99 and the masks over 20 / 100 ms, per run directory (``OUT/samples/tbm_us_<engine>.npy``).

    python bench/maskbench_tail.py RUN_DIR [RUN_DIR ...] [--peer-run DIR] [--out FILE]

The peer's p99 comes from each run's own llguidance samples, or from ``--peer-run`` for a run made
without the peer (a previous tree on the same files, say). Runs whose records carry ``slow_masks``
(masks over 20 ms with the time CPython's full collections took inside them) also report how many
of those masks had a full collection inside, the collections' share of their time, and the
largest of them less its collections (reported beside the max, never instead of it); runs whose
slow masks carry ``cpu_us`` (the thread's CPU time inside the mask) also report how many of them
spent over 20 ms on a CPU, the most CPU time one spent and CPU time's share of their wall time (the
rest is waiting: descheduled by a busy machine, or blocked in the kernel); runs whose slow masks
carry the kernel's thread counters (``sys_us``, faults, ``preempted``) also report how many spent
over 20 ms on a CPU outside the kernel, the most such time, the kernel's share of their CPU time,
their page faults and how many were preempted.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np


def _load(run: str, engine: str):
    path = os.path.join(run, "samples", f"tbm_us_{engine}.npy")
    return np.load(path) if os.path.exists(path) else None


def _slow_masks(run: str, engine: str) -> dict:
    """What ``results.jsonl`` says of ``engine``'s masks over 20 ms: the collections inside them (full
    ones, any time above 0, and where recorded those of any generation, over 1 ms) and, where
    recorded, the thread's CPU time inside them."""
    path = os.path.join(run, "results.jsonl")
    if not os.path.exists(path):
        return {}
    slow = []
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("engine") == engine:
                slow.extend(rec.get("slow_masks") or [])
    if not slow:
        return {}
    gc_us = [s["full_gc_us"] for s in slow]
    out = {"slow_masks_recorded": len(slow),
           "slow_masks_with_full_gc": sum(1 for g in gc_us if g > 0),
           "slow_masks_full_gc_share": round(sum(gc_us) / sum(s["us"] for s in slow), 3),
           "slow_masks_max_less_full_gc_us": round(max(s["us"] - s["full_gc_us"] for s in slow), 1)}
    if all("gc_us" in s for s in slow):     # collections of any generation (runs since stop 55)
        any_us = [s["gc_us"] for s in slow]
        out.update(slow_masks_with_gc_over_1ms=sum(1 for g in any_us if g > 1000),
                   slow_masks_gc_share=round(sum(any_us) / sum(s["us"] for s in slow), 3),
                   slow_masks_max_less_gc_us=round(max(s["us"] - s["gc_us"] for s in slow), 1))
    if all("cpu_us" in s for s in slow):    # the thread's CPU time (runs since stop 57)
        cpu = [s["cpu_us"] for s in slow]
        out.update(slow_masks_over_20ms_on_cpu=sum(1 for c in cpu if c > 20_000),
                   slow_masks_max_cpu_us=round(max(cpu), 1),
                   slow_masks_cpu_share=round(sum(cpu) / sum(s["us"] for s in slow), 3))
    if all("cpu_us" in s and "sys_us" in s for s in slow):   # the kernel's thread counters (runs since stop 70)
        user = [max(0.0, s["cpu_us"] - s["sys_us"]) for s in slow]
        out.update(slow_masks_over_20ms_outside_kernel=sum(1 for u in user if u > 20_000),
                   slow_masks_max_outside_kernel_us=round(max(user), 1),
                   slow_masks_kernel_share_of_cpu=round(sum(s["sys_us"] for s in slow) / max(1.0, sum(cpu)), 3),
                   slow_masks_minor_faults=sum(s["minor_faults"] for s in slow),
                   slow_masks_major_faults=sum(s["major_faults"] for s in slow),
                   slow_masks_preempted=sum(1 for s in slow if s["preempted"] > 0))
    return out


def tail(run: str, peer_run: str | None = None, engine: str = "guidewire", peer: str = "llguidance") -> dict:
    """Tail statistics of ``engine``'s masks in ``run`` against ``peer``'s p99."""
    g = _load(run, engine)
    p = _load(run, peer)
    if p is None and peer_run:
        p = _load(peer_run, peer)
    if g is None:
        raise SystemExit(f"{run}: no samples of {engine}")
    out = {"run": run, "masks": int(g.size)}
    for q in (50, 90, 99, 99.5, 99.9):
        out[f"p{q}_us"] = round(float(np.percentile(g, q)), 1)
    out["max_us"] = round(float(g.max()), 1)
    out["over_20ms"] = int((g > 20_000).sum())
    out["over_100ms"] = int((g > 100_000).sum())
    out.update(_slow_masks(run, engine))
    if p is not None:
        p99 = float(np.percentile(p, 99))
        out[f"{peer}_p99_us"] = round(p99, 1)
        out[f"share_over_3x_{peer}_p99"] = round(float((g > 3 * p99).mean()), 5)
        out[f"p99_ratio_to_{peer}"] = round(out["p99_us"] / p99, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--peer-run", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows = [tail(r, args.peer_run) for r in args.runs]
    text = json.dumps(rows, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
