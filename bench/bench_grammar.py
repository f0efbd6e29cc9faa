"""Grammar-engine benchmark: guidewire beside llguidance and XGrammar, in one run.

For each grammar (JSON, SQL) and tokenizer (SmolLM2 by default, ``--vocab gemma3`` for the
262k case) every engine compiles the same grammar text (llguidance: Lark; XGrammar: its
EBNF / built-in JSON grammar) and then walks the same token sequences, computing the
mask before every token. Printed: first compile, warm compile (per-tokenizer parts
cached), per-step mask time p50/p90/p99/max, and guidewire's ratios to each peer.

    python bench/bench_grammar.py [--vocab smollm2|gemma3] [--out bench/results/grammar.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.core import Vocab, allocate_token_bitmask  # noqa: E402
from guidewire.core.vocab import _named_tokenizer  # noqa: E402
from guidewire.grammar import builtin_grammar, compile_lark  # noqa: E402

JSON_DOCS = [
    {"name": "Zoë", "age": 31, "tags": ["a", "b"], "x": None, "ok": True, "f": -1.5e3},
    {"id": 12345, "items": [{"sku": "A-1", "qty": 2, "price": 9.99}, {"sku": "B-7", "qty": 1, "price": 120.0}],
     "customer": {"first": "Ada", "last": "Lovelace", "email": "ada@example.com"}, "paid": False},
    [1, 2, 3, [4, 5, [6, 7]], {"deep": {"deeper": {"deepest": "value with spaces and ünïcödé"}}}],
    {"description": "A long-ish free text field, the kind a model writes inside a JSON string, "
                    "with punctuation, numbers like 42 and 3.14, and a quote: \"hi\".", "score": 0.87},
]
SQL_QUERIES = [
    "SELECT * FROM users WHERE age > 21 ORDER BY name LIMIT 10;",
    "SELECT u.name, COUNT(o.id) AS n FROM users u JOIN orders o ON o.user_id = u.id "
    "GROUP BY u.name HAVING COUNT(o.id) > 3 ORDER BY n DESC",
    "SELECT DISTINCT city FROM customers WHERE country IN ('DE', 'FR') AND name LIKE 'A%' "
    "UNION SELECT city FROM suppliers",
    "SELECT CASE WHEN score >= 90 THEN 'A' WHEN score >= 80 THEN 'B' ELSE 'C' END AS grade, "
    "AVG(score) FROM results WHERE year BETWEEN 2019 AND 2024 GROUP BY grade",
]


def _pct(xs):
    a = np.asarray(xs) * 1e6
    return {"p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "p99": float(np.percentile(a, 99)), "max": float(a.max()), "n": int(a.size)}


def run_guidewire(grammar_text, vocab, sequences):
    t = time.perf_counter()
    g = compile_lark(grammar_text, vocab)
    first = time.perf_counter() - t
    t = time.perf_counter()
    compile_lark(grammar_text, vocab)
    warm = time.perf_counter() - t
    bm = allocate_token_bitmask(1, vocab.vocab_size)
    times = []
    for seq in sequences:
        m = g.matcher()
        for tok in seq:
            t = time.perf_counter()
            m.fill_bitmask(bm, 0)
            times.append(time.perf_counter() - t)
            assert m.advance(tok), "guidewire rejected a valid token"
    return first, warm, times


def run_llguidance(grammar_text, hf_tok, vocab_size, sequences):
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lnp

    t = time.perf_counter()
    lltok = llguidance.hf.from_tokenizer(hf_tok, n_vocab=vocab_size)
    tok_time = time.perf_counter() - t
    t = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_lark(grammar_text)
    m0 = llguidance.LLMatcher(lltok, grammar)
    warm = time.perf_counter() - t
    if m0.is_error():
        raise RuntimeError(m0.get_error())
    bm = lnp.allocate_token_bitmask(1, vocab_size)
    times = []
    for seq in sequences:
        m = llguidance.LLMatcher(lltok, grammar)
        for tok in seq:
            t = time.perf_counter()
            lnp.fill_next_token_bitmask(m, bm, 0)
            times.append(time.perf_counter() - t)
            if not m.consume_token(tok):
                raise RuntimeError("llguidance rejected a valid token: " + str(m.get_error()))
    return tok_time + warm, warm, times


def run_xgrammar(kind, hf_tok, vocab_size, sequences):
    import torch
    import xgrammar as xgr

    t = time.perf_counter()
    info = xgr.TokenizerInfo.from_huggingface(hf_tok, vocab_size=vocab_size)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    tok_time = time.perf_counter() - t
    t = time.perf_counter()
    if kind == "json":
        compiled = compiler.compile_builtin_json_grammar()
    else:
        raise ValueError("no XGrammar EBNF for " + kind)
    warm = time.perf_counter() - t
    bm = xgr.allocate_token_bitmask(1, vocab_size)
    times = []
    for seq in sequences:
        m = xgr.GrammarMatcher(compiled)
        for tok in seq:
            t = time.perf_counter()
            m.fill_next_token_bitmask(bm, 0)
            times.append(time.perf_counter() - t)
            if not m.accept_token(tok):
                raise RuntimeError("xgrammar rejected a valid token")
    del torch
    return tok_time + warm, warm, times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default="smollm2", choices=["smollm2", "gemma3"])
    ap.add_argument("--repeat", type=int, default=3, help="passes over the inputs (steps measured each time)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t = time.perf_counter()
    vocab = Vocab.load(args.vocab)
    hf_tok = _named_tokenizer(args.vocab)[0]
    print(f"tokenizer {args.vocab}: {len(vocab)} tokens, loaded in {time.perf_counter() - t:.2f}s")
    workloads = {
        "json": (builtin_grammar("json"), [json.dumps(d, indent=i) for d in JSON_DOCS for i in (None, 2)]),
        "sql": (builtin_grammar("sql"), SQL_QUERIES),
    }
    report = {"vocab": args.vocab, "grammars": {}}
    for name, (text, inputs) in workloads.items():
        seqs = [hf_tok.encode(s, add_special_tokens=False) for s in inputs] * args.repeat
        rows = {}
        first, warm, times = run_guidewire(text, vocab, seqs)
        rows["guidewire"] = {"compile_first_ms": first * 1e3, "compile_warm_ms": warm * 1e3, "mask_us": _pct(times)}
        try:
            first, warm, times = run_llguidance(text, hf_tok, vocab.vocab_size, seqs)
            rows["llguidance"] = {"compile_first_ms": first * 1e3, "compile_warm_ms": warm * 1e3,
                                  "mask_us": _pct(times)}
        except Exception as exc:  # a peer missing or failing is reported, not fatal
            rows["llguidance"] = {"error": f"{type(exc).__name__}: {exc}"}
        if name == "json":
            try:
                first, warm, times = run_xgrammar(name, hf_tok, vocab.vocab_size, seqs)
                rows["xgrammar"] = {"compile_first_ms": first * 1e3, "compile_warm_ms": warm * 1e3,
                                    "mask_us": _pct(times), "note": "built-in JSON grammar"}
            except Exception as exc:
                rows["xgrammar"] = {"error": f"{type(exc).__name__}: {exc}"}
        report["grammars"][name] = rows
        print(f"\n== {name} grammar, {args.vocab} ({sum(len(s) for s in seqs)} masked steps)")
        print(f"{'engine':<11} {'compile':>9} {'warm':>9} {'p50 us':>9} {'p90 us':>9} {'p99 us':>10} {'max us':>10}")
        for eng, r in rows.items():
            if "error" in r:
                print(f"{eng:<11} error: {r['error'][:90]}")
                continue
            mu = r["mask_us"]
            print(f"{eng:<11} {r['compile_first_ms']:8.1f}ms {r['compile_warm_ms']:8.1f}ms {mu['p50']:9.1f} "
                  f"{mu['p90']:9.1f} {mu['p99']:10.1f} {mu['max']:10.1f}")
        gw = rows["guidewire"]["mask_us"]
        for eng, r in rows.items():
            if eng != "guidewire" and "error" not in r:
                print(f"ratio guidewire/{eng}: p50 {gw['p50'] / r['mask_us']['p50']:.2f}x, "
                      f"p99 {gw['p99'] / r['mask_us']['p99']:.2f}x")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
