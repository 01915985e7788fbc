#!/usr/bin/env bash
# Training throughput, cohort vs PyTorch, measured side by side in the same run.
#
# Builds bench/train_bench if needed, then runs cohort and PyTorch interleaved (cohort, torch,
# cohort, torch, ... one process each per repeat) so that both sides share the machine's noise,
# and prints the median samples/s of each side and their ratio against the goals.
#
#   bench/run_train_bench.sh [--model mlp|cnn|all] [--steps N] [--warmup W] [--batch B]
#                            [--threads T] [--repeats R] [--build-dir DIR] [--json FILE]
#                            [--denormals flush|keep] [--torch-malloc glibc|tuned] [--breakdown]
#
# --torch-malloc tuned runs PyTorch with glibc malloc told to keep freed memory
# (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_): stock PyTorch returns its multi-MB CNN
# activations to the kernel every step and faults them back in, which cuts its CNN throughput
# to a third or a quarter here; cohort's caching allocator never does. Default: glibc (as
# installed).
#
# PyTorch is Debian's python3-torch, run with /usr/bin/python3 (or $COHORT_BENCH_PYTHON). When
# that interpreter cannot import torch, the torch side is skipped with a message and only
# cohort's numbers are printed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"  # the PyTorch side's interpreter
MODEL=all STEPS=100 WARMUP=20 BATCH=64 THREADS=1 REPEATS=5
BUILD_DIR="$ROOT/build" JSON_OUT="" BREAKDOWN=() DENORMALS=flush TORCH_MALLOC=glibc
declare -A GOAL=([mlp]=1.5 [cnn]=1.0)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --json) JSON_OUT="$2"; shift 2 ;;
    --denormals) DENORMALS="$2"; shift 2 ;;
    --torch-malloc) TORCH_MALLOC="$2"; shift 2 ;;
    --breakdown) BREAKDOWN=(--breakdown); shift ;;
    -h|--help) usage 0 ;;
    *) echo "run_train_bench: unknown option '$1'" >&2; usage ;;
  esac
done
case "$MODEL" in mlp) MODELS=(mlp) ;; cnn) MODELS=(cnn) ;; all) MODELS=(mlp cnn) ;;
  *) echo "run_train_bench: --model must be mlp, cnn or all, got '$MODEL'" >&2; exit 2 ;;
esac
for v in STEPS BATCH THREADS REPEATS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "run_train_bench: --${v,,} must be >= 1" >&2; exit 2; }
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "run_train_bench: --warmup must be >= 0" >&2; exit 2; }
[[ "$DENORMALS" == flush || "$DENORMALS" == keep ]] ||
  { echo "run_train_bench: --denormals must be flush or keep" >&2; exit 2; }
TORCH_ENV=()
case "$TORCH_MALLOC" in
  glibc) ;;
  tuned) TORCH_ENV=(MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824) ;;
  *) echo "run_train_bench: --torch-malloc must be glibc or tuned" >&2; exit 2 ;;
esac

LINES="$(mktemp)" ERR="$(mktemp)" BATCHES="$(mktemp)"
trap 'rm -f "$LINES" "$ERR" "$BATCHES"' EXIT

# Build (a no-op when up to date). -j2: the benchmark machines are small and shared.
if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
  nice cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if ! nice cmake --build "$BUILD_DIR" --target train_bench -j 2 >"$ERR" 2>&1; then
  echo "run_train_bench: building train_bench failed:" >&2; cat "$ERR" >&2; exit 1
fi
BENCH="$BUILD_DIR/bin/train_bench"

# Same thread count for every runtime on both sides (torch_train.py also sets these itself).
export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
export COHORT_NUM_THREADS="$THREADS"

HAVE_TORCH=1
if ! TORCH_VERSION="$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; then
  HAVE_TORCH=0
  echo "run_train_bench: $PYTHON cannot import torch (install Debian's python3-torch);" \
    "skipping the PyTorch side, printing cohort's numbers only" >&2
fi

# Both sides train on the same batches: cohort writes them, torch_train.py reads them.
"$BENCH" --batch "$BATCH" --save-batches "$BATCHES"
ARGS=(--model "$MODEL" --steps "$STEPS" --warmup "$WARMUP" --batch "$BATCH"
  --threads "$THREADS" --repeats 1 --denormals "$DENORMALS" "${BREAKDOWN[@]}")
# run_side NAME CMD...: one repeat of one side; its JSON lines go to $LINES, a summary to stderr.
run_side() {
  local name="$1"; shift
  local out
  if ! out="$("$@" 2>"$ERR")"; then
    echo "run_train_bench: $name failed:" >&2; cat "$ERR" >&2; exit 1
  fi
  printf '%s\n' "$out" >>"$LINES"
  local pick='s/.*"model":"\([a-z]*\)".*"median_samples_per_s":\([0-9.]*\).*'
  pick+='"median_cpu_samples_per_s":\([0-9.]*\).*/\1: \2 samples\/s (per CPU-second \3)/p'
  printf '%s\n' "$out" | sed -n "$pick" | sed "s/^/  $name /" >&2
}
echo "train bench: models ${MODELS[*]}, batch $BATCH, threads $THREADS, $STEPS steps" \
  "(+$WARMUP warmup) x $REPEATS repeats, interleaved; torch ${TORCH_VERSION:-absent};" \
  "$(nproc --all) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 1; r <= REPEATS; r++)); do
  run_side cohort "$BENCH" "${ARGS[@]}"
  ((HAVE_TORCH)) && run_side torch env "${TORCH_ENV[@]}" "$PYTHON" \
    "$ROOT/bench/torch_train.py" "${ARGS[@]}" --batches "$BATCHES"
  echo "repeat $r/$REPEATS done" >&2
done
[[ -n "$JSON_OUT" ]] && cp "$LINES" "$JSON_OUT"

# median IMPL MODEL KEY: the median over repeats of that side's KEY ("" when none).
median() {
  { grep "\"impl\":\"$1\"" "$LINES" || true; } | { grep "\"model\":\"$2\"" || true; } |
    sed "s/.*\"$3\":\\([0-9.]*\\).*/\\1/" | sort -g |
    awk '{ v[NR] = $1 }
         END { if (NR) printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The verdict uses samples per CPU-second with one thread: then it equals wall-clock throughput
# on an idle machine and does not count time a side spent preempted on a busy one. With more
# threads CPU time also counts idle spinning, so the verdict uses wall time.
VERDICT=cpu
((THREADS > 1)) && VERDICT=wall
ratio() { awk -v c="$1" -v t="$2" 'BEGIN { printf "%.2f", c / t }'; }
printf '\n%-6s %14s %14s %7s %14s %14s %7s %6s  %s\n' model "cohort wall/s" "torch wall/s" \
  ratio "cohort cpu/s" "torch cpu/s" ratio goal "status ($VERDICT)"
for m in "${MODELS[@]}"; do
  cw="$(median cohort "$m" median_samples_per_s)"
  cc="$(median cohort "$m" median_cpu_samples_per_s)"
  tw="$(median torch "$m" median_samples_per_s)"
  tc="$(median torch "$m" median_cpu_samples_per_s)"
  if [[ -z "$cw" ]]; then
    echo "run_train_bench: no cohort result for $m (run $BENCH --model $m to see why)" >&2
    exit 1
  fi
  if [[ -z "$tw" ]]; then
    printf '%-6s %14s %14s %7s %14s %14s %7s %5sx  %s\n' "$m" "$cw" - - "$cc" - - \
      "${GOAL[$m]}" "torch skipped"
    continue
  fi
  rw="$(ratio "$cw" "$tw")" rc="$(ratio "$cc" "$tc")"
  r="$rc"
  [[ "$VERDICT" == wall ]] && r="$rw"
  status="$(awk -v r="$r" -v g="${GOAL[$m]}" 'BEGIN { print (r >= g ? "met" : "MISSED") }')"
  printf '%-6s %14s %14s %6sx %14s %14s %6sx %5sx  %s\n' "$m" "$cw" "$tw" "$rw" "$cc" "$tc" "$rc" \
    "${GOAL[$m]}" "$status"
done
echo "samples/s: medians over $REPEATS interleaved repeats, by wall clock and per CPU-second;" \
  "batch $BATCH, $THREADS thread(s), denormals $DENORMALS, torch malloc $TORCH_MALLOC"
echo "goals: MLP >= 1.5x PyTorch samples/s, CNN >= 1.0x"
