"""Server throughput: tokens/s at concurrency 1, 4, 8 (vs one sequential request), the
constrained/unconstrained ratio under load, and p50/p95 time to first token (streamed).

    python bench/bench_server.py [--requests 8] [--max-tokens 32] [--out bench/results/server.json]

Starts the real server in-process on a free loopback port and drives it with the ``openai``
client from threads. Every request decodes exactly ``--max-tokens`` tokens where possible
(unconstrained: ignore short answers by asking for long text; constrained: a schema with a long
string), so tokens/s compare like with like.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SCHEMA = {"type": "object", "properties": {"story": {"type": "string", "minLength": 400}}, "required": ["story"],
          "additionalProperties": False}


def _one(client, constrained: bool, max_tokens: int, seed: int) -> tuple[int, float, float]:
    kw = dict(model="smollm2", max_tokens=max_tokens, temperature=0.8, seed=seed, stream=True,
              stream_options={"include_usage": True},
              messages=[{"role": "user", "content": "Write a long story about a lighthouse keeper."}])
    if constrained:
        kw["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
    t0 = time.perf_counter()
    ttft, tokens = None, 0
    for ch in client.chat.completions.create(**kw):
        if ttft is None and ch.choices and ch.choices[0].delta.content:
            ttft = time.perf_counter() - t0
        if ch.usage is not None:
            tokens = ch.usage.completion_tokens
    return tokens, ttft or float("nan"), time.perf_counter() - t0


def run(client, concurrency: int, requests: int, constrained: bool, max_tokens: int) -> dict:
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(concurrency) as ex:
        res = list(ex.map(lambda i: _one(client, constrained, max_tokens, i), range(requests)))
    wall = time.perf_counter() - t0
    toks = sum(r[0] for r in res)
    ttfts = sorted(r[1] for r in res)
    return {"concurrency": concurrency, "constrained": constrained, "requests": requests, "tokens": toks,
            "wall_s": round(wall, 2), "tokens_per_s": round(toks / wall, 2),
            "ttft_p50_s": round(statistics.median(ttfts), 3),
            "ttft_p95_s": round(ttfts[min(len(ttfts) - 1, int(0.95 * len(ttfts)))], 3),
            "ttft_max_s": round(ttfts[-1], 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from server_harness import RunningServer

    srv = RunningServer(max_batch=16)
    client = srv.client()
    _one(client, True, 4, 0)   # warm: model, grammar compile
    _one(client, False, 4, 0)
    rows = []
    try:
        for conc in (1, 4, 8):
            for constrained in (False, True):
                n = args.requests if conc > 1 else max(2, args.requests // 4)
                r = run(client, conc, n, constrained, args.max_tokens)
                rows.append(r)
                print(json.dumps(r), flush=True)
    finally:
        srv.stop()
    base = {c: next(r for r in rows if r["concurrency"] == 1 and r["constrained"] == c) for c in (False, True)}
    for r in rows:
        r["speedup_vs_sequential"] = round(r["tokens_per_s"] / base[r["constrained"]]["tokens_per_s"], 2)
    for conc in (1, 4, 8):
        u, c = (next(r for r in rows if r["concurrency"] == conc and r["constrained"] == k) for k in (False, True))
        print(f"concurrency {conc}: unconstrained {u['tokens_per_s']} tok/s (x{u['speedup_vs_sequential']}), "
              f"constrained {c['tokens_per_s']} tok/s (x{c['speedup_vs_sequential']}), "
              f"constrained/unconstrained {c['tokens_per_s'] / u['tokens_per_s']:.2f}, "
              f"TTFT p50/p95 {c['ttft_p50_s']}/{c['ttft_p95_s']} s (constrained), "
              f"{u['ttft_p50_s']}/{u['ttft_p95_s']} s (unconstrained)")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
