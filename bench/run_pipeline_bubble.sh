#!/usr/bin/env bash
# PipelineEngine's bubble against the formula (p - 1) / (m + p - 1) for GPipe and 1F1B (and
# (p - 1) / (v m + p - 1) for interleaved 1F1B with v = 2 chunks per rank), p = 2, 4 and
# m = 4, 8, and the peak activation memory per stage of GPipe against 1F1B at
# m = 8 (docs/pipeline.md). Ranks run as threads of one process (bench/pipeline_bubble.cc says
# what is measured). No peer: the formula is the reference, and the goal is a measured bubble
# within 10% (relative) of it; the script prints each ratio and fails when one is outside.
#
#   bench/run_pipeline_bubble.sh [--build-dir DIR] [-- pipeline_bubble options]
#
# pipeline_bubble options: --steps S (9) --delay-ms F (20: forward F ms, backward 2F ms)
# --width W (1024) --rows R (64). A run takes ~60 s.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

cmake --build "$BUILD" --target pipeline_bubble >/dev/null
echo "machine: $(lscpu | grep 'Model name' | sed 's/Model name: *//'), $(nproc) cores"
OUT="$("$BUILD/bin/pipeline_bubble" "$@")"
echo "$OUT"
# The ratio column (6) of the bubble table: within [0.9, 1.1].
echo "$OUT" | awk -F, 'NR > 1 && NF == 8 && $1 != "" {
  if ($6 < 0.9 || $6 > 1.1) { printf "outside 10%%: %s\n", $0; bad = 1 } }
  END { exit bad }'
