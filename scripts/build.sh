#!/usr/bin/env bash
# Configures and builds cohort (Release, Ninja) into ./build. Safe to re-run: incremental.
# Usage: scripts/build.sh [--target T]... [cmake configure options, e.g. -DCOHORT_PCH=OFF]
# Without --target everything is built (library, CLI, examples, tests, benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
configure=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) configure+=("$1"); shift ;;
  esac
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${configure[@]}" >/dev/null
cmake --build build -j "$(nproc)" "${targets[@]}"
