#!/usr/bin/env bash
# Runs the CUDA tests that scripts/gpu-bundle.sh packed, on the GPU machine, from the repo root:
# the host arithmetic tests, the kernel tests, then the kernel tests again under
# compute-sanitizer (memcheck). Writes a one-page summary to $OUT/gpu-summary.md ($OUT is the
# device tool's output folder; ./gpu-summary.md without it) and the logs beside it.
#
# Exits non-zero when a test fails, a binary does not load, or memcheck reports an error. On a
# machine without a usable GPU every GPU test skips with CUDA's reason and the script exits 0
# with a summary that says so. Every step runs under `timeout`; the whole stays under 8 minutes.
#
# Then bench/run_gpu_gpt.sh (GPT-2 small, cohort vs PyTorch; GPU_GPT_SECONDS, default 200;
# GPU_CHECK_BENCH=0 leaves it out), whose report lands beside the summary.
#
# Usage (docs/gpu.md): the device tool's run with carry ["gpu-bundle"] and command
#   bash scripts/gpu-check.sh
set -uo pipefail
cd "$(dirname "$0")/.."

BUNDLE=gpu-bundle
START=$(date +%s)
# 7.5 minutes by default (GPU_CHECK_SECONDS sets it): the sanitizer gets what is left of it.
DEADLINE=$((START + ${GPU_CHECK_SECONDS:-450}))
REPORT_DIR=${OUT:-.}
LOGS=$REPORT_DIR/gpu-logs
SUMMARY=$REPORT_DIR/gpu-summary.md
LATER=""  # what issue 33 has not built yet: nothing
mkdir -p "$LOGS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

FAILED=0
NOTES=()
note() { NOTES+=("$*"); echo "   $*"; }
fail() { FAILED=1; note "FAIL: $*"; }
left() { echo $((DEADLINE - $(date +%s))); }

# ---- the bundle and its libraries ---------------------------------------------------------------

echo "== bundle"
if [ ! -x "$BUNDLE/bin/cohort_cuda_kernel_tests" ]; then
  fail "no $BUNDLE/bin/cohort_cuda_kernel_tests: run scripts/gpu-bundle.sh first and carry gpu-bundle"
else
  head -n 3 "$BUNDLE/MANIFEST.txt" 2>/dev/null
fi
# The bundle's libraries, cuBLASLt and the glibc fallback: scripts/gpu-env.sh.
source scripts/gpu-env.sh
gpu_unpack_libs "$WORK" "$BUNDLE" || fail "cannot unpack $BUNDLE/lib.tar.gz"
CUBLAS_DIR=$(gpu_find_cublaslt)
echo "   libcublasLt.so.13 from: ${CUBLAS_DIR:-nowhere}"
CALLER_LIBRARY_PATH=${LD_LIBRARY_PATH:-}  # for bench/run_gpu_gpt.sh, which starts PyTorch too
LD_LIBRARY_PATH=$(gpu_library_path "$WORK" "$CUBLAS_DIR")
export LD_LIBRARY_PATH

echo "== GPU"
GPU=$(timeout 15 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
  head -n 4) || GPU="none (nvidia-smi: ${GPU:-not found})"
[ -n "$GPU" ] || GPU="none (nvidia-smi printed nothing)"
echo "   $GPU"

# The binaries were linked on Debian 12 (glibc 2.36): if they do not load against this machine's
# C runtime, run them through the bundled loader and libc instead.
RUNNER=()
loads() { timeout 20 "${RUNNER[@]}" "$BUNDLE/bin/$1" --gtest_list_tests >"$LOGS/load-$1.log" 2>&1; }
if [ "$FAILED" = 0 ] && ! loads cohort_cuda_math_tests; then
  gpu_glibc_runner "$WORK" "$BUNDLE" "$LD_LIBRARY_PATH"
  note "the binaries do not load with this machine's libc ($(head -n 1 "$LOGS/load-cohort_cuda_math_tests.log")); using the bundled one"
fi
for b in cohort_cuda_math_tests cohort_cuda_kernel_tests; do
  if [ "$FAILED" = 0 ] && ! loads "$b"; then
    fail "$b does not load: $(grep -m 2 -e 'error' -e 'not found' "$LOGS/load-$b.log" | tr '\n' ' ')"
    ldd "$BUNDLE/bin/$b" >"$LOGS/ldd-$b.log" 2>&1
  fi
done

# ---- tests ----------------------------------------------------------------------------------------

# gtest's summary lines: "[  PASSED  ] 12 tests." and the like; 0 where absent.
count() { grep -E -m 1 "^\[  $1 *\] [0-9]+ tests?[.,]" "$2" | grep -oE '[0-9]+' | head -n 1 || true; }

# The test a crashed run was in: the last "[ RUN      ]" without its "[       OK ]" or FAILED line.
crashed_test() {
  awk '/^\[ RUN      \]/ { t = $4 } /^\[       OK \]|^\[  FAILED  \] [A-Za-z]/ { t = "" }
       END { print t }' "$1"
}

# Runs a test binary with a time limit; sets P S F (passed, skipped, failed) and RAN. A test that
# crashes the process is named and left out of a rerun, so one crash does not hide the rest.
run_tests() {  # name seconds log [extra args]
  local name=$1 secs=$2 log=$3
  shift 3
  local skip="" crashed=() rc tries
  echo "== $name (at most ${secs}s)"
  for tries in 1 2 3 4; do
    timeout "$secs" "${RUNNER[@]}" "$BUNDLE/bin/$name" --gtest_color=no \
      ${skip:+--gtest_filter=-$skip} "$@" >"$log" 2>&1
    rc=$?
    [ "$rc" -gt 128 ] && [ "$rc" != 137 ] || break
    local t
    t=$(crashed_test "$log")
    [ -n "$t" ] || break
    crashed+=("$t")
    cp "$log" "${log%.log}-crash$tries.log"
    fail "$name: $t crashed the process (exit $rc; gpu-logs/$(basename "${log%.log}")-crash$tries.log)"
    skip=${skip:+$skip:}$t
  done
  P=$(count PASSED "$log"); S=$(count SKIPPED "$log"); F=$(count FAILED "$log")
  P=${P:-0} S=${S:-0} F=$((${F:-0} + ${#crashed[@]}))
  RAN=$(grep -c '^\[==========\] .* ran\.' "$log")
  tail -n 4 "$log" | sed 's/^/   /'
  [ "$rc" = 124 ] && fail "$name timed out after ${secs}s (in $(crashed_test "$log"))"
  [ "$RAN" = 0 ] && [ "$rc" != 124 ] && fail "$name stopped early (exit $rc; see gpu-logs/$(basename "$log"))"
  [ "$F" != "${#crashed[@]}" ] && fail "$name: $((F - ${#crashed[@]})) failed: $(grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sed 's/.*\] //' | sort -u | head -n 8 | tr '\n' ' ')"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$F" = 0 ] && [ "$RAN" != 0 ] && fail "$name exited $rc"
  return 0
}

MP=0 MS=0 MF=0 KP=0 KS=0 KF=0 SKIP_REASON=""
if [ "$FAILED" = 0 ]; then
  run_tests cohort_cuda_math_tests 45 "$LOGS/math-tests.log"
  MP=$P MS=$S MF=$F
  run_tests cohort_cuda_kernel_tests 150 "$LOGS/kernel-tests.log" \
    --gtest_output="xml:$LOGS/kernel-tests.xml"
  KP=$P KS=$S KF=$F
  SKIP_REASON=$(grep -A1 ': Skipped$' "$LOGS/kernel-tests.log" | grep -v -e ': Skipped$' -e '^--' |
    sort | uniq -c | sort -rn | head -n 1 | sed 's/^ *[0-9]* //')
fi
# COHORT_REQUIRE_GPU's reason; the tests that need no GPU (launch planning, error text) still pass.
NO_GPU=0
grep -q 'no CUDA device: ' "$LOGS/kernel-tests.log" 2>/dev/null && NO_GPU=1

# ---- cohort train on the GPU ---------------------------------------------------------------------

# The MLP example on synthetic data, 20 steps, run.device = cpu then cuda: the test loss of the
# two runs and their samples/s (the training tests above compare the parameters themselves).
TRAIN="not run"
train_run() {  # device -> "loss samples/s" or nothing
  timeout 60 "${RUNNER[@]}" "$BUNDLE/bin/cohort" train examples/fashion_mlp.toml \
    --set data.dataset=synthetic --set train.max_steps=20 --set run.device="$1" \
    --set run.dir="$WORK/runs" --set run.name="$1" --set run.progress=none \
    --set ckpt.enabled=false >"$LOGS/train-$1.log" 2>&1 || return 1
  python3 -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
print(r.get("eval", {}).get("loss", r.get("eval_loss", "?")), round(r.get("samples_per_s", 0)))' \
    "$WORK/runs/$1/metrics.jsonl"
}
if [ ! -x "$BUNDLE/bin/cohort" ]; then
  TRAIN="not run: no $BUNDLE/bin/cohort in the bundle"
elif [ "$NO_GPU" = 1 ]; then
  TRAIN="not run: no GPU"
else  # also after a failed kernel test: what training does is worth seeing either way
  echo "== cohort train, MLP, cpu then cuda"
  CPU_RUN=$(train_run cpu) || fail "cohort train on the CPU failed (gpu-logs/train-cpu.log)"
  GPU_RUN=$(train_run cuda) || fail "cohort train with run.device=cuda failed (gpu-logs/train-cuda.log: $(tail -n 1 "$LOGS/train-cuda.log"))"
  for d in cpu cuda; do
    grep -q . "$LOGS/train-$d.log" 2>/dev/null && { echo "   train-$d.log ends:"; tail -n 5 "$LOGS/train-$d.log" | sed 's/^/     /'; }
  done
  TRAIN="cpu: test loss ${CPU_RUN% *}, ${CPU_RUN#* } samples/s; cuda: test loss ${GPU_RUN% *}, ${GPU_RUN#* } samples/s"
  echo "   $TRAIN"
fi

# ---- bench/gpu_gpt ------------------------------------------------------------------------------

# GPT-2 small trained by cohort and by PyTorch on this GPU (bench/run_gpu_gpt.sh writes its own
# report beside this one); its tokens/s ratios go into the summary.
BENCH="not run"
if [ "$NO_GPU" = 1 ]; then
  BENCH="not run: no GPU"
elif [ "${GPU_CHECK_BENCH:-1}" = 0 ]; then
  BENCH="not run: GPU_CHECK_BENCH=0"
elif [ "$(left)" -lt 120 ]; then
  BENCH="not run: under 120 s left of GPU_CHECK_SECONDS"
else
  secs=$(($(left) - 60 < ${GPU_GPT_SECONDS:-200} ? $(left) - 60 : ${GPU_GPT_SECONDS:-200}))
  echo "== bench/gpu_gpt (at most ${secs}s)"
  # Run with its own LD_LIBRARY_PATH: it gives the bundle's libraries to cohort alone.
  env LD_LIBRARY_PATH="$CALLER_LIBRARY_PATH" GPU_GPT_SECONDS="$secs" \
    timeout -k 10 $((secs + 30)) bash bench/run_gpu_gpt.sh >"$LOGS/bench-gpu-gpt.log" 2>&1
  rc=$?
  tail -n 12 "$LOGS/bench-gpu-gpt.log" | sed 's/^/   /'
  BENCH="exit $rc, report gpu-gpt.md"
  [ "$rc" = 0 ] || note "bench/gpu_gpt exited $rc (gpu-logs/bench-gpu-gpt.log)"
fi

# ---- compute-sanitizer ----------------------------------------------------------------------------

SANITIZER="not run"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ "$NO_GPU" = 1 ]; then
  SANITIZER="not run: no GPU, nothing for memcheck to check"
elif [ -z "$CS" ]; then
  SANITIZER="not run: compute-sanitizer not found"
elif [ "${GPU_CHECK_MEMCHECK:-1}" = 0 ]; then
  SANITIZER="not run: GPU_CHECK_MEMCHECK=0"
elif [ "$FAILED" = 0 ] && [ "$(left)" -gt 30 ]; then
  secs=$(left)
  echo "== compute-sanitizer memcheck (at most ${secs}s)"
  timeout "$secs" "$CS" --tool memcheck --report-api-errors no --error-exitcode 99 --print-limit 20 "${RUNNER[@]}" \
    "$BUNDLE/bin/cohort_cuda_kernel_tests" --gtest_brief=1 --gtest_color=no ${MEMCHECK_FILTER:+--gtest_filter=$MEMCHECK_FILTER} \
    >"$LOGS/memcheck.log" 2>&1
  rc=$?
  errors=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$LOGS/memcheck.log" | grep -oE '[0-9]+' | tail -n 1)
  tail -n 3 "$LOGS/memcheck.log" | sed 's/^/   /'
  if [ "$rc" = 124 ]; then
    SANITIZER="incomplete: timed out after ${secs}s (no error reported before that)"
    note "memcheck timed out after ${secs}s: not a failure, but not a clean bill either"
  elif [ -n "$errors" ] && [ "$errors" != 0 ]; then
    SANITIZER="$errors errors (gpu-logs/memcheck.log)"
    fail "memcheck reported $errors errors"
  elif [ "$rc" != 0 ]; then
    SANITIZER="exit $rc (gpu-logs/memcheck.log)"
    fail "the tests under memcheck exited $rc"
  else
    SANITIZER="0 errors"
  fi
fi

LIBC="this machine's"
[ "${#RUNNER[@]}" != 0 ] && LIBC="the bundled Debian 12 one"

# ---- summary --------------------------------------------------------------------------------------

[ -n "$LATER" ] && echo "== not yet built: $LATER"
if [ "$FAILED" = 1 ]; then
  VERDICT="FAILED"
elif [ "$NO_GPU" = 1 ]; then
  VERDICT="NO GPU: every GPU test skipped (${SKIP_REASON:-no reason printed})"
else
  VERDICT="PASSED"
fi
{
  echo "# cohort GPU check: $VERDICT"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), host $(hostname), $(($(date +%s) - START)) s"
  echo "- GPU: $GPU"
  echo "- bundle: $(sed -n 2p "$BUNDLE/MANIFEST.txt" 2>/dev/null)"
  echo "- libcublasLt.so.13 from: ${CUBLAS_DIR:-not found}; C runtime: $LIBC"
  echo
  echo "| tests | passed | failed | skipped |"
  echo "|---|---|---|---|"
  echo "| host arithmetic (cohort_cuda_math_tests) | $MP | $MF | $MS |"
  echo "| GPU kernels (cohort_cuda_kernel_tests) | $KP | $KF | $KS |"
  echo
  [ -n "$SKIP_REASON" ] && echo "Skipped because: $SKIP_REASON" && echo
  echo "compute-sanitizer memcheck: $SANITIZER"
  echo
  echo "cohort train (MLP, synthetic data, 20 steps): $TRAIN"
  echo
  echo "bench/gpu_gpt: $BENCH"
  [[ $BENCH == exit* ]] && [ -f "$REPORT_DIR/gpu-gpt.md" ] && grep -A6 '^| tokens/s ratio' "$REPORT_DIR/gpu-gpt.md"
  echo
  grep -h -e '^\[ matmul  \]' -e '^\[ attention \]' -e '^\[ training \]' -e '^\[ pinned \]' "$LOGS/kernel-tests.log" 2>/dev/null | sed 's/^/    /'
  if [ "${#NOTES[@]}" != 0 ]; then
    echo "Notes:"
    printf -- '- %s\n' "${NOTES[@]}"
    echo
  fi
  [ -n "$LATER" ] && echo "Not yet built (issue 33): $LATER."
  echo "Logs: gpu-logs/ beside this file (gpu-logs.tar.gz from the device tool)."
} >"$SUMMARY"
echo "== summary: $SUMMARY"
cat "$SUMMARY"
# The device tool brings back at most 8 files: the logs travel as one archive.
if [ -n "${OUT:-}" ] && tar -C "$REPORT_DIR" -czf "$REPORT_DIR/gpu-logs.tar.gz" gpu-logs; then
  rm -rf "$LOGS"
fi
exit "$FAILED"
