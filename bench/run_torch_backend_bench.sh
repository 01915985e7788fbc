#!/usr/bin/env bash
# torch.distributed backend "cohort" against "gloo" (issue 34, docs/python.md "Performance"),
# side by side in one run, 2 ranks on one host:
#
#   ddp        PyTorch DDP training of the MLP and the CNN (bench/torch_models.py) with
#              bench/torch_backend_ddp.py, 1 thread per rank, batch 64 per rank, real
#              Fashion-MNIST; the same script and seed with backend="cohort" and "gloo".
#              Median samples/s (both ranks together) over --repeats. Goals: cohort >= 2x gloo
#              on the MLP, >= 1x on the CNN.
#   allreduce  dist.all_reduce float32 sum through the plugin and through gloo
#              (bench/torch_backend_allreduce.py), and cohort's own `cohort bench collectives`
#              at the same sizes, with its default shared-arena buffers ("native") and with
#              ordinary heap buffers ("native-heap": what a torch tensor is). Median time per
#              call and busbw. Goals: gloo/plugin >= 20x at 4 KiB, >= 5x at 1-16 MiB; from
#              1 MiB up, plugin busbw within 1.5x of native; below 1 MiB the torch layer's
#              per-call cost (plugin minus native time) is printed.
#
#   bench/run_torch_backend_bench.sh [--part ddp|allreduce|all] [--repeats 3]
#       [--mlp-steps 600] [--cnn-steps 150] [--warmup 20] [--model mlp|cnn|all] [--synthetic]
#       [--sizes 4K:64M] [--step 4] [--iters 20] [--ar-warmup 5] [--build-dir DIR] [--no-build]
#       [--raw DIR] [--bind auto|none] [--load]
#
# Every run of every side is its own job under `cohort run -n 2` (which sets torchrun's
# variables; both backends init from them), and the sides alternate within each repeat, their
# order swapped every other repeat, so that they share the machine's noise (a 2-core VM where
# other jobs run: the load average is printed at the start and after each repeat). --raw DIR
# keeps every run's output there. --bind is cohort run's (auto pins each rank, all its threads,
# to one core when the ranks fit; none leaves placement to the scheduler): the same for both
# backends, and it matters on a loaded machine (docs/python.md, "Performance"). --load: one
# busy process (a spinning shell loop) runs beside every run: users share machines. The build's python/ and bin/cohort are copied first: other
# engineers rebuilding the shared build/ mid-run would otherwise swap the plugin under the
# bench (a half-written .so fails to import). Exits 1 if a run fails or a result is wrong; a
# missed goal is reported, not an error.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"  # Debian's, where python3-torch is
PART=all REPEATS=3 WARMUP=20 MODEL=all SYNTH="" SIZES=4K:64M STEP=4 ITERS=20 AR_WARMUP=5
BUILD_DIR="$ROOT/build" BUILD=1 RAW="" BIND=auto LOAD=0
declare -A STEPS=([mlp]=600 [cnn]=150)

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --part) PART="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --mlp-steps) STEPS[mlp]="$2"; shift 2 ;;
    --cnn-steps) STEPS[cnn]="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --synthetic) SYNTH=--synthetic; shift ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --step) STEP="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --ar-warmup) AR_WARMUP="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --raw) RAW="$2"; shift 2 ;;
    --bind) BIND="$2"; shift 2 ;;
    --load) LOAD=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "run_torch_backend_bench: unknown option '$1'" >&2; usage ;;
  esac
done
die() { echo "run_torch_backend_bench: $*" >&2; exit 1; }
case "$BIND" in auto|none) ;; *) die "--bind must be auto or none" ;; esac
case "$PART" in ddp|allreduce|all) ;; *) die "--part must be ddp, allreduce or all" ;; esac
case "$MODEL" in mlp|cnn) MODELS=("$MODEL") ;; all) MODELS=(mlp cnn) ;;
  *) die "--model must be mlp, cnn or all" ;; esac
for v in REPEATS "STEPS[mlp]" "STEPS[cnn]" ITERS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be >= 1, got '${!v}'"
done
[[ "$WARMUP" =~ ^[0-9]+$ && "$AR_WARMUP" =~ ^[0-9]+$ ]] || die "warmups must be >= 0"
[[ "$STEP" =~ ^[0-9]+$ ]] && ((STEP >= 2 && (STEP & (STEP - 1)) == 0)) ||
  die "--step must be a power of 2 >= 2 (the native sweep doubles; its rows are picked)"

TMP="$(mktemp -d)"
LOAD_PID=""
trap 'rm -rf "$TMP"; [[ -n "$LOAD_PID" ]] && kill "$LOAD_PID" 2>/dev/null; true' EXIT
if ((BUILD)); then  # a no-op when up to date; the lock serialises with other engineers' builds
  timeout 900 flock /tmp/cohort-build.lock nice cmake --build "$BUILD_DIR" \
    --target cohort_torch cohort_python cohort_cli >"$TMP/build.log" 2>&1 ||
    { cat "$TMP/build.log" >&2; die "building failed"; }
fi
[[ -x "$BUILD_DIR/bin/cohort" && -d "$BUILD_DIR/python/cohort" ]] ||
  die "no $BUILD_DIR/bin/cohort or $BUILD_DIR/python/cohort (build cohort_cli cohort_python cohort_torch)"
# The snapshot (see above), taken under the build lock so it is never half-written.
timeout 300 flock /tmp/cohort-build.lock cp -r "$BUILD_DIR/python" "$BUILD_DIR/bin/cohort" "$TMP/" ||
  die "copying the build failed"
COHORT="$TMP/cohort"
export PYTHONPATH="$TMP/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 COHORT_NUM_THREADS=1
timeout 120 "$PYTHON" -c 'import torch.distributed as d, cohort.torch as c
assert d.is_gloo_available() and c.is_available()' 2>"$TMP/err" ||
  { cat "$TMP/err" >&2; die "$PYTHON cannot load torch with gloo and the cohort plugin"; }

# job NAME TIMEOUT CMD...: one run, its output (the "[rank 0] " prefix of cohort run removed)
# in $TMP/NAME; on failure its tail and exit 1.
job() {
  local name="$1" limit="$2"
  shift 2
  if ! timeout "$limit" "$@" >"$TMP/$name.out" 2>&1; then
    tail -25 "$TMP/$name.out" >&2; die "$name failed (or ran past ${limit}s): $*"
  fi
  sed -n -e 's/^\[rank 0\] //' -e '/^[ #{]/p' "$TMP/$name.out" >"$TMP/$name"
  [[ -z "$RAW" ]] || cp "$TMP/$name.out" "$RAW/$name.log"
}
[[ -z "$RAW" ]] || mkdir -p "$RAW" || die "cannot create $RAW"

ddp_run() {  # ddp_run BACKEND MODEL REPEAT: one training job; its JSON line into ddp.jsonl
  local b="$1" m="$2" r="$3"
  job "ddp.$b.$m.$r" 600 "$COHORT" run --bind "$BIND" -n 2 -- "$PYTHON" "$ROOT/bench/torch_backend_ddp.py" \
    --backend "$b" --model "$m" --steps "${STEPS[$m]}" --warmup "$WARMUP" $SYNTH
  grep -m1 '^{' "$TMP/ddp.$b.$m.$r" | sed "s/}\$/, \"repeat\": $r}/" >>"$TMP/ddp.jsonl" ||
    die "ddp $b $m: no result line"
  echo "  repeat $r: $b $m $(grep -o '"samples_per_s": [0-9.]*' "$TMP/ddp.$b.$m.$r")" >&2
}

ar_run() {  # ar_run TOOL REPEAT: one sweep; its table in ar.TOOL.REPEAT
  local t="$1" r="$2"
  case "$t" in
    plugin|gloo)
      job "ar.$t.$r" 600 "$COHORT" run --bind "$BIND" -n 2 -- "$PYTHON" "$ROOT/bench/torch_backend_allreduce.py" \
        --backend "${t/plugin/cohort}" --sizes "$SIZES" --step "$STEP" --iters "$ITERS" \
        --warmup "$AR_WARMUP" ;;
    native|native-heap)
      local buffers=shared
      [[ "$t" == native-heap ]] && buffers=heap
      job "ar.$t.$r" 300 "$COHORT" bench collectives -n 2 --op allreduce --sizes "$SIZES" \
        --iters "$ITERS" --warmup "$AR_WARMUP" --buffers "$buffers" \
        --bind "$([[ $BIND == auto ]] && echo core || echo none)" ;;  # placed as the torch ranks
  esac
}

if ((LOAD)); then
  (while :; do :; done) &
  LOAD_PID=$!
fi

source "$ROOT/bench/machine_line.sh"
{
  echo "# bench/run_torch_backend_bench.sh --part $PART --repeats $REPEATS --bind $BIND$( ((LOAD)) && echo ' --load')$( [[ $PART != allreduce ]] &&
    echo " --mlp-steps ${STEPS[mlp]} --cnn-steps ${STEPS[cnn]} --warmup $WARMUP${SYNTH:+ $SYNTH}")$(
    [[ $PART != ddp ]] && echo " --sizes $SIZES --step $STEP --iters $ITERS --ar-warmup $AR_WARMUP")"
  echo "# $(machine_line "$PYTHON"); torch $("$PYTHON" -c 'import torch; print(torch.__version__)'
  ); $(date -u +%Y-%m-%dT%H:%MZ)"
} | tee "$TMP/header" >&2  # progress on stderr; the report prints it once
for ((r = 1; r <= REPEATS; r++)); do
  # Odd repeats run cohort first, even ones gloo first: neither side always runs warm-cached.
  if ((r % 2)); then order=(cohort gloo) ar_order=(plugin gloo native native-heap)
  else order=(gloo cohort) ar_order=(native-heap native gloo plugin); fi
  if [[ "$PART" != allreduce ]]; then
    for m in "${MODELS[@]}"; do for b in "${order[@]}"; do ddp_run "$b" "$m" "$r"; done; done
  fi
  if [[ "$PART" != ddp ]]; then
    for t in "${ar_order[@]}"; do ar_run "$t" "$r"; done
  fi
  echo "repeat $r/$REPEATS done; load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$TMP/header" >&2
done
touch "$TMP/ddp.jsonl"
timeout 60 "$PYTHON" "$ROOT/bench/torch_backend_report.py" "$TMP" "$PART" "$REPEATS"
