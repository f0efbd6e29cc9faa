"""Does filling a batch's bitmask from a thread pool pay (as XGrammar does), or not?

B matchers on B different JSON-Schema grammars fill one (B, words) int32 bitmask, either in
a plain loop or with ``ThreadPoolExecutor.map`` over the rows (numpy releases the GIL in its
kernels; the grammar work itself is Python). Measured warm (every mask a memo hit, the
steady state of decoding) and cold (fresh grammars: every mask computed). Prints the median
and max batch times and the pool/loop ratio.

    python bench/bench_parallel_fill.py --batch 8 --workers 2
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from guidewire.core import Vocab, allocate_token_bitmask
from guidewire.grammar import compile_json_schema


def _schema(i: int) -> dict:
    return {"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 5 + i},
                                             "n": {"type": "integer", "minimum": i},
                                             "tags": {"type": "array", "items": {"enum": ["x", "y", str(i)]}}},
            "required": [f"k{i}"], "additionalProperties": {"type": "number"}}


def _walk_to(m, vocab, text: bytes) -> None:
    b2t = vocab.bytes_to_tokens()
    for ch in text:
        assert m.advance(b2t[bytes([ch])])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--cold-reps", type=int, default=6)
    args = p.parse_args(argv)
    vocab = Vocab.load("smollm2")
    B = args.batch
    bm = allocate_token_bitmask(B, vocab.vocab_size)
    pool = ThreadPoolExecutor(args.workers)

    def loop(ms):
        for i, m in enumerate(ms):
            m.fill_bitmask(bm, i)

    def pooled(ms):
        list(pool.map(lambda im: im[1].fill_bitmask(bm, im[0]), enumerate(ms)))

    def fresh():
        gs = [compile_json_schema(_schema(i), vocab) for i in range(B)]
        ms = [g.matcher() for g in gs]
        for i, m in enumerate(ms):
            _walk_to(m, vocab, b'{"k%d": "ab' % i)
        return ms

    out = {}
    ms = fresh()
    loop(ms)   # warm
    for mode in ("warm", "cold"):
        t = {"loop": [], "pool": []}
        reps = args.reps if mode == "warm" else args.cold_reps
        for r in range(reps):
            for name in (("loop", "pool") if r % 2 == 0 else ("pool", "loop")):
                if mode == "cold":
                    ms = fresh()
                f = loop if name == "loop" else pooled
                t0 = time.perf_counter()
                f(ms)
                t[name].append(time.perf_counter() - t0)
        out[mode] = {k: {"median_us": float(np.median(v) * 1e6), "max_us": float(np.max(v) * 1e6)}
                     for k, v in t.items()}
        out[mode]["pool_over_loop_median"] = out[mode]["pool"]["median_us"] / out[mode]["loop"]["median_us"]
    print(json.dumps({"batch": B, "workers": args.workers, **out}, indent=1))


if __name__ == "__main__":
    main()
