"""Command line of the MaskBench runner (``python -m guidewire.maskbench`` / ``guidewire maskbench``)."""

from __future__ import annotations

import argparse
import os
import sys

from ..core.heap import RESERVE_MB
from .data import DEFAULT_SERIALIZATIONS, SERIALIZATIONS, UsageError, resolve_inputs

EXAMPLE = """\
data: MaskBench from JSONSchemaBench (Geng et al., 2025; github.com/guidance-ai/jsonschemabench), one JSON
file per schema with its "schema" and the "tests" instances. Paths are relative to the current directory;
in this project's layout the data sits beside the repository, at ../shared/data/maskbench.

examples (from the repository root):
  guidewire bench maskbench '../shared/data/maskbench/Glaive*.json' --limit 20 --out maskbench-out
  guidewire bench maskbench ../shared/data/maskbench --sample 200 --fresh-worker --out maskbench-cold
  guidewire bench maskbench --list files.txt --engines guidewire,llguidance --tokenizer gemma3
  guidewire bench maskbench --merge out-guidewire out-peers --out out-all
"""


def build_parser(prog: str = "guidewire bench maskbench") -> argparse.ArgumentParser:
    """The argparse parser of the runner (``prog`` names the command in usage lines)."""
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLE,
        description="Check and time JSON-Schema token masks on MaskBench files, guidewire beside its peers.")
    p.add_argument("files", nargs="*", help="MaskBench .json files, directories or globs")
    p.add_argument("--list", metavar="FILE", help="file with one schema path per line")
    p.add_argument("--tokenizer", default="smollm2", help="smollm2, gemma3 or a tokenizer directory (default smollm2)")
    p.add_argument("--engines", help="comma-separated: guidewire,llguidance,xgrammar (default: guidewire plus "
                                     "the installed peers)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per schema and engine (default 30)")
    p.add_argument("--memory-mb", type=int, default=4096, help="address-space cap per worker, MiB; 0 = none "
                                                               "(default 4096)")
    p.add_argument("--limit", type=int, help="only the first N schema files")
    p.add_argument("--sample", type=int, help="a seeded random sample of N of the files (after --limit)")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    p.add_argument("--fresh-worker", action="store_true",
                   help="cold-process mode: a new worker process for every schema, so no process-level "
                        "cache (fragment store, per-vocabulary tables) carries over; TTFM is the cold one")
    p.add_argument("--no-gc-freeze", action="store_true",
                   help="keep the worker's start-up heap in CPython's full collections (by default it is "
                        "frozen once the engine is built, as guidewire serve does after loading its model, and "
                        "after each schema its garbage is collected and the survivors frozen, outside the timings: "
                        "see guidewire.core.collector)")
    p.add_argument("--no-keep-heap", action="store_true",
                   help="leave glibc's malloc thresholds as they are in the workers (by default every engine's "
                        "worker keeps freed memory mapped, as guidewire serve does: see guidewire.core.heap)")
    p.add_argument("--heap-reserve-mb", type=int, default=None,
                   help="free memory each worker keeps faulted in at the top of its heap, topped up between "
                        f"schemas outside their timings (default {RESERVE_MB}; 0: none; needs the kept heap)")
    p.add_argument("--jobs", type=int, default=1, help="schemas in flight at once (default 1; timings are only "
                                                       "meaningful with 1)")
    p.add_argument("--serializations", default=",".join(DEFAULT_SERIALIZATIONS),
                   help=f"how instances are printed, comma-separated from {', '.join(SERIALIZATIONS)} "
                        f"(default {','.join(DEFAULT_SERIALIZATIONS)})")
    p.add_argument("--out", default="maskbench-out", help="output directory (default ./maskbench-out)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--merge", nargs="+", metavar="DIR", help="run nothing: merge earlier output directories "
                                                             "(e.g. one per engine) into --out")
    return p


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UsageError(f"empty list {value!r}")
    return items


def config_from_args(args: argparse.Namespace):
    """A validated :class:`~guidewire.maskbench.runner.RunConfig` from parsed arguments."""
    from .runner import RunConfig

    if not args.files and not args.list:
        raise UsageError("give schema files, directories or globs, or --list FILE")
    cfg = RunConfig(files=resolve_inputs(args.files, args.list), out=args.out, tokenizer=args.tokenizer,
                    engines=_split(args.engines), timeout=args.timeout, memory_mb=args.memory_mb,
                    limit=args.limit, jobs=args.jobs, serializations=tuple(_split(args.serializations)),
                    progress=not args.no_progress, plots=not args.no_plots, fresh_workers=args.fresh_worker,
                    freeze_heap=not args.no_gc_freeze, keep_heap=not args.no_keep_heap,
                    heap_reserve_mb=args.heap_reserve_mb,
                    sample=args.sample, seed=args.seed)
    cfg.validate()
    return cfg


def main(argv: list[str] | None = None, prog: str = "guidewire bench maskbench") -> int:
    """Run the MaskBench comparison; returns the process exit code (0 ok, 2 usage error)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser(prog).parse_args(argv)
    from .runner import run
    from .worker import WorkerStartError

    try:
        if args.merge:
            from .report import merge_runs

            missing = [d for d in args.merge if not os.path.exists(os.path.join(d, "summary.json"))]
            if missing:
                raise UsageError(f"--merge: no summary.json in {', '.join(missing)}")
            summary = merge_runs(args.merge, args.out, plots=not args.no_plots)
        else:
            summary = run(config_from_args(args))
    except UsageError as exc:
        print(f"maskbench: error: {exc}", file=sys.stderr)
        return 2
    except WorkerStartError as exc:
        print(f"maskbench: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("maskbench: interrupted", file=sys.stderr)
        return 130
    for engine, s in summary["engines"].items():
        print(f"{engine:>12}: {s['passing']}/{s['schemas']} passing, compile_error {s['compile_error']}, "
              f"validation_error {s['validation_error']}, invalidation_error {s['invalidation_error']}, "
              f"timeout {s['timeout']}; TTFM p50 {s['ttfm_ms']['p50']} ms, TBM p50 {s['tbm_us']['p50']} µs")
    print(f"results in {args.out}/ (report.md, summary.json, results.jsonl)")
    return 0
