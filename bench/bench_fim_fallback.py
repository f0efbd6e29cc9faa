"""Which prompt serves fill-in-the-middle best for a model without FIM tokens (SmolLM2)?

Dev set: one line removed from a function body in Python standard-library files (prefix = text
before the line, suffix = text after it, the line is the missing middle). Each point is completed
with ``fallback="prefix"`` and ``fallback="suffix_comment"`` (suffix shown first as a comment), and
optionally ``prefix_noheal`` (the prefix prompt without token healing),
greedy, one line (``stop=["\\n"]``), interleaved in one process. Scores: exact match of the line
(whitespace-stripped) and of its first identifier.

    PYTHONPATH=. HF_HUB_OFFLINE=1 GUIDEWIRE_NUM_THREADS=1 python bench/bench_fim_fallback.py --samples 40
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import sysconfig
from pathlib import Path

_IDENT = re.compile(r"[A-Za-z_]\w*")


def points(n: int, seed: int):
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in lib.glob("*.py") if 5_000 < p.stat().st_size < 200_000)
    rng = random.Random(seed)
    rng.shuffle(files)
    out = []
    for f in files:
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        cands = [i for i, x in enumerate(lines) if i > 20 and x.startswith("        ") and len(x.strip()) > 8
                 and not x.strip().startswith(("#", '"', "'")) and x.rstrip().endswith((")", "]", "1", "0", "e"))]
        if not cands:
            continue
        i = rng.choice(cands)
        ind = len(lines[i]) - len(lines[i].lstrip(" "))
        prefix = "".join(lines[:i]) + " " * ind
        out.append((f.name, prefix, lines[i].strip(), "\n" + "".join(lines[i + 1:])))
        if len(out) == n:
            break
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default="prefix,suffix_comment",
                    help="comma-separated: prefix, suffix_comment, prefix_noheal (prefix without token healing)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from guidewire import complete_code

    modes = tuple(args.modes.split(","))
    score = {m: {"exact": 0, "first_ident": 0} for m in modes}
    rows = []
    pts = points(args.samples, args.seed)
    for k, (fname, prefix, target, suffix) in enumerate(pts):
        row = {"file": fname, "target": target}
        for m in (modes if k % 2 == 0 else modes[::-1]):
            out = complete_code(prefix, suffix=suffix, monitors=(), max_tokens=24, stop=["\n"],
                                max_prompt_tokens=args.context, fallback=m.replace("_noheal", ""),
                                token_healing=not m.endswith("_noheal"))
            got = out.text.strip()
            row[m] = got
            score[m]["exact"] += got == target
            a, b = _IDENT.match(got), _IDENT.match(target)
            score[m]["first_ident"] += bool(a and b and a.group() == b.group())
        rows.append(row)
    report = {"samples": len(pts), "context": args.context, "scores": score}
    if args.out:
        Path(args.out).write_text(json.dumps({**report, "rows": rows}, indent=1))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
