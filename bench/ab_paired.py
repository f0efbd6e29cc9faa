"""Paired A/B of mask times: two long-lived workers (old tree, new tree) walk the same schemas,
schema by schema, in alternating order, so both meet the same machine load.

Each worker compiles a schema cold and walks its tokenized MaskBench instances, timing every
``fill_bitmask``; the masks are the same sequence in both trees, so per-mask times pair up.
Prints p50/p99/max per tree and the median per-mask new/old ratio over the slow masks, and
TTFM (compile plus the first mask) per tree over the schemas both trees compiled and masked,
with its median per-schema ratio. A schema whose walks differ in length between the trees (one rejects a token
the other allows) is left out of the mask pairing and counted.

    git archive <base-commit> | tar -x -C /tmp/base
    python bench/ab_paired.py --base /tmp/base --n 100 [--tokenizer gemma3] [--out FILE] [--files LIST] [--keep-heap]

Both workers freeze their start-up heap out of CPython's full collections, as the MaskBench
worker does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(HERE, "..", "shared", "data", "maskbench")
WORKER = r'''
import json, sys, time
import numpy as np
from guidewire.grammar import compile_json_schema
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances
b = load_tokenizer(sys.argv[1])
import gc; gc.collect(); gc.freeze()    # as the MaskBench worker does
if sys.argv[2] == "keep":                # freed memory kept mapped, as MaskBench's workers do by default
    from guidewire.core.heap import keep_heap_mapped
    keep_heap_mapped()
print("ready", flush=True)
for line in sys.stdin:
    times, ttfm = [], None
    try:
        case = load_case(line.strip())
        t0 = time.perf_counter_ns()
        g = compile_json_schema(case.schema, b.vocab)
        compiled = (time.perf_counter_ns() - t0) / 1e3
        buf = np.zeros((1, g.words), dtype=np.int32)
        for inst in tokenize_instances(case, b):
            toks = inst["tokens"]
            if not toks:
                continue
            m = g.matcher()
            for tok in toks:
                t0 = time.perf_counter_ns()
                m.fill_bitmask(buf, 0)
                times.append((time.perf_counter_ns() - t0) / 1e3)
                if ttfm is None:
                    ttfm = compiled + times[-1]
                if not (buf[0, tok >> 5] >> (tok & 31)) & 1 or not m.advance(tok):
                    break
    except Exception as exc:
        times, ttfm = [], None
    print(json.dumps({"times": times, "ttfm_us": ttfm}), flush=True)
'''


def _start(tree: str, tokenizer: str, keep_heap: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": tree, "HF_HUB_OFFLINE": "1", "GUIDEWIRE_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    p = subprocess.Popen([sys.executable, "-c", WORKER, tokenizer, "keep" if keep_heap else "give"], cwd=tree,
                         env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == "ready"
    return p


def _ask(p: subprocess.Popen, path: str) -> dict:
    p.stdin.write(path + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", default=HERE)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--tokenizer", default="smollm2", help="smollm2 or gemma3")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    ap.add_argument("--files", default=None, help="a file of schema names (one per line) instead of a sample")
    ap.add_argument("--keep-heap", action="store_true", help="both workers keep freed memory mapped "
                    "(guidewire.core.heap.keep_heap_mapped, as MaskBench's workers do): fewer page faults in the pairs")
    args = ap.parse_args(argv)
    files = sorted(f for f in os.listdir(args.data) if f.endswith(".json"))
    sample = random.Random(args.seed).sample(files, min(args.n, len(files)))
    if args.files:
        with open(args.files) as f:
            sample = [x.strip() for x in f if x.strip()]
    workers = {k: _start(os.path.abspath(t), args.tokenizer, args.keep_heap)
               for k, t in (("base", args.base), ("new", args.new))}
    per_schema = []     # (name, {tree: [total ms, largest ms, masks over 5 ms]})
    got: dict[str, list] = {"base": [], "new": []}
    ttfm: dict[str, list] = {"base": [], "new": []}
    unpaired = 0
    for i, name in enumerate(sample):
        path = os.path.abspath(os.path.join(args.data, name))
        order = ("base", "new") if i % 2 == 0 else ("new", "base")
        res = {k: _ask(workers[k], path) for k in order}
        per_schema.append((name, {k: [round(sum(r["times"]) / 1e3, 3), round(max(r["times"], default=0) / 1e3, 3),
                                      sum(t > 5000 for t in r["times"])] for k, r in res.items()}))
        if len(res["base"]["times"]) == len(res["new"]["times"]):   # the same masks: pair them
            for k in got:
                got[k].extend(res[k]["times"])
        else:
            unpaired += 1
        if res["base"]["ttfm_us"] is not None and res["new"]["ttfm_us"] is not None:
            for k in ttfm:
                ttfm[k].append(res[k]["ttfm_us"])
    for p in workers.values():
        p.stdin.close()
        p.wait()
    base, new = (np.array(got[k]) for k in ("base", "new"))
    out = {k: {"n": int(a.size), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
               "p99.9": float(np.percentile(a, 99.9)), "max": float(a.max()),
               "total_ms": float(a.sum() / 1e3), "over_1ms_total_ms": float(a[a > 1000].sum() / 1e3)}
           for k, a in (("base", base), ("new", new))}
    slow = base >= np.percentile(base, 99)
    out["ratio_p50"] = out["new"]["p50"] / out["base"]["p50"]
    out["ratio_p99"] = out["new"]["p99"] / out["base"]["p99"]
    out["median_pair_ratio_all"] = float(np.median(new / base))
    out["median_pair_ratio_slowest_1pct"] = float(np.median(new[slow] / base[slow]))
    out["over_20ms"] = {k: int((a > 20_000).sum()) for k, a in (("base", base), ("new", new))}
    out["over_5ms"] = {k: int((a > 5_000).sum()) for k, a in (("base", base), ("new", new))}
    tb, tn = np.array(ttfm["base"]), np.array(ttfm["new"])
    out["ttfm_ms"] = {"schemas": int(tb.size), "base_p50": float(np.median(tb) / 1e3) if tb.size else None,
                      "new_p50": float(np.median(tn) / 1e3) if tn.size else None,
                      "median_pair_ratio": float(np.median(tn / tb)) if tb.size else None}
    out["schemas_unpaired"] = unpaired     # walks of different lengths: left out of the mask pairing
    out["tokenizer"], out["schemas"], out["seed"] = args.tokenizer, len(sample), args.seed
    out["keep_heap"] = args.keep_heap
    out["per_schema"] = per_schema
    print(json.dumps(out, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
