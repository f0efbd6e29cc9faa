"""Sweep the built-in ``python`` grammar over real files: zero false rejections, corruptions refused.

Oracle: CPython's own ``ast.parse`` (a file is in the sweep iff it parses) and ``tokenize`` (where
the cut points and corruptions go). Each file is tokenized with the SmolLM2 tokenizer and walked
through a matcher token by token (every ``advance`` of the true continuation must succeed and the
end must accept); at random cut points the mask is computed (timed, first call and cache hit) and
must allow the true next token. Corruptions are inserted at random Python-token boundaries, each
invalid for every completion: ``close`` (an unmatched ``)`` at bracket depth 0), ``eqeq`` (``= =``)
and ``dedent`` (a line dedented to a width between two open levels); the corrupted prefix must be
refused (``step_bytes`` returns None). Every file that is refused is listed with line:column and
the reason; none is skipped silently.

    python bench/sweep_python_grammar.py --files 2000 --workers 2 --out bench/results/python_sweep.json
"""

from __future__ import annotations

import argparse
import ast
import bisect
import io
import json
import os
import random
import sys
import time
import tokenize

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MAX_FILE_BYTES = 120_000
REFRESH_BYTES = 250 << 20      # recompile a worker's grammar once its parser states pass this


def list_files(roots: list[str]) -> list[str]:
    """Every ``.py`` file under ``roots``, sorted."""
    out = []
    for root in roots:
        for d, _dirs, files in os.walk(root):
            out.extend(os.path.join(d, f) for f in files if f.endswith(".py"))
    return sorted(set(out))


def read_source(path: str) -> tuple[str | None, str]:
    """(text, "") for a file ``ast.parse`` accepts, else (None, why)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        ast.parse(raw)
    except (SyntaxError, ValueError) as exc:
        return None, f"not valid Python 3.11: {type(exc).__name__}: {exc}"
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(enc)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return None, f"undecodable: {exc}"
    return text.lstrip("\ufeff"), ""


def _line_col(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{line}:{col}"


def corruption_points(text: str, data: bytes, rng: random.Random, per_kind: int):
    """Random ``(kind, byte offset, inserted text)`` corruptions, each invalid for every completion."""
    starts = [0]
    for line in data.split(b"\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    lines = text.split("\n")

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + len(lines[row - 1][:col].encode("utf-8"))

    code, dedents = [], []
    depth, stack = 0, [0]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.INDENT:
                stack.append(len(tok.string.expandtabs(8)))
            elif tok.type == tokenize.DEDENT:
                stack.pop()
            elif tok.type == tokenize.NEWLINE and depth == 0 and tok.end[0] < len(lines):
                widths = [w for w in range(1, stack[-1]) if w not in stack]
                if widths and tok.string:   # the start of the next line
                    dedents.append((starts[tok.end[0]], rng.choice(widths)))
            elif tok.type == tokenize.OP or tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING):
                if tok.type == tokenize.OP and tok.string in "([{":
                    depth += 1
                elif tok.type == tokenize.OP and tok.string in ")]}":
                    depth -= 1
                code.append((offset(*tok.start), depth if not (tok.type == tokenize.OP and tok.string in ")]}") else depth + 1))
    except (tokenize.TokenError, IndentationError):
        pass
    out = []
    closes = [p for p, d in code if d == 0]
    for kind, pool, make in (("close", closes, lambda p: (p, " )")),
                             ("eqeq", [p for p, _d in code], lambda p: (p, " = = ")),
                             ("dedent", dedents, lambda pw: (pw[0], " " * pw[1] + "pass\n"))):
        for item in rng.sample(pool, min(per_kind, len(pool))):
            p, ins = make(item)
            out.append((kind, p, ins))
    return out


class Sweeper:
    """One worker: a compiled grammar (recompiled as its parser states grow) and the tokenizer."""

    def __init__(self, cuts: int, corruptions: int, seed: int):
        from guidewire.core import Vocab
        from guidewire.core.vocab import _named_tokenizer

        self.vocab = Vocab.load("smollm2")
        self.tok = _named_tokenizer("smollm2")[0]
        self.cuts, self.corruptions, self.seed = cuts, corruptions, seed
        self.grammar = None
        self.fresh = False       # the grammar was just compiled: its token tables are cold
        self.compile_seconds: list[float] = []

    def _grammar(self):
        from guidewire.core import Limits
        from guidewire.grammar import compile_python

        g = self.grammar
        if g is None or g.earley.nbytes > REFRESH_BYTES:
            t = time.perf_counter()
            g = self.grammar = compile_python(self.vocab)
            g.set_limits(Limits(parser_bytes=1 << 30, step_seconds=None))
            self.compile_seconds.append(time.perf_counter() - t)
            self.fresh = True
        return g

    def file(self, path: str) -> dict:
        """Sweep one file; a dict of what happened (see the module doc)."""
        from guidewire.core import allocate_token_bitmask

        out = {"path": path}
        text, why = read_source(path)
        if text is None:
            out["status"] = "excluded"
            out["why"] = why
            return out
        data = text.encode("utf-8")
        g = self._grammar()
        rng = random.Random(f"{self.seed}:{path}")
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        if self.vocab.decode(ids) != data:
            out["status"] = "excluded"
            out["why"] = "the tokenizer does not round-trip this text"
            return out
        cuts = set(rng.sample(range(len(ids) + 1), min(self.cuts, len(ids) + 1)))
        bm = allocate_token_bitmask(1, self.vocab.vocab_size)
        m = g.matcher()
        states, bounds = [m.state], [0]
        cold, warm = [], []
        pos = 0
        t0 = time.perf_counter()
        for i in range(len(ids) + 1):
            nxt = ids[i] if i < len(ids) else None
            if i in cuts:
                t = time.perf_counter()
                m.fill_bitmask(bm, 0)
                cold.append(time.perf_counter() - t)
                t = time.perf_counter()
                m.fill_bitmask(bm, 0)
                warm.append(time.perf_counter() - t)
                want = nxt if nxt is not None else min(self.vocab.eos_ids)
                if not (int(bm[0, want // 32]) >> (want % 32)) & 1:
                    out["status"] = "false-rejection"
                    out["why"] = f"mask refuses the true token {self.vocab.token_bytes[want]!r} at {_line_col(data, pos)}"
                    return out
            if nxt is None:
                break
            if not m.advance(nxt):
                out["status"] = "false-rejection"
                out["why"] = (f"advance refuses the true token {self.vocab.token_bytes[nxt]!r} at "
                              f"{_line_col(data, pos)}: {m.error or ''}")
                return out
            pos += len(self.vocab.token_bytes[nxt])
            states.append(m.state)
            bounds.append(pos)
        walk = time.perf_counter() - t0
        if not m.is_accepting():
            out["status"] = "false-rejection"
            out["why"] = "the whole file is not accepted at its end"
            return out
        corr = []
        for kind, p, ins in corruption_points(text, data, rng, self.corruptions):
            k = bisect.bisect_right(bounds, p) - 1
            s, q = states[k]
            ok = g.step_bytes(s, q, data[bounds[k]:p] + ins.encode())
            corr.append((kind, ok is None, f"{_line_col(data, p)} {ins!r}"))
        out.update(status="accepted", tokens=len(ids), bytes=len(data), walk_s=walk, mask_cold=cold,
                   mask_warm=warm, corruptions=corr, fresh_grammar=self.fresh)
        self.fresh = False
        return out


_WORKER: Sweeper | None = None


def _init(cuts, corruptions, seed):
    global _WORKER
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _WORKER = Sweeper(cuts, corruptions, seed)


def _run(path):
    try:
        r = _WORKER.file(path)
    except Exception as exc:   # reported, never skipped
        r = {"path": path, "status": "error", "why": f"{type(exc).__name__}: {exc}"}
    r["compiles"] = list(_WORKER.compile_seconds)
    return r


def _progress(results: list, t0: float) -> None:
    if len(results) % 50 == 0:
        bad = sum(r["status"] in ("false-rejection", "error") for r in results)
        print(f"{len(results)} files, {bad} refused, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def pct(xs, q):
    """The ``q``-quantile of ``xs`` (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", action="append", help="directories of .py files (default: the stdlib)")
    ap.add_argument("--files", type=int, default=200, help="files to sample (0: all)")
    ap.add_argument("--cuts", type=int, default=3, help="mask checks per file")
    ap.add_argument("--corruptions", type=int, default=2, help="corruptions per kind per file")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES,
                    help="files larger than this are not sampled (counted in the report)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import sysconfig

    roots = args.root or [sysconfig.get_paths()["stdlib"]]
    files = list_files(roots)
    files = [f for f in files if "site-packages" not in f or any("site-packages" in r for r in roots)]
    sizes = {f: os.path.getsize(f) for f in files}
    too_big = [f for f in files if sizes[f] > args.max_bytes]
    files = [f for f in files if sizes[f] <= args.max_bytes]
    random.Random(args.seed).shuffle(files)
    if args.files:
        files = files[:args.files]
    t0 = time.perf_counter()
    results = []
    if args.workers > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.workers, _init, (args.cuts, args.corruptions, args.seed)) as pool:
            for r in pool.imap_unordered(_run, files, chunksize=4):
                results.append(r)
                _progress(results, t0)
    else:
        _init(args.cuts, args.corruptions, args.seed)
        for f in files:
            results.append(_run(f))
            _progress(results, t0)
    wall = time.perf_counter() - t0
    acc = [r for r in results if r["status"] == "accepted"]
    bad = [r for r in results if r["status"] in ("false-rejection", "error")]
    excl = [r for r in results if r["status"] == "excluded"]
    cold = [x for r in acc if not r["fresh_grammar"] for x in r["mask_cold"]]
    fresh = [x for r in acc if r["fresh_grammar"] for x in r["mask_cold"]]
    warm = [x for r in acc for x in r["mask_warm"]]
    kinds = {}
    for r in acc:
        for kind, rejected, _where in r["corruptions"]:
            k = kinds.setdefault(kind, [0, 0])
            k[0] += 1
            k[1] += rejected
    missed = [(r["path"], kind, where) for r in acc for kind, rejected, where in r["corruptions"] if not rejected]
    compiles = [c for r in results for c in r.get("compiles", [])]
    report = {
        "roots": roots, "max_bytes": args.max_bytes, "larger_files_not_sampled": len(too_big),
        "files": len(results), "accepted": len(acc), "false_rejections": len(bad), "excluded": len(excl),
        "bytes": sum(r["bytes"] for r in acc), "tokens": sum(r["tokens"] for r in acc),
        "cuts": len(cold) + len(fresh), "wall_s": round(wall, 1), "workers": args.workers,
        # a mask at a parser state seen for the first time, on a grammar whose tables are warm
        "mask_first_ms": {k: round(1e3 * pct(cold, q), 3) for k, q in (("p50", .5), ("p99", .99), ("max", 1.0))},
        # the same on the first file after a compile (token tables built on first use)
        "mask_cold_grammar_ms": {k: round(1e3 * pct(fresh, q), 3) for k, q in (("p50", .5), ("max", 1.0))},
        "cold_grammar_cuts": len(fresh),
        "mask_hit_ms": {k: round(1e3 * pct(warm, q), 3) for k, q in (("p50", .5), ("p99", .99), ("max", 1.0))},
        "walk_ms_per_token": round(1e3 * sum(r["walk_s"] for r in acc) / max(1, sum(r["tokens"] for r in acc)), 3),
        "compile_s": {"first": round(compiles[0], 2) if compiles else None, "count": len(set(compiles))},
        "corruptions": {k: {"tried": v[0], "rejected": v[1], "rate": round(v[1] / max(1, v[0]), 4)}
                        for k, v in kinds.items()},
        "rejected_files": [(r["path"], r["why"]) for r in bad],
        "excluded_files": [(r["path"], r["why"]) for r in excl],
        "missed_corruptions": missed[:50],
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("excluded_files",)}, indent=1))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
