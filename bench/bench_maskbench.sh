#!/usr/bin/env bash
# Full MaskBench comparison: guidewire beside llguidance (and XGrammar when installed) on every
# schema of the MaskBench development split, SmolLM2 tokenizer, one schema at a time (timings
# are only meaningful single-threaded on an otherwise idle machine).
#
#   bench/bench_maskbench.sh [OUT_DIR] [extra maskbench args, e.g. --engines guidewire,llguidance]
#
# Writes OUT_DIR/results.jsonl, summary.json, report.md and the TTFM/TBM plots.
set -euo pipefail
DATA="${MASKBENCH_DATA:-/work/shared/data/maskbench}"
OUT="${1:-bench/results/maskbench}"
shift || true
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/.."
exec nice -n 10 python -m guidewire.maskbench "$DATA" --tokenizer smollm2 --timeout 30 --memory-mb 4096 \
    --jobs 1 --out "$OUT" "$@"
