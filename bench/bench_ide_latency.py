"""Latency of the IDE path: time for 32 new tokens after ~1k tokens of context, SmolLM2 on the CPU.

Cursor positions are cut from Python standard-library files (at the start of an indented line
inside a function, at least ``--context`` tokens into the file); each completion is
``complete_code(prefix, suffix=rest of the file, max_tokens=32, stop=[], max_prompt_tokens=context)``
so exactly the prompt budget is prefilled. Every monitored run asks its own questions (the back
end's kept answers are dropped first) and, in-process, meets its buffer cold (parso's cache of it
is dropped; a child process keeps its own), except with ``--synced``: one more monitored run whose
document is parsed in the back end before the request, as ``guidewire lsp`` does for an open
document. Peers on the same prompt ids: guidewire's decode loop alone
(no completion layer, no constraint) and transformers' ``generate``. Everything runs interleaved on the same cursor
positions in one process (paired), after one warm-up call (reported apart as the cold call).

    PYTHONPATH=. HF_HUB_OFFLINE=1 GUIDEWIRE_NUM_THREADS=1 python bench/bench_ide_latency.py \\
        --samples 20 [--monitors dereference] [--out bench/results/ide_latency.json]
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np


def cursor_points(n: int, context: int, seed: int, tokenizer) -> list[tuple[str, str, str]]:
    """``(file, prefix, suffix)`` cut at the start of an indented line after ``context`` tokens."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in lib.glob("*.py") if 20_000 < p.stat().st_size < 200_000)
    rng = random.Random(seed)
    rng.shuffle(files)
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        starts = np.cumsum([0] + [len(x) for x in lines])
        cands = [i for i, x in enumerate(lines) if x.startswith("        ") and x.strip()
                 and not x.strip().startswith(("#", '"', "'"))]
        ends = [e for _, e in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
        rng.shuffle(cands)
        for i in cands:
            cut = int(starts[i]) + (len(lines[i]) - len(lines[i].lstrip(" ")))
            if bisect.bisect_right(ends, cut) >= context + 64:
                out.append((f.name, text[:cut], text[cut:]))
                break
        if len(out) == n:
            break
    return out


def _peer(lm, ids, n: int, kind: str) -> dict:
    """The same prompt decoded without guidewire's completion layer: its own decode loop
    (no constraint, EOS ignored) or transformers' ``generate`` (greedy, exactly ``n`` tokens)."""
    import torch

    from guidewire.runtime.decode import iter_decode

    t0 = time.monotonic()
    first = None
    if kind == "loop":
        count = 0
        for _chunk in iter_decode(lm.sequence(), ids, None, vocab=lm.vocab, max_tokens=n, ignore_eos=True):
            first = first or time.monotonic()
            count += 1
    else:
        with torch.inference_mode():
            out = lm.module.generate(torch.tensor([ids]), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                     pad_token_id=min(lm.vocab.eos_ids))
        count = out.shape[1] - len(ids)
    end = time.monotonic()
    first = first or end
    return {"total_s": end - t0, "ttft_s": first - t0, "decode_s": end - first, "prompt_tokens": len(ids),
            "tokens": count, "triggers": 0, "abstentions": 0, "analysis_s": 0.0, "finish": "length"}


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--monitors", default="", help="comma-separated monitor names for the monitored run")
    ap.add_argument("--backend", default="jedi", choices=("jedi", "jedi-process", "lsp"),
                    help="the monitors' analysis back end")
    ap.add_argument("--synced", action="store_true",
                    help="add a monitored run whose document (prefix + suffix) is parsed in the back end "
                         "before the request, as guidewire lsp does on didOpen/didChange (in-process jedi only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.synced and (args.backend != "jedi" or not args.monitors):
        ap.error("--synced needs --monitors and the in-process back end (--backend jedi)")

    from guidewire import complete_code
    from guidewire.ide.fim import build_fim_prompt
    from parso.cache import parser_cache

    from guidewire.monitors import make_backend, prepare_buffer
    from guidewire.monitors.analysis import buffer_path
    from guidewire.runtime.registry import get_model

    t = time.monotonic()
    lm = get_model()
    load_s = time.monotonic() - t
    points = cursor_points(args.samples, args.context, args.seed, lm.tokenizer)
    configs = {"no monitors": ((), None)}
    if args.monitors:
        mons = tuple(m for m in args.monitors.split(",") if m)
        configs[f"monitors={args.monitors}"] = (mons, None)   # segment search on (the default at T=0)
        configs[f"monitors={args.monitors}, no segment search"] = (mons, False)
        if args.synced:
            configs[f"monitors={args.monitors}, synced"] = (mons, None, True)
    kw = dict(max_tokens=args.new_tokens, stop=[], max_prompt_tokens=args.context, temperature=0.0)
    t = time.monotonic()
    cold = complete_code(points[0][1], suffix=points[0][2], monitors=(), **kw)
    cold_s = time.monotonic() - t
    rows = {name: [] for name in configs}
    rows["peer: decode loop only"] = []
    rows["peer: HF generate"] = []
    for k, (fname, prefix, suffix) in enumerate(points):
        ids = build_fim_prompt(lm.tokenizer, prefix, suffix, budget=args.context).ids
        runs = [(name, "gw", conf) for name, conf in configs.items()]
        runs += [("peer: decode loop only", "loop", ids), ("peer: HF generate", "hf", ids)]
        runs = runs[k % len(runs):] + runs[:k % len(runs)]   # rotate the order from point to point
        for name, kind, arg in runs:
            if kind == "gw":
                prepare_s = None
                if len(arg) > 2:  # the editor's open document, parsed ahead (guidewire lsp's didOpen/didChange)
                    t = time.perf_counter()
                    prepare_buffer(prefix + suffix, path=fname, backend=args.backend, wait=True)
                    prepare_s = time.perf_counter() - t
                elif arg[0]:  # every other monitored run meets its buffer cold, whatever ran before it
                    for cache in parser_cache.values():
                        cache.pop(Path(buffer_path(fname)), None)
                if arg[0]:  # and asks its own questions: no answers left by another run of this point
                    forget = getattr(make_backend(args.backend), "forget_answers", None)
                    if forget is not None:
                        forget()
                out = complete_code(prefix, suffix=suffix, monitors=arg[0], segment_search=arg[1], path=fname,
                                    monitor_backend=args.backend, **kw)
                s = out.stats
                each = lambda key: [x for m in s.monitors.values() for x in m.get(key, [])]  # noqa: E731
                rows[name].append({"file": fname, "total_s": s.total_s, "ttft_s": s.ttft_s, "decode_s": s.decode_s,
                                   "prompt_tokens": s.prompt_tokens, "tokens": s.completion_tokens,
                                   "triggers": s.triggers, "abstentions": s.abstentions,
                                   "analysis_s": s.analysis_s, "wait_s": s.wait_s,
                                   "analysis_each_s": each("analysis_each_s"), "wait_each_s": each("wait_each_s"),
                                   "segment_search": s.segment_search, "text": out.text,
                                   "finish": out.finish_reason, "prepare_s": prepare_s})
            else:
                rows[name].append(_peer(lm, arg, args.new_tokens, kind) | {"file": fname})
    report = {"model": lm.name, "context": args.context, "new_tokens": args.new_tokens, "samples": len(points),
              "model_load_s": load_s, "cold_first_call_s": cold_s, "cold_tokens": cold.stats.completion_tokens,
              "configs": {}}
    for name, rs in rows.items():
        tot = [r["total_s"] for r in rs]
        per_tok = [r["decode_s"] / max(r["tokens"] - 1, 1) for r in rs]
        report["configs"][name] = {
            "p50_s": pct(tot, 50), "p95_s": pct(tot, 95), "max_s": max(tot),
            "ttft_p50_s": pct([r["ttft_s"] for r in rs], 50), "ttft_p95_s": pct([r["ttft_s"] for r in rs], 95),
            "decode_ms_per_token_p50": 1e3 * pct(per_tok, 50),
            "prompt_tokens_p50": pct([r["prompt_tokens"] for r in rs], 50),
            "tokens_min": min(r["tokens"] for r in rs), "full_32": sum(r["tokens"] == args.new_tokens for r in rs),
            "triggers": sum(r["triggers"] for r in rs), "abstentions": sum(r["abstentions"] for r in rs),
            "analysis_s": sum(r["analysis_s"] for r in rs),
            "wait_s": sum(r.get("wait_s", 0.0) for r in rs),
            "search_calls": sum((r.get("segment_search") or {}).get("expansions", 0) for r in rs),
            "rows": rs}
        prep = [r["prepare_s"] for r in rs if r.get("prepare_s") is not None]
        if prep:  # not part of the request: the editor's document sync before it
            report["configs"][name].update(prepare_ms_p50=1e3 * pct(prep, 50), prepare_ms_max=1e3 * max(prep))
        each_a = [x for r in rs for x in r.get("analysis_each_s", [])]
        each_w = [x for r in rs for x in r.get("wait_each_s", [])]
        if each_a:
            report["configs"][name].update(
                analysis_ms_p50=1e3 * pct(each_a, 50), analysis_ms_p95=1e3 * pct(each_a, 95),
                analysis_ms_max=1e3 * max(each_a), wait_ms_p50=1e3 * pct(each_w, 50),
                wait_ms_p95=1e3 * pct(each_w, 95), wait_ms_max=1e3 * max(each_w))
    report["paired_ratios"] = {}
    for a in rows:
        if a == "no monitors":
            continue
        ratios = [x["total_s"] / y["total_s"] for x, y in zip(rows["no monitors"], rows[a])] if "peer" in a else \
            [y["total_s"] / x["total_s"] for x, y in zip(rows["no monitors"], rows[a])]
        label = f"no monitors / {a}" if "peer" in a else f"{a} / no monitors"
        report["paired_ratios"][label] = {"p50": pct(ratios, 50), "p95": pct(ratios, 95), "max": max(ratios)}
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    summary = {k: {m: v for m, v in c.items() if m != "rows"} for k, c in report["configs"].items()}
    print(json.dumps({**{k: v for k, v in report.items() if k != "configs"}, "configs": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
