"""Mask times of the built-in ``python`` grammar with the SmolLM2 vocabulary, cold and warm apart.

In one fresh process: the compile; a mask at every token boundary of file A (tables and
parser states cold: the first file the grammar sees); the same walk again on a new matcher
(every mask a cache hit); then file B (tables warm, parser states new: the steady state of
generation). Reports p50/p99/max per phase.

    python bench/bench_python_masks.py [--files textwrap.py shlex.py]
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", nargs=2, default=["textwrap.py", "shlex.py"], help="two stdlib files: A and B")
    ap.add_argument("--tokens", type=int, default=1500, help="tokens walked per file")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from guidewire.core import Vocab, allocate_token_bitmask
    from guidewire.core.vocab import _named_tokenizer
    from guidewire.grammar import compile_python

    vocab = Vocab.load("smollm2")
    tok = _named_tokenizer("smollm2")[0]
    t = time.perf_counter()
    g = compile_python(vocab)
    compile_s = time.perf_counter() - t
    bm = allocate_token_bitmask(1, vocab.vocab_size)
    root = sysconfig.get_paths()["stdlib"]

    def walk(name: str) -> list[float]:
        with open(os.path.join(root, name), encoding="utf-8") as f:
            text = f.read()
        ids = tok(text, add_special_tokens=False)["input_ids"][:args.tokens]
        m = g.matcher()
        times = []
        for t_id in ids:
            t0 = time.perf_counter()
            m.fill_bitmask(bm, 0)
            times.append(time.perf_counter() - t0)
            assert (int(bm[0, t_id // 32]) >> (t_id % 32)) & 1
            assert m.advance(t_id)
        return times

    def summary(xs: list[float]) -> dict:
        xs = sorted(xs)
        return {"n": len(xs), "p50_ms": round(1e3 * xs[len(xs) // 2], 3),
                "p99_ms": round(1e3 * xs[min(len(xs) - 1, int(.99 * len(xs)))], 3), "max_ms": round(1e3 * xs[-1], 3)}

    a_cold = walk(args.files[0])
    a_hit = walk(args.files[0])
    b_warm = walk(args.files[1])
    report = {"compile_s": round(compile_s, 2), "file_a": args.files[0], "file_b": args.files[1],
              "first_mask_ms": round(1e3 * a_cold[0], 1),
              "A_cold_grammar": summary(a_cold), "A_again_cache_hits": summary(a_hit),
              "B_warm_grammar_new_states": summary(b_warm), "stats": g.stats()}
    print(report)
    return report


if __name__ == "__main__":
    main()
