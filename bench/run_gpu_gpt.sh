#!/usr/bin/env bash
# GPT-2 small trained on one GPU by cohort and by PyTorch (eager and torch.compile), f32 and
# bf16, side by side in the same run (issue 33): tokens/s, median step time, MFU and the
# cohort / PyTorch ratio of each pair. Writes the markdown report to $OUT/gpu-gpt.md ($OUT is the
# device tool's output folder; ./gpu-gpt.md without it), the rows to gpu-gpt-rows.jsonl and the
# logs to gpu-gpt-logs.tar.gz beside it, and prints the report.
#
#   bench/run_gpu_gpt.sh [--smoke] [--cohort PATH] [--rows "ROW ..."] [--tf32]
#
#   --smoke    the tiny shape on the CPU (run.device = cpu, torch on the CPU): checks the script,
#              not the speed. The default where nvidia-smi finds no GPU.
#   --cohort   the cohort binary (default: gpu-bundle/bin/cohort with the bundle's libraries,
#              as scripts/gpu-check.sh runs it, where the bundle is; else build/bin/cohort)
#   --rows     which rows, in this order (default all of them, most telling first):
#              eager-f32 cohort-f32 eager-bf16 cohort-bf16 compile-bf16 compile-f32
#   --tf32     the PyTorch f32 rows on TF32 tensor cores (cohort's f32 has no TF32; see
#              bench/torch_gpu_gpt.py), their MFU against the TF32 peak
#
# On the GPU machine (docs/gpu.md, "bench/gpu_gpt"): the device tool's run with carry
# ["gpu-bundle"] and command `bash bench/run_gpu_gpt.sh`. Every step runs under `timeout` and
# the whole stays under GPU_GPT_SECONDS (default 260): a row that no longer fits is reported as
# out of time. cohort's bf16 row needs train.precision; a cohort without that key reports the
# row as not built. The PyTorch side is the first of $COHORT_BENCH_PYTHON, python3 and
# /usr/bin/python3 that imports torch. Exits 1 when a row failed (the report says which), 2 on
# bad arguments; skipped, not built and out-of-time rows are not failures.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2

die() { echo "run_gpu_gpt: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
SMOKE=0 COHORT="" TF32=()
ROWS="eager-f32 cohort-f32 eager-bf16 cohort-bf16 compile-bf16 compile-f32"
while (($#)); do
  case "$1" in
    --smoke) SMOKE=1; shift ;;
    --cohort) [ $# -ge 2 ] || die "--cohort needs a path"; COHORT=$2; shift 2 ;;
    --rows) [ $# -ge 2 ] || die "--rows needs a list"; ROWS=$2; shift 2 ;;
    --tf32) TF32=(--tf32); shift ;;
    -h|--help) usage 0 ;;
    *) echo "run_gpu_gpt: unknown option '$1'" >&2; usage ;;
  esac
done
for r in $ROWS; do
  [[ " eager-f32 cohort-f32 eager-bf16 cohort-bf16 compile-bf16 compile-f32 " == *" $r "* ]] ||
    die "--rows: unknown row '$r'"
done

# NVIDIA's PyTorch containers set this, which puts TF32 into every f32 cuBLAS call: the f32 rows
# compare true f32 with true f32 unless --tf32 asks otherwise.
[ "${#TF32[@]}" = 0 ] && unset TORCH_ALLOW_TF32_CUBLAS_OVERRIDE
START=$(date +%s)
DEADLINE=$((START + ${GPU_GPT_SECONDS:-260}))
REPORT_DIR=${OUT:-.}
mkdir -p "$REPORT_DIR" || die "cannot make $REPORT_DIR"
REPORT=$REPORT_DIR/gpu-gpt.md
ROWS_FILE=$REPORT_DIR/gpu-gpt-rows.jsonl
WORK=$(mktemp -d) || die "mktemp failed"
trap 'rm -rf "$WORK"' EXIT
LOGS=$WORK/gpu-gpt-logs
mkdir -p "$LOGS"
: >"$ROWS_FILE"
PY=$(command -v python3 || echo /usr/bin/python3)  # the report's: standard library only
REPORT_PY=(timeout 30 "$PY" bench/gpu_gpt_report.py)

# ---- the machine -------------------------------------------------------------------------------

GPU=$(timeout 15 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  2>/dev/null | head -n 1)
GPU_NAME=${GPU%%,*}
CUDA_VERSION=$(timeout 15 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -n 1)
if [ -z "$GPU" ] && [ "$SMOKE" = 0 ]; then
  echo "run_gpu_gpt: nvidia-smi finds no GPU: running the CPU smoke shape (--smoke)"
  SMOKE=1
fi
CPU_MODEL=$(grep -m 1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//')
echo "== machine: GPU ${GPU:-none}; ${CUDA_VERSION:-no CUDA driver}; CPU ${CPU_MODEL:-?} ($(nproc) cores)"

if [ "$SMOKE" = 1 ]; then  # seconds on 2 cores: the script's plumbing, not a measurement
  DEVICE=cpu L=2 H=2 C=64 T=64 B=4 TEXT_BYTES=300000
  C_WARMUP=2 C_STEPS=4 C_LIMIT=30 T_WARMUP=1 T_STEPS=3
  CAP_EAGER=60 CAP_COHORT=60 CAP_COMPILE=120
else  # GPT-2 small, examples/gpt2_small.toml
  DEVICE=cuda L=12 H=12 C=768 T=1024 B=8 TEXT_BYTES=4000000
  # cohort: 3 warmup steps, 10 timed, and at most 60 s of training (its f32 may be slow).
  C_WARMUP=3 C_STEPS=10 C_LIMIT=60 T_WARMUP=3 T_STEPS=20
  # torch.compile's first step compiles forward and backward: about a minute on 16 cores.
  CAP_EAGER=60 CAP_COHORT=110 CAP_COMPILE=150
fi
SHAPE=$L,$H,$C,$T,$B

# ---- the two sides -----------------------------------------------------------------------------

PYTHON=""
for p in ${COHORT_BENCH_PYTHON:-} python3 /usr/bin/python3; do
  if TORCH_VERSION=$(timeout 60 "$p" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
    PYTHON=$p
    break
  fi
done
if [ -n "$PYTHON" ]; then
  echo "== PyTorch: $PYTHON, torch $TORCH_VERSION"
else
  echo "== PyTorch: none (no python3 here imports torch): its rows are skipped"
fi

COHORT_ENV=() RUNNER=()
if [ -z "$COHORT" ] && [ -x gpu-bundle/bin/cohort ]; then
  # The bundle's binary needs its Debian libraries and cuBLASLt; given to cohort alone
  # (scripts/gpu-env.sh says why).
  COHORT=gpu-bundle/bin/cohort
  source scripts/gpu-env.sh
  gpu_unpack_libs "$WORK" gpu-bundle || die "cannot unpack gpu-bundle/lib.tar.gz"
  COHORT_LIBS=$(gpu_library_path "$WORK" "$(gpu_find_cublaslt)")
  COHORT_ENV=(env "LD_LIBRARY_PATH=$COHORT_LIBS")
  if ! timeout 20 "${COHORT_ENV[@]}" "$COHORT" --version >"$LOGS/cohort-load.log" 2>&1; then
    gpu_glibc_runner "$WORK" gpu-bundle "$COHORT_LIBS"
    echo "   cohort does not load with this machine's libc ($(head -n 1 "$LOGS/cohort-load.log")); using the bundled one"
  fi
fi
COHORT=${COHORT:-build/bin/cohort}
[ -x "$COHORT" ] || die "no cohort binary at $COHORT: build it (cmake --build build --target cohort_cli) or run scripts/gpu-bundle.sh"
COHORT_VERSION=$(timeout 20 "${COHORT_ENV[@]}" "${RUNNER[@]}" "$COHORT" --version 2>&1 | head -n 1) ||
  die "$COHORT does not start: $COHORT_VERSION"
BUNDLE_SOURCE=$(sed -n 's/^source: //p' gpu-bundle/MANIFEST.txt 2>/dev/null)
[[ $COHORT == gpu-bundle/* ]] || BUNDLE_SOURCE=$(git rev-parse --short HEAD 2>/dev/null)
echo "== cohort: $COHORT ($COHORT_VERSION, source ${BUNDLE_SOURCE:-?})"
# train.precision ("f32" | "bf16"): examples/gpt2_small.toml may ask for bf16, so the f32 row
# names f32 where the key exists; a cohort without it has no bf16 row ("not built").
HAVE_PRECISION=0
if timeout 20 "${COHORT_ENV[@]}" "${RUNNER[@]}" "$COHORT" config show examples/gpt2_small.toml \
  --set train.precision=f32 >"$LOGS/cohort-precision-probe.log" 2>&1; then
  HAVE_PRECISION=1
fi

# Random printable bytes for cohort's text loader (no data set travels); PyTorch draws random
# byte batches itself. The content does not change a step's cost.
TEXT=$WORK/text.txt
head -c "$((TEXT_BYTES * 3 / 4))" /dev/urandom | base64 -w 100 >"$TEXT" || die "cannot write $TEXT"

# ---- the rows ----------------------------------------------------------------------------------

# Seconds a row may take: at most CAP, and what is left of the deadline less 10 s for the
# report; fails when fewer than MIN are left.
budget() {  # cap min
  local left=$((DEADLINE - $(date +%s) - 10))
  [ "$left" -ge "$2" ] || return 1
  echo $((left < $1 ? left : $1))
}
add_row() { "${REPORT_PY[@]}" row --shape "$SHAPE" "$@" >>"$ROWS_FILE" || echo "   (no row: the report helper failed)"; }
out_of_time() { add_row --name "$1" --precision "$2" --status "out of time" \
  --reason "under $3 s left of GPU_GPT_SECONDS=${GPU_GPT_SECONDS:-260}"; }

run_torch() {  # mode precision cap min
  local mode=$1 prec=$2 name="PyTorch $1" secs log=$LOGS/torch-$1-$2
  if [ -z "$PYTHON" ]; then
    add_row --name "$name" --precision "$prec" --status skipped --reason "no python3 with torch"
    return
  fi
  secs=$(budget "$3" "$4") || { out_of_time "$name" "$prec" "$4"; return; }
  echo "== $name, $prec (at most ${secs}s)"
  timeout -k 10 "$secs" "$PYTHON" bench/torch_gpu_gpt.py --mode "$mode" --precision "$prec" \
    --device "$DEVICE" --n-layer "$L" --n-head "$H" --n-embd "$C" --block-size "$T" --batch "$B" \
    --warmup "$T_WARMUP" --steps "$T_STEPS" "${TF32[@]}" >"$log.json" 2>"$log.log"
  local rc=$?
  add_row --name "$name" --precision "$prec" --torch-out "$log.json" --log "$log.log" --rc "$rc" \
    --timeout "$secs"
  tail -n 1 "$ROWS_FILE" | cut -c1-200 | sed 's/^/   /'
}

run_cohort() {  # precision cap min
  local prec=$1 secs log=$LOGS/cohort-$1.log extra=()
  if [ "$HAVE_PRECISION" = 1 ]; then
    extra=(--set train.precision="$prec")
  elif [ "$prec" = bf16 ]; then
    add_row --name cohort --precision bf16 --status "not built" --reason "this cohort has no \
train.precision ($(grep -m 1 -o "unknown config key[^;]*" "$LOGS/cohort-precision-probe.log"))"
    tail -n 1 "$ROWS_FILE" | cut -c1-200 | sed 's/^/   /'
    return
  fi
  secs=$(budget "$2" "$3") || { out_of_time cohort "$prec" "$3"; return; }
  echo "== cohort, $prec (at most ${secs}s)"
  # eval_every = 0 and one evaluation batch at the end: no evaluation between the timed steps;
  # no checkpoint, no sample; log_every = 1: every step's time_s. warmup_steps = 1: the cosine
  # schedule's warmup must fit in max_steps (the rate does not change a step's cost).
  timeout -k 10 "$secs" "${COHORT_ENV[@]}" "${RUNNER[@]}" "$COHORT" train examples/gpt2_small.toml \
    --set run.device="$DEVICE" --set model.n_layer="$L" --set model.n_head="$H" \
    --set model.n_embd="$C" --set model.block_size="$T" --set data.batch_size="$B" \
    --set data.path="$TEXT" --set train.max_steps="$((C_WARMUP + C_STEPS))" \
    --set train.time_limit_s="$C_LIMIT" --set optim.warmup_steps=1 --set run.dir="$WORK/runs" \
    --set run.name="cohort-$prec" --set run.progress=none --set run.log_every=1 \
    --set ckpt.enabled=false --set train.eval_every=0 --set train.eval_batches=1 \
    --set train.sample_bytes=0 "${extra[@]}" >"$log" 2>&1
  local rc=$?
  cp "$WORK/runs/cohort-$prec/metrics.jsonl" "$LOGS/cohort-$prec-metrics.jsonl" 2>/dev/null
  if [ "$prec" = bf16 ] && grep -q "unknown config key 'train.precision'" "$log"; then
    add_row --name cohort --precision "$prec" --status "not built" \
      --reason "this cohort has no train.precision"
  elif [ "$prec" = bf16 ] && [ "$rc" != 0 ] && grep -q '^cohort: error: config' "$log"; then
    # A deliberate refusal (bf16 where this cohort does not offer it), not a crash.
    add_row --name cohort --precision "$prec" --status refused --reason "$(grep -m 1 '^cohort: error' "$log" | cut -c1-200)"
  else
    add_row --name cohort --precision "$prec" --cohort-metrics "$WORK/runs/cohort-$prec/metrics.jsonl" \
      --warmup "$C_WARMUP" --log "$log" --rc "$rc" --timeout "$secs"
  fi
  tail -n 1 "$ROWS_FILE" | cut -c1-200 | sed 's/^/   /'
}

# The GPU's bf16 and f32 matmul peaks, measured here for the MFU column (a few seconds).
PEAKS_FILE=$LOGS/matmul-peak.json
if [ -n "$PYTHON" ] && [ "$DEVICE" = cuda ]; then
  echo "== matmul peak (torch, 8192^3)"
  timeout -k 5 60 "$PYTHON" bench/torch_matmul_peak.py >"$PEAKS_FILE" 2>"$LOGS/matmul-peak.log" ||
    echo "   (no measured peak: $(tail -n 1 "$LOGS/matmul-peak.log"))"
  sed 's/^/   /' "$PEAKS_FILE"
fi

for r in $ROWS; do
  case "$r" in
    eager-*) run_torch eager "${r#eager-}" "$CAP_EAGER" 20 ;;
    compile-*) run_torch compile "${r#compile-}" "$CAP_COMPILE" 60 ;;
    cohort-*) run_cohort "${r#cohort-}" "$CAP_COHORT" 20 ;;
  esac
done

# ---- the report --------------------------------------------------------------------------------

INFO=(--info "date=$(date -u '+%Y-%m-%d %H:%M UTC'), host $(hostname), $(($(date +%s) - START)) s"
  --info "GPU=${GPU:-none}${CUDA_VERSION:+, $CUDA_VERSION}"
  --info "CPU=${CPU_MODEL:-?}, $(nproc) cores"
  --info "cohort=$COHORT ($COHORT_VERSION, source ${BUNDLE_SOURCE:-?})"
  --info "PyTorch=${PYTHON:-none}${PYTHON:+, torch $TORCH_VERSION}")
[ "$SMOKE" = 1 ] && INFO+=(--info "mode=SMOKE on the CPU (a check of the script, not a measurement)")
if ! "${REPORT_PY[@]}" table --rows "$ROWS_FILE" --gpu "${GPU_NAME:-none}" "${INFO[@]}" \
  --peaks "$PEAKS_FILE" >"$REPORT"; then
  echo "run_gpu_gpt: error: the report could not be made from $ROWS_FILE" >&2
  exit 1
fi
echo "== report: $REPORT"
cat "$REPORT"
# The device tool brings back at most 8 files: the logs travel as one archive.
tar -C "$WORK" -czf "$REPORT_DIR/gpu-gpt-logs.tar.gz" gpu-gpt-logs ||
  echo "run_gpu_gpt: could not pack the logs" >&2
if grep -q '"status": "failed"' "$ROWS_FILE"; then
  echo "run_gpu_gpt: FAILED rows: $(grep '"status": "failed"' "$ROWS_FILE" |
    sed 's/.*"name": "\([^"]*\)".*"precision": "\([^"]*\)".*/\1 \2/' | paste -sd, -)" >&2
  exit 1
fi
exit 0
