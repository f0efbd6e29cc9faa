"""Offline soundness sweep: MaskBench's labelled instances through the compiled grammar vs ``jsonschema``.

Not collected by pytest (minutes to hours). For every schema of a sample, compile it (strict and
``any_order=True``: the exact language; in schema order where ``any_order`` hits its limits, and
then only soundness is checked), walk each instance's ``json.dumps`` text (default and
compact separators) byte by byte, and compare with ``jsonschema`` (FormatChecker). Prints one line
per disagreement and a summary; ``accepted_invalid`` must be 0.

    PYTHONPATH=. python tests/sweep_soundness.py [--every 8] [--limit-s 20] [DATA_DIR]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import sys
import time
from collections import Counter

import jsonschema

sys.path.insert(0, os.path.dirname(__file__))

from test_jsonschema import accepts  # noqa: E402
from test_jsonschema_fuzz import _integral_float  # noqa: E402

from guidewire.core import Vocab  # noqa: E402
from guidewire.core.errors import GuidewireError  # noqa: E402
from guidewire.grammar import compile_json_schema  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "maskbench")


class _Timeout(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Timeout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?", default=DEFAULT_DATA)
    ap.add_argument("--every", type=int, default=8, help="take every k-th schema (sorted by name)")
    ap.add_argument("--offset", type=int, default=0, help="starting at this one")
    ap.add_argument("--limit-s", type=int, default=20, help="per-schema compile+check limit (seconds)")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.data, "*.json")))[args.offset:: args.every]
    vocab = Vocab.load("smollm2")
    stats: Counter = Counter()
    signal.signal(signal.SIGALRM, _alarm)
    start = time.time()
    for path in files:
        case = json.load(open(path))
        schema = case["schema"]
        stats["schemas"] += 1
        signal.alarm(args.limit_s)
        try:
            try:
                g, exact = compile_json_schema(schema, vocab, any_order=True), True
            except GuidewireError:  # any_order has its own limits: schema order (a subset) instead
                g, exact = compile_json_schema(schema, vocab), False
                stats["schema_order_only"] += 1
            cls = jsonschema.validators.validator_for(schema) if isinstance(schema, dict) else \
                jsonschema.Draft202012Validator
            check = cls(schema, format_checker=cls.FORMAT_CHECKER)
            stats["compiled"] += 1
            for t in case["tests"]:
                try:
                    valid = check.is_valid(t["data"])
                except Exception:  # noqa: BLE001 - the oracle cannot decide
                    stats["oracle_errors"] += 1
                    continue
                for text in {json.dumps(t["data"]), json.dumps(t["data"], separators=(",", ":"))}:
                    ok = accepts(g, text)
                    stats["instances"] += 1
                    if ok and not valid:
                        stats["accepted_invalid"] += 1
                        print("UNSOUND", os.path.basename(path), text[:300], flush=True)
                    elif valid and not ok and exact:
                        kind = "rejected_valid_integral_float" if _integral_float(t["data"]) else "rejected_valid"
                        stats[kind] += 1
                        print("OVER", os.path.basename(path), text[:200], flush=True)
        except _Timeout:
            stats["timeout"] += 1
        except GuidewireError as exc:
            stats["refused_" + type(exc).__name__] += 1
        except Exception as exc:  # noqa: BLE001 - a crash is a finding too
            stats["crash"] += 1
            print("CRASH", os.path.basename(path), type(exc).__name__, str(exc)[:200], flush=True)
        finally:
            signal.alarm(0)
    stats["seconds"] = int(time.time() - start)
    print(json.dumps(dict(sorted(stats.items()))), flush=True)
    return 1 if stats["accepted_invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
