"""Micro-benchmarks of guidewire.kernels beside xgrammar's bitmask kernel.

Times ``apply_token_bitmask_inplace`` (ours: Triton on CUDA, and the torch path) against
``xgrammar.apply_token_bitmask_inplace`` over batch x vocab x mask density, then masked softmax,
masked sampling and speculative verification. Reports median and p99 microseconds per call, and
ratios (xgrammar time / ours: above 1 means ours is faster), as Markdown tables. CUDA timings use
``torch.cuda.Event``; without CUDA the CPU torch paths (and xgrammar's CPU kernel) are timed, since
Triton would only run through its interpreter there.

    python bench/bench_kernels.py [--device cuda|cpu] [--out FILE.md] [--reps N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.kernels import (apply_token_bitmask_inplace, masked_softmax, sample_masked,  # noqa: E402
                               speculative_accept_batch, triton_importable)

BATCHES = (1, 8, 64)
VOCABS = (32000, 128000, 262144)
DENSITIES = (0.01, 0.5, 0.99)


def timed(fn, device: torch.device, reps: int, warmup: int = 3) -> tuple[float, float]:
    """Median and p99 microseconds of ``fn()`` (CUDA events on CUDA, perf_counter otherwise)."""
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        pairs = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(device)
        times = [s.elapsed_time(e) * 1000.0 for s, e in pairs]
    else:
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            fn()
            times.append((time.perf_counter_ns() - t0) / 1000.0)
    return float(np.median(times)), float(np.percentile(times, 99))


def random_bitmask(batch: int, vocab: int, density: float, device, gen: torch.Generator) -> torch.Tensor:
    """``(batch, ceil(vocab/32))`` int32 bitmask with each in-vocabulary bit set with probability ``density``."""
    words = (vocab + 31) // 32
    bits = torch.rand(batch, words * 32, generator=gen) < density
    bits[:, vocab:] = False
    bits[:, 0] = True  # never an empty row
    weights = torch.tensor([1 << i for i in range(32)], dtype=torch.int64)
    packed = (bits.view(batch, words, 32).long() * weights).sum(-1)
    return packed.to(torch.int64).bitwise_and(0xFFFFFFFF).to(torch.int32).to(device)  # wraps like C


def fmt(x: float | None) -> str:
    return "n/a" if x is None else (f"{x:,.1f}" if x < 1000 else f"{x:,.0f}")


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def bench_bitmask(device, reps, batches, vocabs, densities, gen) -> list[str]:
    try:
        import xgrammar as xgr
    except Exception:  # not installed, or broken
        xgr = None
    cuda = device.type == "cuda"
    lines = ["## apply_token_bitmask_inplace (float32 logits, bitmask of width ceil(V/32))", ""]
    if cuda:
        head = ("| batch | vocab | density | ours triton median / p99 µs | ours torch median / p99 µs "
                "| xgrammar median / p99 µs | xgrammar / ours triton |")
    else:
        head = ("| batch | vocab | density | ours torch median / p99 µs | xgrammar (cpu) median / p99 µs "
                "| xgrammar / ours torch |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    print("\n".join(lines), flush=True)
    for batch in batches:
        for vocab in vocabs:
            logits = torch.randn(batch, vocab, generator=gen).to(device)
            for density in densities:
                bm = random_bitmask(batch, vocab, density, device, gen)
                torch_t = timed(lambda: apply_token_bitmask_inplace(logits, bm, backend="torch"), device, reps)
                tri_t = None
                if cuda and triton_importable():
                    tri_t = timed(lambda: apply_token_bitmask_inplace(logits, bm, backend="triton"), device, reps)
                xgr_t = None
                if xgr is not None:
                    try:
                        xgr_t = timed(lambda: xgr.apply_token_bitmask_inplace(logits, bm), device, reps)
                    except Exception as e:  # e.g. no kernel for this device
                        print(f"xgrammar failed: {e!r}", file=sys.stderr)
                if cuda:
                    row = (f"| {batch} | {vocab} | {density} | {fmt(tri_t and tri_t[0])} / {fmt(tri_t and tri_t[1])} "
                           f"| {fmt(torch_t[0])} / {fmt(torch_t[1])} | {fmt(xgr_t and xgr_t[0])} / "
                           f"{fmt(xgr_t and xgr_t[1])} | {ratio(xgr_t and xgr_t[0], tri_t and tri_t[0])} |")
                else:
                    row = (f"| {batch} | {vocab} | {density} | {fmt(torch_t[0])} / {fmt(torch_t[1])} "
                           f"| {fmt(xgr_t and xgr_t[0])} / {fmt(xgr_t and xgr_t[1])} "
                           f"| {ratio(xgr_t and xgr_t[0], torch_t[0])} |")
                lines.append(row)
                print(row, flush=True)
    return lines + [""]


def backends(device) -> list[str]:
    return ["triton", "torch"] if device.type == "cuda" and triton_importable() else ["torch"]


def bench_sampling(device, reps, batches, vocabs, gen) -> list[str]:
    lines = ["## masked_softmax and sample_masked (float32 logits, density 0.5, temperature 0.8)", "",
             "| op | batch | vocab | backend | median µs | p99 µs |", "|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for batch in batches:
        for vocab in vocabs:
            logits = torch.randn(batch, vocab, generator=gen).to(device)
            bm = random_bitmask(batch, vocab, 0.5, device, gen)
            u = torch.rand(batch, generator=gen).to(device)
            for be in backends(device):
                for name, fn in (("masked_softmax", lambda: masked_softmax(logits, bm, 0.8, backend=be)),
                                 ("sample_masked", lambda: sample_masked(logits, bm, 0.8, u, backend=be))):
                    med, p99 = timed(fn, device, reps)
                    row = f"| {name} | {batch} | {vocab} | {be} | {fmt(med)} | {fmt(p99)} |"
                    lines.append(row)
                    print(row, flush=True)
    return lines + [""]


def speculative_inputs(batch: int, k: int, vocab: int, device, gen: torch.Generator):
    """Random inputs of ``speculative_accept_batch``: target distributions ``p`` (k + 1 per row),
    draft distributions ``q``, draft tokens ``x``, acceptance uniforms ``u``, residual uniforms ``r``."""
    p = torch.softmax(torch.randn(batch, k + 1, vocab, generator=gen), -1).to(device)
    q = torch.softmax(torch.randn(batch, k, vocab, generator=gen), -1).to(device)
    x = torch.randint(0, vocab, (batch, k), generator=gen).to(device)
    u = torch.rand(batch, k, generator=gen).to(device)
    r = torch.rand(batch, generator=gen).to(device)
    return p, q, x, u, r


def bench_speculative(device, reps, batches, vocabs, gen, k: int = 4) -> list[str]:
    lines = [f"## speculative_accept_batch (k = {k} drafts, float32 distributions)", "",
             "| batch | vocab | draft_probs | backend | median µs | p99 µs |", "|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for batch in batches:
        for vocab in vocabs:
            if batch * (2 * k + 1) * vocab * 4 > 2**30:  # keep the inputs under 1 GiB
                continue
            p, q, x, u, r = speculative_inputs(batch, k, vocab, device, gen)
            for qq, label in ((q, "yes"), (None, "none")):
                for be in backends(device):
                    med, p99 = timed(lambda: speculative_accept_batch(p, x, qq, u, r, backend=be), device, reps)
                    row = f"| {batch} | {vocab} | {label} | {be} | {fmt(med)} | {fmt(p99)} |"
                    lines.append(row)
                    print(row, flush=True)
    return lines + [""]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", help="also write the Markdown report to this file")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per cell (default 100 on CUDA, 10 on CPU)")
    ap.add_argument("--quick", action="store_true", help="batch {1, 8}, vocab {32000}: a smoke run")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: bitmask,sampling,speculative")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but CUDA is not available")
    device = torch.device(args.device)
    reps = args.reps or (100 if device.type == "cuda" else 10)
    batches, vocabs = ((1, 8), (32000,)) if args.quick else (BATCHES, VOCABS)
    gen = torch.Generator().manual_seed(0)
    skip = set(filter(None, args.skip.split(",")))

    try:
        import importlib.metadata as md

        xgr_version = md.version("xgrammar")
    except Exception:
        xgr_version = "not installed"
    tri_version = "not installed"
    if triton_importable():
        import triton

        tri_version = triton.__version__
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or "CPU")
    lines = ["# guidewire.kernels benchmark", "",
             f"- device: {device.type} ({where}); torch {torch.__version__}, triton {tri_version}, "
             f"xgrammar {xgr_version}; {reps} timed calls per cell",
             "- times are per call in microseconds (median / p99); ratio = xgrammar / ours"]
    if device.type == "cpu":
        lines.append(f"- **no CUDA: these are the CPU torch paths** ({torch.get_num_threads()} torch threads); "
                     "the Triton kernels are not timed (on the CPU they only run through Triton's interpreter), "
                     "xgrammar runs its CPU kernel")
    lines.append("")
    print("\n".join(lines), flush=True)
    if "bitmask" not in skip:
        lines += bench_bitmask(device, reps, batches, vocabs, DENSITIES, gen)
    if "sampling" not in skip:
        lines += bench_sampling(device, reps, batches, vocabs, gen)
    if "speculative" not in skip:
        lines += bench_speculative(device, reps, batches, vocabs[:2], gen)
    report = "\n".join(lines)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
