#!/usr/bin/env bash
# Where a cohort GPT step spends its GPU time, without a profiler (the GPU machine has no nsys):
# trains examples/gpt2_small.toml for a few steps with CUDA_LAUNCH_BLOCKING=1, so that every
# kernel finishes before the host goes on and the trace's host spans (run.trace, per module,
# forward and backward) measure GPU time, then prints the spans by total time. The blocking
# launches add each kernel's launch latency, so small kernels look slower than they are; for the
# split between modules (attention, MLP, optimizer) it is close enough (docs/gpu.md, "Profiling").
#
# Usage (the device tool's run, carry ["gpu-bundle"]):
#   bash scripts/gpu-profile.sh [PRECISION] [STEPS]     (default: bf16 4)
# Writes $OUT/gpu-profile.txt ($OUT: the tool's output folder; . without it).
set -uo pipefail
cd "$(dirname "$0")/.."

PRECISION=${1:-bf16}
STEPS=${2:-4}
REPORT=${OUT:-.}/gpu-profile.txt
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

source scripts/gpu-env.sh
gpu_unpack_libs "$WORK" gpu-bundle || { echo "gpu-profile: cannot unpack gpu-bundle/lib.tar.gz"; exit 1; }
LIBS=$(gpu_library_path "$WORK" "$(gpu_find_cublaslt)")
# Printable bytes stand in for the corpus: the time of a step does not depend on the text.
head -c 3000000 /dev/urandom | tr -dc 'a-z \n' >"$WORK/text.txt"

echo "== cohort GPT-2 small, $STEPS steps, train.precision = $PRECISION, launches blocking"
CUDA_LAUNCH_BLOCKING=1 timeout 200 env LD_LIBRARY_PATH="$LIBS" gpu-bundle/bin/cohort train \
  examples/gpt2_small.toml --set train.precision="$PRECISION" --set data.path="$WORK/text.txt" \
  --set train.max_steps="$STEPS" --set optim.warmup_steps=1 --set run.dir="$WORK/runs" \
  --set run.name=profile --set run.progress=none --set ckpt.enabled=false \
  --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_bytes=0 \
  --set run.trace=true --set run.trace_module_depth=3 >"$WORK/train.log" 2>&1 ||
  { echo "gpu-profile: cohort train failed: $(tail -n 3 "$WORK/train.log")" | tee "$REPORT"; exit 1; }
{
  echo "# cohort GPT-2 small on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1): $STEPS steps, $PRECISION, CUDA_LAUNCH_BLOCKING=1"
  echo "total ms, spans, name (ms per step = total / steps)"
  python3 - "$WORK/runs/profile/trace.json" <<'PY'
import collections, json, sys
data = json.load(open(sys.argv[1]))
events = data["traceEvents"] if isinstance(data, dict) else data
total, count = collections.Counter(), collections.Counter()
for e in events:
    if e.get("ph") == "X":
        total[e["name"]] += e.get("dur", 0)
        count[e["name"]] += 1
for name, us in total.most_common(40):
    print(f"{us / 1000:10.1f} {count[name]:5d}  {name}")
PY
  echo "## train log"
  tail -n 6 "$WORK/train.log"
} >"$REPORT"
cat "$REPORT"
