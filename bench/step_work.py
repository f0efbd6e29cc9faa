"""Work units and wall time of every mask and advance on a sample of MaskBench schemas.

Sets the step budget (``Limits.step_work``) from data: walks every tokenized instance of each
sampled schema (as the MaskBench runner does), recording per step the work units spent
(``core.limits.Fuel``) and the wall time, with the budget off. Prints the largest steps, the
work-unit percentiles and the time per unit of the big steps.

    python bench/step_work.py --n 300 --out /tmp/step_work.json
    PYTHONPATH=/tmp/base python bench/step_work.py --tokenizer gemma3 --files LIST   # another tree

Work units are deterministic (no machine noise): on a shared machine, two trees' totals over the
same schemas (``units_total``, ``mask_units_total``) compare their work where paired timings
move by 5-10% from run to run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import time

import numpy as np

os.environ.setdefault("GUIDEWIRE_STEP_WORK", str(10**15))   # compile's first mask unbounded too
os.environ.setdefault("GUIDEWIRE_STEP_SECONDS", "1e9")

from guidewire.core import Limits  # noqa: E402
from guidewire.grammar import compile_json_schema  # noqa: E402
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(HERE, "..", "shared", "data", "maskbench")
OFF = Limits(step_work=10**15, step_seconds=None)


class _Timeout(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Timeout()


SIZES: list = []   # per schema: (lexer bytes, parser bytes, memory_bytes) after its walks


def measure(path: str, bundle, steps: list) -> str:
    """Walk every instance of one schema; append ``(kind, units, seconds, path)`` per step."""
    case = load_case(path)
    t0 = time.perf_counter()
    g = compile_json_schema(case.schema, bundle.vocab)
    fuel = g._fuel   # its last step: the first mask, computed by compile's satisfiability check
    steps.append(("first mask", fuel.spent, time.perf_counter() - t0, path))
    g.set_limits(OFF)
    fuel = g._fuel
    buf = np.zeros((1, g.words), dtype=np.int32)
    for inst in tokenize_instances(case, bundle):
        tokens = inst["tokens"]
        if not tokens:
            continue
        m = g.matcher()
        for tok in tokens + [None]:
            fuel.spent = 0
            t0 = time.perf_counter()
            m.fill_bitmask(buf, 0)
            steps.append(("mask", fuel.spent, time.perf_counter() - t0, path))
            if tok is None or not (buf[0, tok >> 5] >> (tok & 31)) & 1:
                break
            fuel.spent = 0
            t0 = time.perf_counter()
            ok = m.advance(tok)
            steps.append(("advance", fuel.spent, time.perf_counter() - t0, path))
            if not ok:
                break
    SIZES.append((g.dfa.nbytes, g.earley.nbytes, g.memory_bytes(), os.path.basename(path)))
    return "ok"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=60, help="seconds per schema")
    p.add_argument("--out", default="step_work.json")
    p.add_argument("--tokenizer", default="smollm2", help="smollm2 or gemma3")
    p.add_argument("--files", default=None, help="a file of schema names (one per line) instead of a sample")
    args = p.parse_args(argv)
    files = sorted(f for f in os.listdir(args.data) if f.endswith(".json"))
    sample = random.Random(args.seed).sample(files, min(args.n, len(files)))
    if args.files:
        with open(args.files) as f:
            sample = [os.path.basename(x.strip()) for x in f if x.strip()]
    bundle = load_tokenizer(args.tokenizer)
    steps: list = []
    status: dict[str, int] = {}
    signal.signal(signal.SIGALRM, _alarm)
    for i, name in enumerate(sample):
        signal.alarm(args.timeout)
        try:
            s = measure(os.path.join(args.data, name), bundle, steps)
        except _Timeout:
            s = "timeout"
        except Exception as exc:   # noqa: BLE001 -- compile refusals are counted, not fatal
            s = type(exc).__name__
        finally:
            signal.alarm(0)
        status[s] = status.get(s, 0) + 1
        if i % 25 == 0:
            print(f"{i}/{len(sample)} {status}", flush=True)
    units = np.array([u for _k, u, _t, _p in steps], dtype=np.float64)
    secs = np.array([t for _k, _u, t, _p in steps], dtype=np.float64)
    big = units >= 10_000
    top = sorted(steps, key=lambda x: -x[1])[:15]
    slow = sorted(steps, key=lambda x: -x[2])[:15]
    result = {
        "schemas": status, "steps": len(steps), "tokenizer": args.tokenizer,
        "units_total": float(units.sum()),
        "mask_units_total": float(sum(u for k, u, _t, _p in steps if k != "advance")),
        "units_p50_p99_p999_max": [float(np.percentile(units, q)) for q in (50, 99, 99.9)] + [float(units.max())],
        "seconds_max": float(secs.max()),
        "us_per_unit_big_steps": (float(np.median(secs[big] / units[big]) * 1e6) if big.any() else None),
        "us_per_unit_big_steps_max": (float((secs[big] / units[big]).max() * 1e6) if big.any() else None),
        # (bytes, schema) of the largest lexer, parser and whole grammar
        **{f"max_{name}_bytes": [max(SIZES, key=lambda x: x[i])[i], max(SIZES, key=lambda x: x[i])[3]]
           for i, name in enumerate(("lexer", "parser", "memory")) if SIZES},
        "top_units": [(k, u, round(t * 1e3, 2), os.path.basename(pth)) for k, u, t, pth in top],
        "top_seconds": [(k, u, round(t * 1e3, 2), os.path.basename(pth)) for k, u, t, pth in slow],
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
