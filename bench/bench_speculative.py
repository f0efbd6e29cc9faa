"""Speculative constrained decoding vs plain constrained decoding, same model, same run.

Workloads (``bench/spec_workloads.py``): JSON extraction (a paragraph plus a schema whose values
appear in it) and schema-instance generation (MaskBench schemas). For each case the plain decoder
(:func:`guidewire.runtime.decode`, lossless single-allowed-token shortcut only) and the speculative
decoder with each drafter alone and with all of them chained run on the same prompt, model and
sampling. Reported per workload and mode: emitted tokens per target forward, wall-clock tokens/s,
the speed ratio against plain (aggregate and per-case percentiles), every drafter's proposed and
accepted tokens, and -- greedy only -- how many outputs differ from plain decoding (must be 0).
Each mode gets its own freshly compiled grammar (no mode reuses masks another mode built) and the
order of the modes rotates from case to case, so no mode always runs first on a cold process-level
fragment store.

    python bench/bench_speculative.py [--cases 36] [--gen-cases 12] [--max-tokens 160]
        [--modes plain,forced,lookup,sam,all] [--threads 1] [--out FILE.md] [--jsonl FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

DEFAULT_DATA = os.environ.get("MASKBENCH_DATA") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "maskbench"))
MODES = {"forced": "forced", "copy": "copy", "lookup": "lookup", "sam": "sam", "all": "forced,copy,lookup,sam"}


def _pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    i = min(len(values) - 1, max(0, int(round(q / 100 * (len(values) - 1)))))
    return values[i]


def run_case(lm, grammar, prompt_ids, mode, args, sampling):
    """One generation; returns (result, seconds)."""
    from guidewire.runtime.decode import decode
    from guidewire.runtime.drafters import make_drafter
    from guidewire.runtime.speculative import speculative_decode

    model = lm.sequence()
    matcher = grammar.matcher()
    t0 = time.perf_counter()
    if mode == "plain":
        r = decode(model, prompt_ids, matcher, vocab=lm.vocab, max_tokens=args.max_tokens, sampling=sampling)
    else:
        drafter = make_drafter(MODES[mode], tokenizer=lm.tokenizer, vocab=lm.vocab)
        r = speculative_decode(model, prompt_ids, matcher, vocab=lm.vocab, drafter=drafter,
                               max_tokens=args.max_tokens, sampling=sampling, max_draft=args.max_draft)
    return r, time.perf_counter() - t0


def bench_workload(name, cases, lm, args, log):
    """Run every mode on every case; returns the Markdown rows and per-mode aggregates."""
    from guidewire.grammar import compile_json_schema
    from guidewire.runtime.sampling import SamplingParams

    modes = args.modes.split(",")
    agg = {m: {"tokens": 0, "forwards": 0, "seconds": 0.0, "ratios": [], "mismatch": 0, "drafters": {}}
           for m in modes}
    for ci, case in enumerate(cases):
        ids = lm.encode_prompt(case["prompt"])
        sampling = SamplingParams(temperature=args.temperature, seed=args.seed)
        done = {}
        shift = ci % len(modes)
        for m in modes[shift:] + modes[:shift]:
            grammar = compile_json_schema(case["schema"], lm.vocab, lenient=True)  # fresh per mode: no shared masks
            r, sec = run_case(lm, grammar, ids, m, args, sampling)
            done[m] = (r, sec)
            forwards = r.speculation.forwards if r.speculation is not None else r.usage.model_calls
            a = agg[m]
            a["tokens"] += len(r.token_ids)
            a["forwards"] += forwards
            a["seconds"] += sec
            if r.speculation is not None:
                for src, st in r.speculation.drafters.items():
                    d = a["drafters"].setdefault(src, [0, 0])
                    d[0] += st.proposed
                    d[1] += st.accepted
            rec = {"workload": name, "case": case["name"], "mode": m, "tokens": len(r.token_ids),
                   "forwards": forwards, "seconds": round(sec, 3), "finish": r.finish_reason,
                   "text": r.text}
            if log is not None:
                log.write(json.dumps(rec) + "\n")
                log.flush()
            print(f"[{name} {ci + 1}/{len(cases)}] {m:6s} {len(r.token_ids):4d} tok {forwards:4d} fwd "
                  f"{len(r.token_ids) / max(sec, 1e-9):6.1f} tok/s {r.finish_reason}", file=sys.stderr)
        plain = done.get("plain")
        for m, (r, sec) in done.items():
            if m == "plain" or plain is None:
                continue
            agg[m]["ratios"].append((len(r.token_ids) / sec) / max(len(plain[0].token_ids) / plain[1], 1e-9))
            if args.temperature == 0 and r.token_ids != plain[0].token_ids:
                agg[m]["mismatch"] += 1
    base = agg.get("plain")
    rows = []
    for m in modes:
        a = agg[m]
        tps = a["tokens"] / max(a["seconds"], 1e-9)
        ratio = tps / (base["tokens"] / max(base["seconds"], 1e-9)) if base else float("nan")
        drafters = "; ".join(f"{k}: {v[1]}/{v[0]}" for k, v in sorted(a["drafters"].items())) or "-"
        rows.append(f"| {name} | {m} | {a['tokens']} | {a['forwards']} | {a['tokens'] / max(a['forwards'], 1):.2f} "
                    f"| {tps:.1f} | {ratio:.2f}x | {_pct(a['ratios'], 10):.2f} / {_pct(a['ratios'], 50):.2f} / "
                    f"{_pct(a['ratios'], 90):.2f} | {drafters} | "
                    f"{a['mismatch'] if args.temperature == 0 and m != 'plain' else '-'} |")
    return rows


def main(argv=None) -> int:
    """Run the benchmark and print (or write) the Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--cases", type=int, default=36, help="extraction cases (0 = skip)")
    ap.add_argument("--gen-cases", type=int, default=12, help="generation cases (0 = skip)")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--max-draft", type=int, default=8)
    ap.add_argument("--modes", default="plain,forced,copy,lookup,sam,all")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="write the Markdown table here too")
    ap.add_argument("--jsonl", default=None, help="one JSON line per generation")
    args = ap.parse_args(argv)

    from guidewire.api import get_model
    from guidewire.runtime.loading import set_num_threads
    from spec_workloads import extraction_cases, generation_cases

    set_num_threads(args.threads)
    lm = get_model(args.model)
    log = open(args.jsonl, "w") if args.jsonl else None
    header = ["| workload | mode | tokens | forwards | tokens/forward | tok/s | speed vs plain | "
              "per-case ratio p10 / p50 / p90 | drafter accepted/proposed | greedy mismatches |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    if args.cases:
        rows += bench_workload("extraction", extraction_cases(args.cases), lm, args, log)
    if args.gen_cases:
        rows += bench_workload("generation", generation_cases(args.data, args.gen_cases), lm, args, log)
    table = "\n".join(header + rows)
    print(f"model {args.model}, {args.threads} thread(s), temperature {args.temperature}, "
          f"max_tokens {args.max_tokens}, max_draft {args.max_draft}\n")
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    if log is not None:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
