"""The runtime end to end with the model on a CUDA device beside the same model on the CPU, one run.

Arms: ``cuda`` (a static KV cache and the one-token step replayed as a CUDA graph, the default),
``cuda-eager`` (``GUIDEWIRE_CUDA_GRAPHS=0``: the dynamic cache, eager kernels) and ``cpu``. For each: unconstrained greedy generation, ``generate_json`` (greedy and sampled), and a
JSON extraction with and without speculative decoding; wall time per call (median of ``--repeat``
after one warm-up call, and the max), tokens per second and model calls. Greedy outputs on the two
devices are compared token for token (float32 on both; a difference can only come from the two
devices' kernels rounding differently at a near-tie).

    python bench/cuda_runtime.py [--devices cuda,cuda-eager,cpu] [--repeat 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.api import generate  # noqa: E402
from guidewire.runtime import load_model  # noqa: E402

SCHEMA = {"type": "object", "properties": {
    "invoice": {"type": "string"}, "vendor": {"type": "string"}, "customer": {"type": "string"},
    "quantity": {"type": "integer"}, "unit_price": {"type": "number"}},
    "required": ["invoice", "vendor", "customer", "quantity", "unit_price"], "additionalProperties": False}
TEXT = ("Invoice INV-2024-0192 was issued by Acme Robotics to Dana Quinn on 2024-03-14 for "
        "3 standing desks at 412.5 each.")
CASES = {
    "text greedy 128": dict(prompt="Write a short story about a lighthouse keeper.", max_tokens=128),
    "json greedy": dict(prompt=f"Extract JSON matching {json.dumps(SCHEMA)} from: {TEXT}", json_schema=SCHEMA,
                        max_tokens=120),
    "json sampled T=0.8": dict(prompt=f"Extract JSON from: {TEXT}", json_schema=SCHEMA, max_tokens=120,
                               temperature=0.8, seed=7),
    "json greedy speculative": dict(prompt=f"Extract JSON matching {json.dumps(SCHEMA)} from: {TEXT}",
                                    json_schema=SCHEMA, max_tokens=120, speculative=True),
}


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_case(lm, dev, kwargs: dict, repeat: int) -> dict:
    """One warm-up call, then ``repeat`` timed calls of ``generate(**kwargs)``."""
    generate(model=lm, return_result=True, **kwargs)
    walls, res = [], None
    for _ in range(repeat):
        _sync(dev)
        t0 = time.perf_counter()
        res = generate(model=lm, return_result=True, **kwargs)
        _sync(dev)
        walls.append(time.perf_counter() - t0)
    n = len(res.token_ids)
    med = statistics.median(walls)
    return {"wall_s_median": round(med, 4), "wall_s_max": round(max(walls), 4), "tokens": n,
            "tokens_per_s": round(n / med, 1) if med > 0 else None, "model_calls": res.usage.model_calls,
            "finish": res.finish_reason, "token_ids": list(res.token_ids)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="cuda,cuda-eager,cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8, help="torch CPU threads for the CPU rows")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = {"torch": torch.__version__, "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "cpu_threads": args.threads, "repeat": args.repeat, "devices": {}}
    for name in args.devices.split(","):
        dev = torch.device(name.replace("-eager", ""))
        os.environ["GUIDEWIRE_CUDA_GRAPHS"] = "0" if name.endswith("-eager") else "1"
        t0 = time.perf_counter()
        lm = load_model("smollm2", device=dev)
        load_s = time.perf_counter() - t0
        rows = {case: run_case(lm, dev, kw, args.repeat) for case, kw in CASES.items()}
        seq = lm.sequence()
        out["devices"][name] = {"load_s": round(load_s, 2), "cases": rows,
                                "static_cache": seq.static_decoder is not None,
                                "graph_error": None if seq.static_decoder is None else seq.static_decoder.graph_error}
        for case, r in rows.items():
            print(f"{name:5s} {case:26s} {r['wall_s_median'] * 1e3:9.1f} ms (max {r['wall_s_max'] * 1e3:.1f}) "
                  f"{r['tokens']:4d} tokens {r['tokens_per_s']} tok/s  {r['model_calls']} calls  {r['finish']}",
                  flush=True)
        del lm
    devs = list(out["devices"])
    if len(devs) >= 2:
        first = out["devices"][devs[0]]["cases"]
        lines = ["| case | " + " | ".join(f"{d} ms (median / max)" for d in devs) + " | "
                 + " | ".join(f"{d} / {devs[0]}" for d in devs[1:]) + " | tokens | same greedy tokens |",
                 "|---" * (2 * len(devs) + 2) + "|"]
        for case in CASES:
            rows = [out["devices"][d]["cases"][case] for d in devs]
            x = rows[0]
            same = "n/a (sampled)" if "sampled" in case else str(all(r["token_ids"] == x["token_ids"] for r in rows))
            lines.append(f"| {case} | " + " | ".join(f"{r['wall_s_median'] * 1e3:.1f} / {r['wall_s_max'] * 1e3:.1f}"
                                                      for r in rows) + " | "
                         + " | ".join(f"{r['wall_s_median'] / x['wall_s_median']:.2f}x" for r in rows[1:])
                         + f" | {' / '.join(str(r['tokens']) for r in rows)} | {same} |")
        out["table"] = "\n".join(lines)
        print(out["table"])
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "cuda_runtime.json"), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
