"""Grammar-engine benchmark: guidewire beside llguidance and XGrammar, in one run.

For each grammar (JSON, SQL) and tokenizer (SmolLM2 by default, ``--vocab gemma3`` for the
262k case) every engine compiles the same grammar text (llguidance: Lark; XGrammar: its
EBNF / built-in JSON grammar) and then walks the same token sequences, computing the
mask before every token. The sequences are replayed ``--repeat`` times; guidewire memoises masks
per grammar state, so later passes are mostly memo hits while a peer may recompute. So the COLD
pass (the first replay right after a fresh compile: every state reached for the first time in
this grammar) and the WARM passes (the replays after it) are reported apart, per engine:
per-step mask time p50/p90/p99/max, and guidewire's ratios to each peer, cold vs cold and warm vs
warm. guidewire's compile includes the token tables ``compile_lark`` precomputes within its budget
(``--precompute SECONDS``; 0 = every table built lazily by the cold pass), and the summary is printed.
Also printed: first compile (tokenizer parts included) and a repeated compile. "Cold" is
cold per grammar, not per process: tokenizer-level tables built by an earlier grammar in the same
run are reused (run one grammar per process with ``--grammars`` to see that too).

    python bench/bench_grammar.py [--vocab smollm2|gemma3] [--grammars json,sql] [--repeat 3]
        [--precompute SECONDS] [--out bench/results/grammar.json]
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


def _passes(sequences, repeat, walk):
    """``walk(seq) -> step times`` over every sequence, ``repeat`` times; one list of times per pass."""
    out = []
    for _ in range(repeat):
        times = []
        for seq in sequences:
            times.extend(walk(seq))
        out.append(times)
    return out


def run_guidewire(grammar_text, vocab, sequences, repeat, precompute=None):
    t = time.perf_counter()
    g = compile_lark(grammar_text, vocab, precompute=precompute)
    first = time.perf_counter() - t
    pre = g.precomputed
    bm = allocate_token_bitmask(1, vocab.vocab_size)

    def walk(seq):
        times = []
        m = g.matcher()
        for tok in seq:
            t = time.perf_counter()
            m.fill_bitmask(bm, 0)
            times.append(time.perf_counter() - t)
            assert m.advance(tok), "guidewire rejected a valid token"
        return times

    passes = _passes(sequences, repeat, walk)
    t = time.perf_counter()  # after the walks, so a shared cache could not warm them
    compile_lark(grammar_text, vocab, precompute=precompute)
    warm = time.perf_counter() - t
    return first, warm, passes, pre


def run_llguidance(grammar_text, hf_tok, vocab_size, sequences, repeat):
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

    def walk(seq):
        times = []
        m = llguidance.LLMatcher(lltok, grammar)
        for tok in seq:
            t = time.perf_counter()
            lnp.fill_next_token_bitmask(m, bm, 0)
            times.append(time.perf_counter() - t)
            if not m.consume_token(tok):
                raise RuntimeError("llguidance rejected a valid token: " + str(m.get_error()))
        return times

    return tok_time + warm, warm, _passes(sequences, repeat, walk)


def run_xgrammar(kind, hf_tok, vocab_size, sequences, repeat):
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

    def walk(seq):
        times = []
        m = xgr.GrammarMatcher(compiled)
        for tok in seq:
            t = time.perf_counter()
            m.fill_next_token_bitmask(bm, 0)
            times.append(time.perf_counter() - t)
            if not m.accept_token(tok):
                raise RuntimeError("xgrammar rejected a valid token")
        return times

    del torch
    return tok_time + warm, warm, _passes(sequences, repeat, walk)


def _row(first, warm, passes, precomputed=None, **extra):
    row = {"precomputed": precomputed} if precomputed is not None else {}
    row |= {"compile_first_ms": first * 1e3, "compile_warm_ms": warm * 1e3, "mask_us_cold": _pct(passes[0])}
    if len(passes) > 1:
        row["mask_us_warm"] = _pct([t for p in passes[1:] for t in p])
    row.update(extra)
    return row


def _print_table(name, vocab_name, rows, n_steps, repeat):
    print(f"\n== {name} grammar, {vocab_name} ({n_steps} masked steps per pass; cold = pass 1 after a fresh "
          f"compile, warm = passes 2..{repeat})")
    print(f"{'engine':<11} {'pass':<5} {'compile':>9} {'again':>9} {'p50 us':>9} {'p90 us':>9} {'p99 us':>10} "
          f"{'max us':>10}")
    for eng, r in rows.items():
        if "error" in r:
            print(f"{eng:<11} error: {r['error'][:90]}")
            continue
        for kind in ("cold", "warm"):
            mu = r.get("mask_us_" + kind)
            if mu is None:
                continue
            comp = (f"{r['compile_first_ms']:8.1f}ms {r['compile_warm_ms']:8.1f}ms" if kind == "cold"
                    else " " * 21)
            print(f"{eng:<11} {kind:<5} {comp} {mu['p50']:9.1f} {mu['p90']:9.1f} {mu['p99']:10.1f} "
                  f"{mu['max']:10.1f}")
    gw = rows["guidewire"]
    pre = gw.get("precomputed")
    if pre:
        print(f"guidewire's compile includes precomputed token tables: {pre['tables']} of {pre['classes']} lexer "
              f"state classes in {pre['seconds'] * 1e3:.1f} ms, {pre['bytes'] / 2**20:.1f} MiB"
              f"{'' if pre['complete'] else ', stopped: ' + str(pre['stopped'])}")
    for eng, r in rows.items():
        if eng == "guidewire" or "error" in r:
            continue
        for kind in ("cold", "warm"):
            a, b = gw.get("mask_us_" + kind), r.get("mask_us_" + kind)
            if a and b:
                print(f"ratio guidewire/{eng} {kind}: p50 {a['p50'] / b['p50']:.2f}x, p90 {a['p90'] / b['p90']:.2f}x, "
                      f"p99 {a['p99'] / b['p99']:.2f}x, max {a['max'] / b['max']:.2f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default="smollm2", choices=["smollm2", "gemma3"])
    ap.add_argument("--repeat", type=int, default=3, help="passes over the inputs (1 cold + the rest warm)")
    ap.add_argument("--grammars", default="json,sql", help="comma-separated, from json,sql")
    ap.add_argument("--out", default=None)
    ap.add_argument("--precompute", type=float, default=None,
                    help="guidewire's compile-time table budget in seconds (default: compile_lark's; 0 = lazy)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    t = time.perf_counter()
    vocab = Vocab.load(args.vocab)
    hf_tok = _named_tokenizer(args.vocab)[0]
    print(f"tokenizer {args.vocab}: {len(vocab)} tokens, loaded in {time.perf_counter() - t:.2f}s")
    workloads = {
        "json": (builtin_grammar("json"), [json.dumps(d, indent=i) for d in JSON_DOCS for i in (None, 2)]),
        "sql": (builtin_grammar("sql"), SQL_QUERIES),
    }
    wanted = [g.strip() for g in args.grammars.split(",") if g.strip()]
    unknown = [g for g in wanted if g not in workloads]
    if unknown or not wanted:
        ap.error(f"unknown grammar(s) {unknown}; known: {', '.join(workloads)}")
    report = {"vocab": args.vocab, "repeat": args.repeat,
              "cold": "first replay after a fresh compile (tokenizer-level tables may be shared within the run)",
              "grammars": {}}
    for name in wanted:
        text, inputs = workloads[name]
        seqs = [hf_tok.encode(s, add_special_tokens=False) for s in inputs]
        rows = {"guidewire": _row(*run_guidewire(text, vocab, seqs, args.repeat, args.precompute))}
        try:
            rows["llguidance"] = _row(*run_llguidance(text, hf_tok, vocab.vocab_size, seqs, args.repeat))
        except Exception as exc:  # a peer missing or failing is reported, not fatal
            rows["llguidance"] = {"error": f"{type(exc).__name__}: {exc}"}
        if name == "json":
            try:
                rows["xgrammar"] = _row(*run_xgrammar(name, hf_tok, vocab.vocab_size, seqs, args.repeat),
                                        note="built-in JSON grammar")
            except Exception as exc:
                rows["xgrammar"] = {"error": f"{type(exc).__name__}: {exc}"}
        report["grammars"][name] = rows
        _print_table(name, args.vocab, rows, sum(len(s) for s in seqs), args.repeat)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
