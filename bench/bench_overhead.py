"""Constrained vs unconstrained decoding speed with the same model, prompt and token count.

Each round runs, interleaved (a shared CPU is noisy, so medians over ``--rounds`` are reported):

* COLD constrained: a freshly compiled grammar (built-in JSON grammar, or ``--schema FILE`` through
  compile_json_schema), so every mask is built during the run (compile time reported apart);
* WARM constrained: the same generation again on that grammar (greedy, so the same sequence: every
  mask is a memo hit -- the best case, not the typical one);
* unconstrained: exactly as many tokens (EOS disabled, max_tokens equal), the same model work
  except where the grammar forces tokens.

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
            schema = json.load(f)

        def compile_fresh():
            return compile_json_schema(schema, lm.vocab)
    else:
        text = builtin_grammar("json")

        def compile_fresh():
            return compile_lark(text, lm.vocab)
    ids = lm.encode_prompt(PROMPT)

    # one unmeasured warm-up of the model paths (and of the tokenizer-level tables every grammar shares)
    first = timed(lm, ids, compile_fresh().matcher(), args.tokens)[0]
    timed(lm, ids, None, len(first.token_ids), ignore_eos=True)
    rows = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        grammar = compile_fresh()
        comp_s = time.perf_counter() - t
        k, k_s, k_dec = timed(lm, ids, grammar.matcher(), args.tokens)  # cold: every mask built now
        c, c_s, c_dec = timed(lm, ids, grammar.matcher(), args.tokens)  # warm: the same sequence again
        assert c.token_ids == k.token_ids, "greedy decoding differs between cold and warm runs"
        u, u_s, u_dec = timed(lm, ids, None, len(c.token_ids), ignore_eos=True)
        assert len(u.token_ids) == len(c.token_ids), (len(u.token_ids), len(c.token_ids))
        rows.append({"n": len(c.token_ids), "compile_s": comp_s, "cold_s": k_s, "cold_dec": k_dec, "warm_s": c_s,
                     "warm_dec": c_dec, "unc_s": u_s, "unc_dec": u_dec, "calls": c.usage.model_calls,
                     "unc_calls": u.usage.model_calls})
    toks = rows[-1]["n"]

    def med(key, dec=False):
        if dec:
            vals = [(r["n"] - 1) / r[key] for r in rows if r[key] > 0]
            return statistics.median(vals) if toks > 1 and vals else float("nan")
        return statistics.median(r["n"] / r[key] for r in rows)

    cold_tps, warm_tps, u_tps = med("cold_s"), med("warm_s"), med("unc_s")
    cold_dec, warm_dec, u_dec = med("cold_dec", True), med("warm_dec", True), med("unc_dec", True)
    out = {"model": args.model, "threads": args.threads, "grammar": args.schema or "builtin json",
           "tokens": toks, "rounds": args.rounds,
           "cold_constrained_tok_s": round(cold_tps, 2), "warm_constrained_tok_s": round(warm_tps, 2),
           "unconstrained_tok_s": round(u_tps, 2),
           "cold_ratio": round(cold_tps / u_tps, 3), "warm_ratio": round(warm_tps / u_tps, 3),
           "cold_decode_only_ratio": round(cold_dec / u_dec, 3), "warm_decode_only_ratio": round(warm_dec / u_dec, 3),
           "cold_ratio_min": round(min(r["unc_s"] / r["cold_s"] for r in rows), 3),
           "compile_ms_median": round(1e3 * statistics.median(r["compile_s"] for r in rows), 1),
           "constrained_model_calls": rows[-1]["calls"], "unconstrained_model_calls": rows[-1]["unc_calls"],
           "sample_output": first.text[:120]}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"model {args.model}, {args.threads} thread(s), {toks} tokens, {args.rounds} rounds "
              f"({out['grammar']})")
        print(f"  cold constrained  {cold_tps:7.2f} tok/s  (fresh compile per round, {out['compile_ms_median']} ms "
              f"not included)")
        print(f"  warm constrained  {warm_tps:7.2f} tok/s  (same sequence replayed: masks memoised; "
              f"{out['constrained_model_calls']} model calls)")
        print(f"  unconstrained     {u_tps:7.2f} tok/s  ({out['unconstrained_model_calls']} model calls)")
        print(f"  ratio cold {out['cold_ratio']:.3f}x (worst round {out['cold_ratio_min']:.3f}x, decode only "
              f"{out['cold_decode_only_ratio']:.3f}x), warm {out['warm_ratio']:.3f}x (decode only "
              f"{out['warm_decode_only_ratio']:.3f}x); target >= 0.9x")
        print(f"  output: {out['sample_output']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
