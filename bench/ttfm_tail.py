"""The compile tail: time to first mask (compile + a matcher's first mask) per engine, in one process.

MaskBench's TTFM p50 hides the schemas whose compile takes seconds. This compiles a random sample of
MaskBench schemas (or the ones whose ``pattern`` puts a Unicode class such as ``\\w`` or ``\\S``
under a bound of at least 30, ``--counted-unicode``) with each engine named, each schema cold
(engines are warmed up once on a small schema), and prints per engine the schemas compiled, TTFM
p50 / p90 / p99 / max and the total, plus the slowest schemas.

    GUIDEWIRE_NUM_THREADS=1 python bench/ttfm_tail.py --tokenizer gemma3 --engines guidewire,llguidance \\
        --n 1500 [--seed 5] [--counted-unicode] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import sys
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from guidewire.core import allocate_token_bitmask  # noqa: E402
from guidewire.maskbench.data import load_case, load_tokenizer  # noqa: E402
from guidewire.maskbench.engines import EngineContext, build_engine  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BOUND = re.compile(r"\{(\d*),?(\d*)\}")
_UNICODE_CLASS = re.compile(r"\\[wSDW]|\[\^|(?<!\\)\.")


def patterns_of(node, out: list) -> list:
    """``(pattern, maxLength)`` of every ``pattern`` and ``patternProperties`` key in ``node``."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            out.append((node["pattern"], node.get("maxLength")))
        if isinstance(node.get("patternProperties"), dict):
            out.extend((k, None) for k in node["patternProperties"])
        for v in node.values():
            patterns_of(v, out)
    elif isinstance(node, list):
        for v in node:
            patterns_of(v, out)
    return out


def counted_unicode(schema) -> bool:
    """Whether a pattern of ``schema`` puts a class of non-ASCII characters under a bound >= 30
    (its own ``{m,n}`` or the string's ``maxLength``)."""
    for pattern, max_len in patterns_of(schema, []):
        bounds = [int(b) for _a, b in _BOUND.findall(pattern) if b.isdigit()]
        if _UNICODE_CLASS.search(pattern) and ((bounds and max(bounds) >= 30)
                                               or (isinstance(max_len, int) and max_len >= 30)):
            return True
    return False


def select(data: str, n: int, seed: int, unicode_only: bool) -> list[str]:
    """File names: ``n`` at random (``seed``), or every counted-Unicode schema when ``unicode_only``."""
    files = sorted(f for f in os.listdir(data) if f.endswith(".json"))
    if unicode_only:
        out = []
        for f in files:
            try:
                schema = load_case(os.path.join(data, f)).schema
            except Exception:  # noqa: BLE001 - an unreadable file is no candidate
                continue
            if counted_unicode(schema):
                out.append(f)
        return out[:n]
    random.Random(seed).shuffle(files)
    return files[:n]


def measure(engines: dict, files: list[str], data: str, vocab_size: int) -> dict:
    """``{engine: {file: ms or None}}``: each schema compiled and its first mask computed, cold."""
    bitmask = allocate_token_bitmask(1, vocab_size)
    out = {name: {} for name in engines}
    for f in files:
        schema = load_case(os.path.join(data, f)).schema
        for name, engine in engines.items():
            t0 = time.perf_counter()
            try:
                engine.compile(schema).matcher().fill_bitmask(bitmask, 0)
                out[name][f] = round((time.perf_counter() - t0) * 1e3, 3)
            except Exception:  # noqa: BLE001 - a refused schema has no TTFM
                out[name][f] = None
    return out


def summarize(times: dict) -> dict:
    """Per engine: schemas, compiled, TTFM p50/p90/p99/max/total (ms) over the compiled ones, and
    the five slowest."""
    out = {}
    for name, per in times.items():
        ok = np.array([v for v in per.values() if v is not None], dtype=np.float64)
        row = {"schemas": len(per), "compiled": int(ok.size)}
        if ok.size:
            row.update({f"p{q}_ms": round(float(np.percentile(ok, q)), 2) for q in (50, 90, 99)})
            row.update(max_ms=round(float(ok.max()), 1), total_s=round(float(ok.sum()) / 1e3, 2),
                       slowest=sorted(((v, f) for f, v in per.items() if v is not None), reverse=True)[:5])
        out[name] = row
    return out


def main(argv=None) -> int:
    """Measure and print (see the module); 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "shared", "data", "maskbench"))
    ap.add_argument("--tokenizer", default="gemma3")
    ap.add_argument("--engines", default="guidewire,llguidance")
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--counted-unicode", action="store_true", help="only schemas with a counted Unicode class")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    ctx = EngineContext(args.tokenizer, tok.vocab_size, tuple(tok.eos_ids))
    engines = {name: build_engine(name, ctx) for name in args.engines.split(",")}
    for engine in engines.values():
        engine.warm_up()
    gc.collect()
    gc.freeze()     # as the MaskBench worker does after its warm-up
    files = select(args.data, args.n, args.seed, args.counted_unicode)
    times = measure(engines, files, args.data, tok.vocab_size)
    summary = summarize(times)
    for name, row in summary.items():
        print(name, json.dumps({k: v for k, v in row.items() if k != "slowest"}), flush=True)
        for ms, f in row.get("slowest", []):
            print(f"   {ms:10.1f} ms  {f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"tokenizer": args.tokenizer, "counted_unicode": args.counted_unicode, "seed": args.seed,
                       "summary": summary, "times": times}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
