#!/usr/bin/env bash
# bench/run_torch_powersgd_bench.sh runs to its end with a few steps (both namespaces, the
# 100 Mbit/s link, torch's powerSGD_hook on gloo and cohort.torch.hooks.powersgd on "cohort") and
# prints its table with a number in every row: the full bench is run by hand (docs/python.md,
# "Performance"); this keeps the script and its worker from rotting in between, and catches a
# return of the deadlock of torch's hook on "cohort" (a callback waiting for the next allreduce).
# Skipped (77) without root: ip netns and tc need it.
#   torch_powersgd_bench_smoke_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
ROOT="$1" BUILD="$2"
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (ip netns, tc)"; exit 77; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "skipped: no ip/tc"; exit 77; }
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! timeout 120 "$ROOT/bench/run_torch_powersgd_bench.sh" --no-build --build-dir "$BUILD" \
    --seeds 1 --max-steps 12 --run-timeout 40 >"$LOG" 2>&1; then
  echo "FAIL: bench/run_torch_powersgd_bench.sh exited non-zero:"; cat "$LOG"; exit 1
fi
for row in torch-hook/gloo torch-hook/cohort cohort-hook/cohort; do
  grep -Eq "^$row +[0-9]+ +[0-9.]+% +1 " "$LOG" || { echo "FAIL: no $row row"; cat "$LOG"; exit 1; }
done
grep -q '^# machine: .*memcpy [0-9.]* GB/s' "$LOG" || { echo "FAIL: machine not named"; cat "$LOG"; exit 1; }
echo "torch_powersgd_bench_smoke_test: all three rows measured"
