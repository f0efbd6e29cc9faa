"""Dot-completion evaluation of the dereference monitor on the Python standard library.

Dev set (fixed seed): points where ``NAME.attr`` appears inside a function body of a standard
library module (tests excluded) and jedi lists ``attr`` at the dot; at most ``--per-file`` points
per file. For each point SmolLM2 decodes greedily (temperature 0) from the file prefix up to and
including the dot (plain text, its last ``--context`` tokens; as ``complete_code`` does, the
prompt's last token -- the dot -- is healed: the output re-spells it, so ``._`` can begin a private
name as in the model's training text; ``--no-heal`` keeps it), once without and once with the
dereference monitor (which analyses the whole prefix), in one run; the back end is warmed up
first as ``guidewire serve`` and ``guidewire lsp`` do (``--no-warm-up``). ``--synced``: before
each point the buffer as it was before the dot was typed is parsed in the back end, as
``guidewire lsp`` does for an open document (its time reported apart); without it every trigger
meets its buffer cold. Reported per arm: next
identifier exact match (the first identifier generated equals ``attr``), the share of completions
whose identifier is not an attribute jedi lists at that dot (an empty identifier counts as
invalid), and for the monitor: time per trigger (p50/p95/max), abstentions by reason.

    python bench/bench_dot_completion.py --points 300 --out bench/results/monitors
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import statistics
import sys
import sysconfig
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "turtledemo"}


def stdlib_files() -> list[str]:
    """The standard library's ``.py`` files, tests and third-party packages excluded, sorted."""
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.startswith("test"))
        out.extend(os.path.join(d, f) for f in sorted(files) if f.endswith(".py") and not f.startswith("test"))
    return out


def candidate_points(source: str) -> list[tuple[int, str]]:
    """``(byte offset of the dot, attr)`` of every ``NAME.attr`` inside a function body."""
    tree = ast.parse(source)
    lines = source.encode("utf-8").splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for stmt in fn.body:
            for node in ast.walk(stmt):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.end_lineno == node.value.end_lineno):
                    end = starts[node.end_lineno - 1] + node.end_col_offset  # col offsets are bytes
                    dot = end - len(node.attr.encode()) - 1
                    if source.encode("utf-8")[dot:dot + 1] == b".":
                        out.append((dot, node.attr))
    return sorted(set(out))


def build_devset(n_points: int, seed: int, per_file: int, deadline_s: float,
                 exclude: frozenset = frozenset()) -> list[dict]:
    """The dev set: points jedi confirms (``attr`` listed at the dot), with the listed names;
    files in ``exclude`` (paths relative to the standard library) are skipped (a tuning set
    disjoint from the evaluation set)."""
    from guidewire.monitors.analysis import AnalysisTimeout, JediBackend, cursor

    rng = random.Random(seed)
    files = stdlib_files()
    rng.shuffle(files)
    stdlib = sysconfig.get_paths()["stdlib"]
    files = [f for f in files if os.path.relpath(f, stdlib) not in exclude]
    backend = JediBackend()
    points = []
    for path in files:
        if len(points) >= n_points:
            break
        try:
            with open(path, encoding="utf-8") as f:
                source = f.read()
            cands = candidate_points(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        rng.shuffle(cands)
        kept = 0
        raw = source.encode("utf-8")
        for dot, attr in cands[:per_file * 3]:
            if kept >= per_file or len(points) >= n_points:
                break
            code = raw[:dot + 1].decode("utf-8")
            line, col = cursor(code)
            try:
                names = backend.attributes(code, line, col, path=path, deadline_s=deadline_s)
            except AnalysisTimeout:
                continue
            if names and attr in names:
                points.append({"file": os.path.relpath(path, sysconfig.get_paths()["stdlib"]),
                               "dot": dot, "attr": attr, "names": sorted(set(names))})
                kept += 1
    return points


def first_identifier(text: str) -> str:
    """The leading identifier of ``text`` (empty when it does not start with one)."""
    n = 0
    while n < len(text) and (text[n].isalnum() or text[n] == "_"):
        n += 1
    return text[:n]


class IdentifierSegment:
    """No mask at all, but a segment (for :class:`~guidewire.search.segment.SegmentSearch`)
    from the start (after ``skip`` bytes: a healed tail) until the first non-identifier
    character: the search without a monitor."""

    def __init__(self, vocab, text: bytes = b"", skip: int = 0):
        self.vocab, self._text, self._hist = vocab, bytearray(text), []
        self._row = None
        self.skip = skip

    @property
    def segment_open(self) -> bool:
        """Whether the text after the skipped bytes is all identifier characters (and all the
        skipped bytes were written)."""
        return len(self._text) >= self.skip and all(
            chr(c).isalnum() or c == 0x5F or c >= 0x80 for c in self._text[self.skip:])

    def fill_bitmask(self, bitmask, row=0):
        """Every ordinary token and EOS."""
        from guidewire.core.bitmask import fill_row, ids_to_bitmask

        if self._row is None:
            v = self.vocab
            self._row = ids_to_bitmask(v.normal_ids, v.vocab_size) | ids_to_bitmask(sorted(v.eos_ids), v.vocab_size)
        fill_row(bitmask, row, self._row)

    def advance(self, tok):
        """Append the token's bytes."""
        self._hist.append(len(self._text))
        self._text.extend(self.vocab.token_bytes[tok])
        return True

    def rollback(self, n=1):
        """Undo ``n`` tokens."""
        for _ in range(n):
            del self._text[self._hist.pop():]

    def fork(self):
        """A copy."""
        f = IdentifierSegment(self.vocab, bytes(self._text), self.skip)
        f._row, f._hist = self._row, list(self._hist)
        return f

    def is_terminated(self):
        """Never."""
        return False

    def is_accepting(self):
        """Always."""
        return True


def decode_identifier(lm, ids, constraint, max_tokens: int, *, model=None, search=None,
                      heal: bytes = b"") -> tuple[str, float]:
    """Greedy decode until the first identifier is complete (a non-identifier char follows);
    ``model`` may already hold the head of ``ids`` (only the rest is run), ``search`` is a
    segment-search hook; ``heal``: the output first re-spells these bytes (token healing: the
    constraint enforces it), and the text returned starts after them."""
    from guidewire.runtime.decode import iter_decode
    from guidewire.runtime.sampling import SamplingParams
    from guidewire.runtime.streaming import decode_text

    gen = iter_decode(model if model is not None else lm.sequence(), ids, constraint, vocab=lm.vocab,
                      max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0),
                      segment_search=search)
    out: list[int] = []
    t0 = time.perf_counter()
    skip = len(heal.decode("utf-8"))
    for chunk in gen:
        out.extend(chunk)
        text = decode_text(lm.vocab, out)[skip:]
        if len(first_identifier(text)) < len(text):
            break
    gen.close()
    return decode_text(lm.vocab, out)[skip:], time.perf_counter() - t0


def domain_scorer(lm, closing):
    """``score(line, name)``: log P(``.`` + name, then any break | the cursor's line alone, before
    its dot) -- how likely ``name`` is after this receiver with no file around it (the domain
    premise of a PMI re-ranking of candidate names)."""
    import torch

    def score(line: str, name: str) -> float:
        head = line[:line.rfind(".")]
        pre = lm.tokenizer("\n" + head, add_special_tokens=False)["input_ids"]
        full = lm.tokenizer("\n" + head + "." + name, add_special_tokens=False)["input_ids"]
        k = len(pre)
        while k > 0 and full[:k] != pre[:k]:
            k -= 1
        seq = lm.sequence()
        logits = seq.prefill(full, last_only=False)
        lp = torch.log_softmax(logits.float(), dim=-1)
        total = sum(float(lp[i - 1, full[i]]) for i in range(max(k, 1), len(full)))
        width = min(lp.shape[1], closing.shape[0])
        total += float(torch.logsumexp(lp[-1, :width][closing[:width]], dim=0))
        return total

    return score


def pct(xs, q):
    """The ``q``-quantile of ``xs`` (nearest rank), or None when empty."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


ARMS = ("base", "mon", "seg", "monseg")
ARM_NAMES = {"base": "greedy, no monitor", "mon": "greedy + dereference monitor",
             "seg": "identifier search, no monitor", "monseg": "dereference monitor + identifier search"}


def summarize(rows: list[dict], args) -> dict:
    """The summary of per-point rows: per arm match / invalid share / decode time; the monitor's
    analysis and wait time per trigger, abstentions; the searches' model calls."""
    n = len(rows)
    arms = [a for a in ARMS if f"{a}_match" in rows[0]]
    arms += sorted(k[:-6] for k in rows[0] if k.startswith("sweep_") and k.endswith("_match"))
    trigger_s = [x for r in rows for x in r["analysis_s"]]
    wait_s = [x for r in rows for x in r.get("wait_s", r["analysis_s"])]
    abstain: dict[str, int] = {}
    for r in rows:
        for a in r["abstentions"]:
            abstain[a] = abstain.get(a, 0) + 1
    masked = [r for r in rows if r["triggers"] and not r["abstentions"]]
    out = {"points": n, "seed": args.seed, "context_tokens": args.context, "model": args.model,
           "deadline_s": args.deadline, "prefetch": not getattr(args, "no_prefetch", False),
           "healed": sum(bool(r.get("healed")) for r in rows)}
    for a in arms:
        out[f"match_{a}"] = sum(r[f"{a}_match"] for r in rows) / n
        out[f"invalid_{a}"] = sum(r[f"{a}_invalid"] for r in rows) / n
        out[f"decode_s_{a}_p50"] = pct([r[f"{a}_s"] for r in rows], 0.5)
        out[f"decode_s_{a}_p95"] = pct([r[f"{a}_s"] for r in rows], 0.95)
        if f"{a}_search" in rows[0]:
            calls = [r[f"{a}_search"]["expansions"] for r in rows]
            out[f"search_calls_{a}_mean"] = statistics.fmean(calls)
            out[f"search_calls_{a}_max"] = max(calls)
            out[f"search_changed_{a}"] = sum(r[f"{a}_search"]["changed"] for r in rows)
    out.update({
        "points_masked": len(masked),
        "invalid_mon_where_masked": sum(r["mon_invalid"] for r in masked) / max(1, len(masked)),
        "triggers": len(trigger_s), "abstentions": abstain,
        "analysis_ms_p50": 1e3 * pct(trigger_s, 0.5), "analysis_ms_p95": 1e3 * pct(trigger_s, 0.95),
        "analysis_ms_max": 1e3 * max(trigger_s), "analysis_ms_mean": 1e3 * statistics.fmean(trigger_s),
        "wait_ms_p50": 1e3 * pct(wait_s, 0.5), "wait_ms_p95": 1e3 * pct(wait_s, 0.95),
        "wait_ms_max": 1e3 * max(wait_s),
    })
    if "prefill_s" in rows[0]:
        out["prefill_s_p50"] = pct([r["prefill_s"] for r in rows], 0.5)
    prep = [r["prepare_s"] for r in rows if r.get("prepare_s") is not None]
    out["synced"] = bool(prep)
    if prep:  # the document's parse ahead of the trigger (--synced), not part of the analysis times
        out.update(prepare_ms_p50=1e3 * pct(prep, 0.5), prepare_ms_p95=1e3 * pct(prep, 0.95),
                   prepare_ms_max=1e3 * max(prep))
    return out


def rerun_monitored(args, which: str) -> int:
    """Rerun the monitored arm where the first run's analysis timed out (``--rerun-timeouts``) or
    where the monitor never triggered (``--rerun-untriggered``: after a trigger-rule change)."""
    from guidewire.monitors import create_monitor
    from guidewire.runtime.registry import get_model

    with open(os.path.join(args.out, "rows.jsonl")) as f:
        rows = [json.loads(x) for x in f]
    if any(r.get("healed") for r in rows):
        raise SystemExit("--rerun-* reruns the monitored arm without token healing: only for runs made with --no-heal")
    with open(os.path.join(args.out, f"devset_seed{args.seed}_n{args.points}.jsonl")) as f:
        names = {(p["file"], p["dot"]): set(p["names"]) for p in map(json.loads, f)}
    lm = get_model(args.model)
    stdlib = sysconfig.get_paths()["stdlib"]
    tag = f"{args.deadline:g}s" if which == "timeouts" else f"untriggered_{args.deadline:g}s"
    out_path = os.path.join(args.out, f"rows_rerun_{tag}.jsonl")
    redone = []
    with open(out_path, "w") as rf:
        for r in rows:
            if (which == "timeouts" and "timeout" not in r["abstentions"]) or (which == "untriggered" and r["triggers"]):
                continue
            path = os.path.join(stdlib, r["file"])
            with open(path, encoding="utf-8") as f:
                prefix = f.read().encode("utf-8")[:r["dot"] + 1].decode("utf-8")
            ids = lm.tokenizer(prefix, add_special_tokens=False)["input_ids"][-args.context:]
            mon = create_monitor("dereference", vocab=lm.vocab, prefix=prefix, path=path,
                                 deadline_s=args.deadline)
            text, secs = decode_identifier(lm, ids, mon, args.max_tokens)
            r = dict(r, mon_text=text, mon=first_identifier(text), mon_s=secs,
                     triggers=mon.stats.triggers, analysis_s=mon.stats.analysis_s,
                     abstentions=[a.reason for a in mon.stats.abstentions])
            r["mon_match"] = r["mon"] == r["attr"]
            r["mon_invalid"] = r["mon"] not in names[(r["file"], r["dot"])]
            redone.append(r)
            rf.write(json.dumps(r) + "\n")
            rf.flush()
    summary = summarize(redone, args) if redone else {"points": 0}
    with open(os.path.join(args.out, f"summary_rerun_{tag}.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    return 0


def _sweep_arm(spec: str) -> tuple[str, dict]:
    """``"8x16"`` -> ``("sweep_8x16", {top_k: 8, max_expansions: 16})``; a trailing ``p`` scores
    token paths (``closing=None``)."""
    spec = spec.strip()
    path_scoring = spec.endswith("p")
    k, e = spec.rstrip("p").split("x")
    kw = {"top_k": int(k), "max_expansions": int(e)}
    if path_scoring:
        kw["closing"] = None
    return f"sweep_{spec}", kw


def main(argv=None) -> int:
    """Build the dev set, run both arms, write JSONL rows and a summary; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=300)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--per-file", type=int, default=2)
    ap.add_argument("--context", type=int, default=1024, help="prompt tokens (the prefix's tail)")
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--deadline", type=float, default=0.5, help="monitor analysis deadline (s)")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--backend", default="jedi", choices=("jedi", "jedi-process", "lsp"),
                    help="the monitors' analysis back end")
    ap.add_argument("--candidates", type=int, default=1,
                    help="also a 'cand' arm: the search's best N finished names with their log "
                         "probability and a domain-premise score each (rows' 'candidates'), for re-ranking")
    ap.add_argument("--no-warm-up", action="store_true",
                    help="skip warm_up_backend (guidewire serve and lsp run it at start; without it the "
                         "first query also loads jedi's builtins)")
    ap.add_argument("--no-heal", action="store_true",
                    help="keep the prompt's last token (the dot) instead of healing it as complete_code does")
    ap.add_argument("--synced", action="store_true",
                    help="as an editor syncs its open document (guidewire lsp on didOpen/didChange): the "
                         "buffer before the dot was typed is parsed in the back end (prepare_buffer, "
                         "waited for) before each point, so the trigger re-parses the typed dot only")
    ap.add_argument("--no-prefetch", action="store_true",
                    help="analyse at the mask, not ahead at the trigger (the wait is then the analysis)")
    ap.add_argument("--sweep", default="",
                    help="extra monitor + search arms from the same prefill, comma-separated TOPKxEXPANSIONS "
                         "with a trailing p for token-path scoring (no closing mass), e.g. 8x16,4x8p")
    ap.add_argument("--exclude", default="",
                    help="a dev-set JSONL whose files the new dev set must not use (a disjoint tuning set)")
    ap.add_argument("--out", default="bench/results/monitors")
    ap.add_argument("--summarize", action="store_true",
                    help="only recompute summary.json from the rows.jsonl of an earlier (or cut) run")
    ap.add_argument("--rerun-timeouts", action="store_true",
                    help="rerun only the monitored arm of the points of rows.jsonl whose analysis timed "
                         "out, with --deadline; writes rows_rerun_<deadline>.jsonl and its summary")
    ap.add_argument("--rerun-untriggered", action="store_true",
                    help="rerun only the monitored arm of the points of rows.jsonl where the monitor never "
                         "triggered; writes rows_rerun_untriggered_<deadline>.jsonl and its summary")
    args = ap.parse_args(argv)
    if args.rerun_timeouts or args.rerun_untriggered:
        return rerun_monitored(args, "timeouts" if args.rerun_timeouts else "untriggered")
    if args.summarize:
        with open(os.path.join(args.out, "rows.jsonl")) as f:
            rows = [json.loads(x) for x in f]
        summary = summarize(rows, args)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        print(json.dumps(summary, indent=2))
        return 0

    from guidewire.monitors import create_monitor, prepare_buffer
    from guidewire.runtime.registry import get_model

    os.makedirs(args.out, exist_ok=True)
    devpath = os.path.join(args.out, f"devset_seed{args.seed}_n{args.points}.jsonl")
    t0 = time.perf_counter()
    if os.path.exists(devpath):
        with open(devpath) as f:
            points = [json.loads(x) for x in f]
    else:
        exclude = frozenset()
        if args.exclude:
            with open(args.exclude) as f:
                exclude = frozenset(json.loads(x)["file"] for x in f)
        points = build_devset(args.points, args.seed, args.per_file, deadline_s=30.0, exclude=exclude)
        with open(devpath, "w") as f:
            for p in points:
                f.write(json.dumps(p) + "\n")
    print(f"dev set: {len(points)} points ({time.perf_counter() - t0:.0f} s)", flush=True)

    from guidewire.ide.healing import TokenHealing, healable_tail
    from guidewire.monitors import intersect
    from guidewire.search.segment import SegmentSearch

    lm = get_model(args.model)
    stdlib = sysconfig.get_paths()["stdlib"]
    sweep = [_sweep_arm(x) for x in args.sweep.split(",") if x.strip()]
    from guidewire.runtime.streaming import decode_text
    dom_score = domain_scorer(lm, SegmentSearch(lm.vocab).closing)
    warm_s = None
    if not args.no_warm_up:
        from guidewire.monitors.factory import warm_up_backend

        warm_s = warm_up_backend(args.backend)
    rows = []
    rows_path = os.path.join(args.out, "rows.jsonl")
    with open(rows_path, "w") as rf:
        for k, p in enumerate(points):
            path = os.path.join(stdlib, p["file"])
            with open(path, encoding="utf-8") as f:
                prefix = f.read().encode("utf-8")[:p["dot"] + 1].decode("utf-8")
            ids = lm.tokenizer(prefix, add_special_tokens=False)["input_ids"][-args.context:]
            # as complete_code does: the prompt's last token is healed (its bytes, the dot, are
            # re-spelled by the output: "._" is how the model saw a private name begin), the
            # monitor (its analysis starts at the trigger, on a thread) is made when the request
            # comes, then the prompt is prefilled; every arm decodes from a copy of that prefill
            # (greedy is deterministic, so sharing it changes no output)
            prepare_s = None
            if args.synced:
                t0 = time.perf_counter()
                prepare_buffer(prefix[:-1], path=path, backend=args.backend, wait=True)
                prepare_s = time.perf_counter() - t0
            heal = b"" if args.no_heal else healable_tail(lm.vocab, ids, prefix)
            if heal:
                ids = ids[:-1]
            seen = prefix[:len(prefix) - len(heal.decode("utf-8"))]
            mon = create_monitor("dereference", vocab=lm.vocab, prefix=seen, path=path,
                                 deadline_s=args.deadline, prefetch=not args.no_prefetch,
                                 backend=args.backend, dot_follows=heal.startswith(b"."))
            mon_seg = mon.fork()  # shares the analysis (and the stats record: counted once)
            head = lm.sequence()
            t0 = time.perf_counter()
            head.prefill(ids[:-1])
            prefill_s = time.perf_counter() - t0

            def healed(c):
                return c if not heal else TokenHealing(lm.vocab, heal) if c is None \
                    else intersect(TokenHealing(lm.vocab, heal), c)

            arms = {"base": (healed(None), None), "mon": (healed(mon), None),
                    "seg": (healed(IdentifierSegment(lm.vocab, skip=len(heal))), SegmentSearch(lm.vocab)),
                    "monseg": (healed(mon_seg), SegmentSearch(lm.vocab))}
            for name, kw in sweep:
                arms[name] = (healed(mon.fork()), SegmentSearch(lm.vocab, **kw))
            cands: list = []
            if args.candidates > 1:
                def record(constraint, alts, _mon=mon, _cands=cands):
                    text = next(p for p in constraint.parts if p is not None and hasattr(p, "legal_names")).text \
                        if hasattr(constraint, "parts") else constraint.text
                    line = text[text.rfind("\n") + 1:]
                    partial = first_identifier(line[line.rfind(".") + 1:])
                    for toks, lp in alts:
                        nm = partial + first_identifier(decode_text(lm.vocab, toks))
                        _cands.append([nm, lp, dom_score(line, nm)])
                    return 0
                arms["cand"] = (healed(mon.fork()), SegmentSearch(lm.vocab, candidates=args.candidates,
                                                                  max_expansions=4 * args.candidates,
                                                                  rerank=record))
            names = set(p["names"])
            row = {"file": p["file"], "dot": p["dot"], "attr": p["attr"], "prefill_s": prefill_s,
                   "healed": heal.decode("utf-8"), "prepare_s": prepare_s}
            for arm, (constraint, search) in arms.items():
                text, secs = decode_identifier(lm, ids, constraint, args.max_tokens, model=head.fork(),
                                               search=search, heal=heal)
                row[arm] = first_identifier(text)
                row[f"{arm}_text"], row[f"{arm}_s"] = text, secs
                row[f"{arm}_match"] = row[arm] == p["attr"]
                row[f"{arm}_invalid"] = row[arm] not in names
                if search is not None:
                    row[f"{arm}_search"] = search.stats()
                if arm == "mon":
                    row.update(triggers=mon.stats.triggers, analysis_s=list(mon.stats.analysis_s),
                               wait_s=list(mon.stats.wait_s),
                               abstentions=[a.reason for a in mon.stats.abstentions])
            if cands:
                row["candidates"] = cands
            rows.append(row)
            rf.write(json.dumps(row) + "\n")
            rf.flush()
            if (k + 1) % 25 == 0:
                n = len(rows)
                print(f"{n}: match " + " / ".join(f"{a} {sum(r[a + '_match'] for r in rows) / n:.3f}"
                                                   for a in arms) + ", invalid "
                      + " / ".join(f"{a} {sum(r[a + '_invalid'] for r in rows) / n:.3f}" for a in arms),
                      flush=True)

    summary = summarize(rows, args)
    summary["warm_up_s"] = warm_s
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
