"""Constrained vs unconstrained decoding speed with the same model, prompt and token count.

The constrained run (built-in JSON grammar, or ``--schema FILE`` through compile_json_schema)
goes first; the unconstrained run then produces exactly as many tokens (EOS disabled, max_tokens
equal), so both do the same amount of model work except where the grammar forces tokens. Runs
are interleaved over ``--rounds`` and the medians reported, since a shared CPU is noisy.

    python bench/bench_overhead.py [--tokens 128] [--rounds 3] [--threads 1] [--schema FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

PROMPT = ("Write a JSON object describing a small library: its name, city, and a list of five books, "
          "each with title, author, year and a list of tags.")


def timed(lm, ids, constraint, max_tokens, ignore_eos=False):
    """Run one generation; returns (result, total seconds, seconds after the first token)."""
    from guidewire.runtime import iter_decode

    gen = iter_decode(lm.sequence(), ids, constraint, vocab=lm.vocab, max_tokens=max_tokens,
                      ignore_eos=ignore_eos)
    t0 = time.perf_counter()
    first = None
    while True:
        try:
            next(gen)
            if first is None:
                first = time.perf_counter()
        except StopIteration as stop:
            end = time.perf_counter()
            return stop.value, end - t0, end - (first or end)


def main(argv=None) -> int:
    """Run the benchmark; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokens", type=int, default=128, help="token budget of the constrained run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--schema", default=None, help="JSON Schema file (default: the built-in JSON grammar)")
    ap.add_argument("--json", action="store_true", help="print one JSON line of results")
    args = ap.parse_args(argv)

    import torch

    from guidewire.grammar import builtin_grammar, compile_lark
    from guidewire.runtime import load_model

    torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    if args.schema:
        from guidewire.grammar import compile_json_schema

        with open(args.schema) as f:
            grammar = compile_json_schema(json.load(f), lm.vocab)
    else:
        grammar = compile_lark(builtin_grammar("json"), lm.vocab)
    ids = lm.encode_prompt(PROMPT)

    cold, cold_s, _ = timed(lm, ids, grammar.matcher(), args.tokens)  # warms the grammar's caches
    n = len(cold.token_ids)
    timed(lm, ids, None, n, ignore_eos=True)  # warm-up for the unconstrained path
    rows = []
    for _ in range(args.rounds):
        c, c_s, c_dec = timed(lm, ids, grammar.matcher(), args.tokens)
        u, u_s, u_dec = timed(lm, ids, None, len(c.token_ids), ignore_eos=True)
        assert len(u.token_ids) == len(c.token_ids), (len(u.token_ids), len(c.token_ids))
        rows.append((len(c.token_ids), c_s, c_dec, u_s, u_dec, c.usage.model_calls, u.usage.model_calls))
    toks = rows[-1][0]
    c_tps = statistics.median(r[0] / r[1] for r in rows)
    u_tps = statistics.median(r[0] / r[3] for r in rows)
    c_dec = statistics.median((r[0] - 1) / r[2] for r in rows if r[2] > 0) if toks > 1 else float("nan")
    u_dec = statistics.median((r[0] - 1) / r[4] for r in rows if r[4] > 0) if toks > 1 else float("nan")
    out = {"model": args.model, "threads": args.threads, "grammar": args.schema or "builtin json",
           "tokens": toks, "rounds": args.rounds, "constrained_tok_s": round(c_tps, 2),
           "unconstrained_tok_s": round(u_tps, 2), "ratio": round(c_tps / u_tps, 3),
           "decode_only_ratio": round(c_dec / u_dec, 3), "constrained_model_calls": rows[-1][5],
           "unconstrained_model_calls": rows[-1][6], "cold_constrained_s": round(cold_s, 2),
           "sample_output": cold.text[:120]}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"model {args.model}, {args.threads} thread(s), {toks} tokens, {args.rounds} rounds "
              f"({out['grammar']})")
        print(f"  constrained   {c_tps:7.2f} tok/s  ({out['constrained_model_calls']} model calls)")
        print(f"  unconstrained {u_tps:7.2f} tok/s  ({out['unconstrained_model_calls']} model calls)")
        print(f"  ratio {out['ratio']:.3f}x (decode only {out['decode_only_ratio']:.3f}x; target >= 0.9x)")
        print(f"  first constrained run incl. lazy mask building: {cold_s:.2f}s")
        print(f"  output: {out['sample_output']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
