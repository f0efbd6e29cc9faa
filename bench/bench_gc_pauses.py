"""How much of the mask tail is CPython's cyclic GC: MaskBench masks timed with the collector on,
off, or with the warmed-up heap frozen (``gc.freeze()``), every full (generation-2) collection's
pause logged.

One process per mode (so modes do not share a heap): a warm-up on 20 other schemas (imports,
per-vocabulary memos), then compile each schema of a seeded sample cold, walk its tokenized
instances, time every ``fill_bitmask``. Reports per mode p50/p99/max,
the masks above 20 ms (schema, instance, step, the text before, the thread's CPU time inside the
mask and the time spent in collections of each generation inside it: wall time far above CPU time
is the process waiting, not computing), the generation-2 collections and their pauses, and the
tracked objects at the end. ``--first K`` runs MaskBench's own order (sorted names) from index K.

    python bench/bench_gc_pauses.py --tokenizer smollm2 --n 150 --out bench/results/h18/gc_pauses_smollm2.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(HERE, "..", "shared", "data", "maskbench")
MODES = ("gc", "no-gc", "freeze")

WORKER = r'''
import array, gc, json, os, random, sys, time
import numpy as np
from guidewire.grammar import compile_json_schema
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances
mode, tok, data, n, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
first = int(sys.argv[6])
b = load_tokenizer(tok)
files = sorted(f for f in os.listdir(data) if f.endswith(".json"))
if first < 0:
    random.Random(seed).shuffle(files)
    warm = files[n:n + 20]
else:  # MaskBench's own order (sorted names) from index `first`, warmed on the 20 before it
    warm = files[max(0, first - 20):first]
    files = files[first:]
for f in warm:  # warm-up on other schemas: imports, per-vocabulary memos
    try:
        g = compile_json_schema(load_case(os.path.join(data, f)).schema, b.vocab)
        g.matcher().fill_bitmask(np.zeros((1, g.words), dtype=np.int32), 0)
    except Exception:
        pass
g = None
start_tracked = len(gc.get_objects())
if mode == "no-gc":
    gc.disable()
elif mode == "freeze":  # what a long-lived server can do once warmed up
    gc.collect()
    gc.freeze()
log = []
sizes = []
gen_ns = [0, 0, 0]  # time spent in collections of each generation, running total
_t = [0]
def _on_gc(phase, info):
    if phase == "start" and info["generation"] == 2 and os.environ.get("GC_SIZES"):
        objs = gc.get_objects(2)  # what the collection is about to walk (diagnosis only: slow)
        sizes.append((len(objs), sum(len(gc.get_referents(o)) for o in objs)))
        del objs
    now = time.perf_counter_ns()
    if info["generation"] == 2:  # (only these: a log of every collection would grow and be walked itself)
        log.append((phase, 2, now / 1e9))
    if phase == "start":
        _t[0] = now
    else:
        gen_ns[info["generation"]] += now - _t[0]
gc.callbacks.append(_on_gc)
times, slow, compiled = array.array("d"), [], 0  # raw doubles: a list of floats would be walked by every collection
for f in files[:n]:
    try:
        case = load_case(os.path.join(data, f))
        g = compile_json_schema(case.schema, b.vocab)
    except Exception:
        continue
    compiled += 1
    buf = np.zeros((1, g.words), dtype=np.int32)
    for ii, inst in enumerate(tokenize_instances(case, b)):
        toks = inst["tokens"]
        m = g.matcher()
        for k, t in enumerate(toks):
            g0 = list(gen_ns)
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            m.fill_bitmask(buf, 0)
            dt = (time.perf_counter_ns() - t0) / 1e3
            cpu = (time.thread_time_ns() - c0) / 1e6
            times.append(dt)
            if dt > 20_000:
                before = b"".join(b.vocab.token_bytes[x] for x in toks[max(0, k - 8):k])[-40:]
                slow.append({"ms": dt / 1e3, "cpu_ms": round(cpu, 1),
                             "gc_ms": [round((x - y) / 1e6, 1) for x, y in zip(gen_ns, g0)],
                             "schema": f, "instance": ii, "step": k,
                             "before": before.decode("utf-8", "replace")})
            if not (buf[0, t >> 5] >> (t & 31)) & 1 or not m.advance(t):
                break
starts = [t for p, g2, t in log if p == "start" and g2 == 2]
stops = [t for p, g2, t in log if p == "stop" and g2 == 2]
a = np.asarray(times)
print(json.dumps({"mode": mode, "schemas": compiled, "masks": int(a.size),
                  "p50_us": float(np.percentile(a, 50)), "p99_us": float(np.percentile(a, 99)),
                  "max_us": float(a.max()), "over_20ms": int((a > 20_000).sum()),
                  "over_5ms": int((a > 5_000).sum()), "slow": sorted(slow, key=lambda r: -r["ms"]),
                  "gen2_collections": len(starts),
                  "gen2_pause_ms": sorted(round((y - x) * 1e3, 1) for x, y in zip(starts, stops)),
                  "tracked_after_tokenizer": start_tracked, "gen2_sizes": sizes,
                  "gen2_pause_in_order_ms": [round((y - x) * 1e3, 1) for x, y in zip(starts, stops)], "tracked_at_end": len(gc.get_objects())}))
'''


def main(argv=None) -> int:
    """Run each mode in its own process on the same schemas; print and save the reports."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--n", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--first", type=int, default=-1,
                    help="run MaskBench's own order (sorted names) from this index instead of a seeded sample")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    reports = []
    for mode in args.modes.split(","):
        if mode not in MODES:
            raise SystemExit(f"unknown mode {mode!r}; expected one of {MODES}")
        proc = subprocess.run([sys.executable, "-c", WORKER, mode, args.tokenizer, args.data, str(args.n),
                               str(args.seed), str(args.first)], capture_output=True, text=True, env=env, timeout=3600)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-2000:])
        rep = json.loads(proc.stdout.strip().splitlines()[-1])
        reports.append(rep)
        print(json.dumps({k: v for k, v in rep.items() if k != "slow"}), flush=True)
        for r in rep["slow"][:5]:
            print("   ", json.dumps(r), flush=True)
    out = {"tokenizer": args.tokenizer, "n": args.n, "seed": args.seed, "reports": reports}
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
