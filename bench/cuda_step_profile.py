"""Where a decode step's time goes on a CUDA device: the graphed step, the graph replay alone,
the eager step, the GPU's clocks, and the eager step's top kernels (torch profiler). One run.

    python bench/cuda_step_profile.py [--steps 100] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.runtime import HFModel, load_model  # noqa: E402


def _clocks() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,utilization.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi: {exc}"


def _per_step_ms(fn, steps: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps * 1e3


def _stepper(model, token: int, span: int = 50):
    """One-token steps of ``model`` (already prefilled), truncated back every ``span`` tokens so
    every step attends to about the same length."""
    base = model.length

    def step():
        model.step([token], last_only=True)
        if model.length > base + span:
            model.truncate(base)
    return step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2
    lm = load_model("smollm2", device="cuda")
    ids = lm.encode_prompt("Write a short story about a lighthouse keeper.")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "clocks_idle": _clocks()}
    g = lm.sequence()
    g.prefill(ids, last_only=True)
    g.step([ids[-1]], last_only=True)            # captures the graph
    out["graph_error"] = g.static_decoder.graph_error
    out["graphed_step_ms"] = _per_step_ms(_stepper(g, ids[-1]), args.steps)
    out["clocks_busy"] = _clocks()
    if g.static_decoder.graph is not None:
        out["replay_only_ms"] = _per_step_ms(g.static_decoder.graph.replay, args.steps)
    e = HFModel(lm.module, static=False)
    e.prefill(ids, last_only=True)
    eager = _stepper(e, ids[-1])
    out["eager_step_ms"] = _per_step_ms(eager, args.steps)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            eager()
        torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=15)
    out["eager_top_kernels"] = table
    cpu_table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=12)
    print(json.dumps({k: v for k, v in out.items() if "kernels" not in k}, indent=1))
    print(table)
    print(cpu_table)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
