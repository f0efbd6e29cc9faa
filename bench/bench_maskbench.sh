#!/usr/bin/env bash
# Full MaskBench comparison: guidewire beside llguidance (and XGrammar when installed) on every
# schema of the MaskBench development split, SmolLM2 tokenizer, one schema at a time (timings
# are only meaningful single-threaded on an otherwise idle machine).
#
#   bench/bench_maskbench.sh [OUT_DIR] [extra maskbench args, e.g. --engines guidewire,llguidance]
#   bench/bench_maskbench.sh bench/results/maskbench_cold --sample 200 --fresh-worker   # cold-process TTFM
#
# The data directory is $MASKBENCH_DATA, else shared/data/maskbench beside the repository root.
# Writes OUT_DIR/results.jsonl, summary.json, report.md and the TTFM/TBM plots.
set -euo pipefail
OUT="${1:-bench/results/maskbench}"
shift || true
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/.."
DATA="${MASKBENCH_DATA:-../shared/data/maskbench}"
exec nice -n 10 python -m guidewire.maskbench "$DATA" --tokenizer smollm2 --timeout 30 --memory-mb 4096 \
    --jobs 1 --out "$OUT" "$@"
