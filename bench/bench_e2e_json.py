"""End-to-end JSON generation over maskbench schemas: valid / cut by length / invalid / errors.

For the first ``--per-family`` (default 20) schemas, sorted by file name, of each family
(Glaive*, Github_easy*, Kubernetes*) under ``--data``, prompts "Produce an example JSON instance
for this schema: <schema json>" at temperature 0 and at 0.8 (seeded), and classifies every
outcome with an independent check (json.loads + jsonschema with a FormatChecker):

* ``valid``   -- finished, parses and validates;
* ``length``  -- max_tokens cut an incomplete value (reported as IncompleteOutputError, never returned);
* ``invalid`` -- finished but fails the independent check (must be 0: such a result is never
  presented as valid; generate_json raises OutputValidationError);
* ``compile_error`` / ``error`` -- the schema could not be compiled / generation failed.

The schema text in the prompt is minified and cut at ``--prompt-chars`` (default 6000) so that
prompt plus output fit SmolLM2's 8,192-token window (some Kubernetes schemas are 160 KB, about
50k tokens); the *constraint* is always the whole schema. A prompt that still does not fit is a
``ContextLengthError`` (counted as ``error``).

    python bench/bench_e2e_json.py [--max-tokens 256] [--per-family 20] [--limit N] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

FAMILIES = ("Glaive", "Github_easy", "Kubernetes")
DEFAULT_DATA = os.environ.get("MASKBENCH_DATA") or os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "maskbench"))


def schema_files(data: str, per_family: int) -> list[str]:
    """The first ``per_family`` files of each family, sorted by name."""
    out = []
    for fam in FAMILIES:
        out += sorted(glob.glob(os.path.join(data, fam + "*.json")))[:per_family]
    return out


def schema_text(schema, limit: int) -> str:
    """The schema as minified JSON, cut at ``limit`` characters with a marker."""
    text = json.dumps(schema, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + " ... (schema truncated)"


def main(argv=None) -> int:
    """Run the benchmark; exit status 1 if any invalid output was produced."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--per-family", type=int, default=20)
    ap.add_argument("--limit", type=int, default=None, help="only the first N selected schemas")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--prompt-chars", type=int, default=6000,
                    help="cut the schema text in the prompt at this many characters")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--temperatures", default="0,0.8")
    ap.add_argument("--out", default=None, help="write one JSON line per generation")
    ap.add_argument("--schema-options", default=None,
                    help="JSON object of compile_json_schema options replacing the generation defaults "
                         "(e.g. '{\"whitespace\": \"compact\"}'); default: api.GENERATION_SCHEMA_OPTIONS")
    args = ap.parse_args(argv)

    import torch

    from guidewire import api
    from guidewire.core.errors import GuidewireError
    from guidewire.runtime import IncompleteOutputError, OutputValidationError, load_model

    torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    files = schema_files(args.data, args.per_family)[: args.limit]
    options = (json.loads(args.schema_options) if args.schema_options is not None
               else dict(api.GENERATION_SCHEMA_OPTIONS))
    print(f"schema options: {options}", flush=True)
    temps = [float(t) for t in args.temperatures.split(",")]
    counts = {t: collections.Counter() for t in temps}
    sink = open(args.out, "w") if args.out else None
    t_start = time.perf_counter()
    for i, path in enumerate(files):
        name = os.path.basename(path)
        with open(path) as f:
            schema = json.load(f)["schema"]
        try:
            grammar = api.get_grammar("json_schema", schema, lm.vocab, **options)
        except GuidewireError as exc:
            for t in temps:
                counts[t]["compile_error"] += 1
            print(f"[{i + 1}/{len(files)}] {name}: compile error: {exc}", flush=True)
            continue
        prompt = "Produce an example JSON instance for this schema: " + schema_text(schema, args.prompt_chars)
        for t in temps:
            t0 = time.perf_counter()
            result = None
            try:
                steps = api._steps(lm, prompt, grammar.matcher(), chat=True, system=None,
                                   max_tokens=args.max_tokens,
                                   sampling=api._sampling(t, 1.0, 0, 0.0, args.seed if t > 0 else None))
                result = api._run(steps)
                api.validate_json_output(schema, result)  # independent parse + jsonschema check
                outcome = "valid"
            except IncompleteOutputError as exc:
                outcome, result = "length", exc.result
            except OutputValidationError as exc:
                outcome, result = "invalid", exc.result
                print(f"    INVALID ({exc})", flush=True)
            except GuidewireError as exc:
                outcome = "error"
                print(f"    error: {exc}", flush=True)
            counts[t][outcome] += 1
            dt = time.perf_counter() - t0
            ntok = result.usage.completion_tokens if result is not None else 0
            print(f"[{i + 1}/{len(files)}] {name} T={t}: {outcome} ({ntok} tokens, {dt:.1f}s)", flush=True)
            if sink:
                sink.write(json.dumps({"file": name, "temperature": t, "outcome": outcome, "tokens": ntok,
                                       "seconds": round(dt, 2),
                                       "text": result.text if result is not None else None}) + "\n")
                sink.flush()
    if sink:
        sink.close()
    print(f"\n{len(files)} schemas, max_tokens={args.max_tokens}, options {options}, {time.perf_counter() - t_start:.0f}s")
    keys = ("valid", "length", "invalid", "compile_error", "error")
    print("temperature " + " ".join(f"{k:>13}" for k in keys))
    for t in temps:
        print(f"{t:<11} " + " ".join(f"{counts[t][k]:>13}" for k in keys))
    return 1 if any(counts[t]["invalid"] for t in temps) else 0


if __name__ == "__main__":
    sys.exit(main())
