#!/usr/bin/env bash
# Your own data without C++ (issue 35, docs/data.md): Fashion-MNIST written as a CSV file and as
# a .npz (bench/fashion_to_files.py), trained by `cohort train --workers 2` with data.dataset =
# "csv" (the MLP) and "numpy" (the CNN, its input shape [1, 28, 28] read from the file), against
# PyTorch DDP on gloo training the same model on the same images (bench/torch_ddp_accuracy.py
# --model, 2 ranks, batch 64 per rank, the same SGD), for every seed. Prints each run's test
# accuracy, the mean per row, and cohort's difference from PyTorch (the claim: within 0.5
# points, mean of 3 seeds).
#
#   bench/run_file_data_accuracy.sh [--seeds N] [--limit IMAGES] [--smoke]
# --smoke: 1 seed, 2,000 images per split (a check of the script, not a measurement).
# Exits 1 when a run fails; a missed goal is reported, not an error.
set -uo pipefail
cd "$(dirname "$0")/.."

SEEDS=3 LIMIT=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --smoke) SEEDS=1 LIMIT=2000; shift ;;
    *) echo "run_file_data_accuracy: unknown argument $1" >&2; exit 2 ;;
  esac
done
BUILD=$(realpath "${COHORT_BUILD_DIR:-build}")
COHORT=$BUILD/bin/cohort
[ -x "$COHORT" ] || { echo "run_file_data_accuracy: build $COHORT first" >&2; exit 1; }
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
/usr/bin/python3 bench/fashion_to_files.py "$OUT/data" --limit "$LIMIT" >&2 ||
  { echo "run_file_data_accuracy: writing the files failed" >&2; exit 1; }
source bench/machine_line.sh
echo "# bench/run_file_data_accuracy.sh --seeds $SEEDS --limit $LIMIT; $(machine_line /usr/bin/python3)"

# cohort MODEL SEED: one 2-worker cohort train run on the files; its test accuracy (percent).
cohort_run() {
  local model=$1 seed=$2 toml=examples/fashion_mlp.toml
  local data=(--set data.dataset=csv --set data.path="$OUT/data/train.csv"
              --set data.eval_path="$OUT/data/test.csv" --set data.label_column=label)
  if [ "$model" = cnn ]; then
    toml=examples/fashion_cnn.toml
    data=(--set data.dataset=numpy --set data.path="$OUT/data/fashion.npz")
  fi
  # Pixels 0-255 standardised as cohort's Fashion-MNIST reader does: 0.2860 and 0.3530 of 255.
  timeout -k 10 900 "$COHORT" train "$toml" --workers 2 "${data[@]}" --set data.mean=72.93 \
    --set data.std=90.015 --set run.seed="$seed" --set run.threads=1 --set run.progress=none \
    --set run.dir="$OUT/runs" --set run.name="$model-$seed" >"$OUT/log" 2>&1 ||
    { tail -5 "$OUT/log" >&2; echo failed; return; }
  sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$OUT/log" | tail -1
}

torch_run() {  # MODEL SEED: PyTorch DDP on gloo, the same model and images
  local log=$OUT/torch.log
  timeout -k 10 900 "$COHORT" run -n 2 -- /usr/bin/python3 bench/torch_ddp_accuracy.py \
    --backend gloo --model "$1" --seed "$2" --limit "$LIMIT" >"$log" 2>&1 ||
    { tail -5 "$log" >&2; echo failed; return; }
  /usr/bin/python3 -c 'import json, re, sys
for line in open(sys.argv[1]):
    m = re.search(r"\{.*\}", line)
    if m: print("%.2f" % (100 * json.loads(m.group(0))["accuracy"]))' "$log"
}

status=0
for model in mlp cnn; do
  fmt=$([ $model = mlp ] && echo csv || echo npz)
  c=() t=()
  for ((seed = 0; seed < SEEDS; seed++)); do
    c+=("$(cohort_run $model $seed)")
    t+=("$(torch_run $model $seed)")
    echo "  $model seed $seed: cohort ($fmt) ${c[-1]}%, torch ${t[-1]}%" >&2
  done
  /usr/bin/python3 - "$model" "$fmt" "${c[*]}" "${t[*]}" <<'PY' || status=1
import sys
model, fmt, c, t = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
if "failed" in c + t or not c or not t:
    print(f"{model}: a run failed: cohort {c}, torch {t}")
    sys.exit(1)
mc, mt = sum(map(float, c)) / len(c), sum(map(float, t)) / len(t)
ok = abs(mc - mt) <= 0.5
print(f"{model:4} on {fmt}: cohort {mc:.2f}% (seeds {', '.join(c)}), PyTorch {mt:.2f}% "
      f"(seeds {', '.join(t)}), difference {mc - mt:+.2f} points (goal within 0.5) "
      f"{'PASS' if ok else 'FAIL'}")
PY
done
exit $status
