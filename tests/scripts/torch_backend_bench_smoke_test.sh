#!/usr/bin/env bash
# bench/run_torch_backend_bench.sh runs to its end with tiny sizes (a few DDP steps of the MLP on
# synthetic data, a 4-16 KiB allreduce sweep) and prints both tables with a number on both sides:
# the full bench is run by hand (docs/python.md, "Performance"); this keeps the script, its
# workers and its report from rotting in between. Registered only where the torch plugin is
# built. Goals are not checked here (a few steps on a loaded machine say nothing about them).
#   torch_backend_bench_smoke_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
ROOT="$1" BUILD="$2"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! timeout 120 "$ROOT/bench/run_torch_backend_bench.sh" --no-build --build-dir "$BUILD" \
    --repeats 1 --model mlp --mlp-steps 3 --warmup 1 --synthetic --sizes 4K:16K --iters 3 \
    --ar-warmup 1 >"$LOG" 2>&1; then
  echo "FAIL: bench/run_torch_backend_bench.sh exited non-zero:"; cat "$LOG"; exit 1
fi
# A DDP row with both sides measured, and allreduce rows with all four tools.
grep -Eq '^mlp +[0-9,]+ +[0-9,]+ +[0-9.]+ ' "$LOG" || { echo "FAIL: no mlp row"; cat "$LOG"; exit 1; }
grep -Eq '^ +4K( +[0-9.]+){4} ' "$LOG" || { echo "FAIL: no 4K allreduce row"; cat "$LOG"; exit 1; }
grep -q '^torch layer per call below 1 MiB' "$LOG" || { echo "FAIL: no torch-layer line"; cat "$LOG"; exit 1; }
grep -q '^# machine: .*memcpy [0-9.]* GB/s' "$LOG" || { echo "FAIL: machine not named"; cat "$LOG"; exit 1; }
echo "torch_backend_bench_smoke_test: both tables printed"
