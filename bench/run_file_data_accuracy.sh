#!/usr/bin/env bash
# Your own data and model without C++ (issue 35, docs/data.md, docs/models.md): Fashion-MNIST
# written as a CSV file, a .npz and a folder of 32x32 RGB PNG images (bench/fashion_to_files.py),
# trained by `cohort train --workers 2`, against PyTorch DDP on gloo training the same model on
# the same files (bench/torch_ddp_accuracy.py, 2 ranks, batch 64 per rank, the same SGD), for
# every seed. Prints each run's test accuracy, the mean per row, and cohort's difference from
# PyTorch (the claim: within 0.5 points, mean of 3 seeds).
#
# Rows (--rows): `builtin` trains cohort's MLP on the CSV and its CNN on the .npz (PyTorch: the
# same layers); `sequential` trains a model given as a layer list (model.type = "sequential") on
# each of the three formats, PyTorch the torch.nn.Sequential of the same list
# (cohort.torch.sequential).
#
#   bench/run_file_data_accuracy.sh [--seeds N] [--limit IMAGES] [--rows builtin|sequential|all]
#                                   [--smoke]
# --smoke: 1 seed, 2,000 images per split, every row (a check of the script, not a measurement).
# Exits 1 when a run fails; a missed goal is reported, not an error.
set -uo pipefail
cd "$(dirname "$0")/.."

SEEDS=3 LIMIT=0 ROWS=all
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
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
IMAGES=()
[ "$ROWS" != builtin ] && IMAGES=(--images)
/usr/bin/python3 bench/fashion_to_files.py "$OUT/data" --limit "$LIMIT" "${IMAGES[@]}" >&2 ||
  { echo "run_file_data_accuracy: writing the files failed" >&2; exit 1; }
source bench/machine_line.sh
echo "# bench/run_file_data_accuracy.sh --seeds $SEEDS --limit $LIMIT --rows $ROWS;" \
  "$(machine_line /usr/bin/python3)"

# The layer lists of the sequential rows: an MLP on flat rows (flatten: a no-op on the CSV's
# [784], PyTorch's images [1, 28, 28] made flat), CNNs on the .npz's [1, 28, 28] and the PNGs'
# [3, 32, 32].
SEQ_MLP="flatten; linear 256; relu; linear 128; relu; linear"
SEQ_CNN="conv2d 16 kernel=3 padding=1; batchnorm; relu; maxpool 2; conv2d 32 kernel=3 padding=1; relu; maxpool 2; flatten; linear 64; relu; linear"
# PNG pixels are read as x / 255; both sides then standardise with these.
IMG_MEAN=0.2 IMG_STD=0.3
CSV=(--set data.dataset=csv --set data.path="$OUT/data/train.csv"
     --set data.eval_path="$OUT/data/test.csv" --set data.label_column=label)
NPZ=(--set data.dataset=numpy --set data.path="$OUT/data/fashion.npz")
PNG=(--set data.dataset=image_folder --set data.path="$OUT/data/images/train"
     --set data.eval_path="$OUT/data/images/test" --set data.mean=$IMG_MEAN --set data.std=$IMG_STD)
# Pixels 0-255 standardised as cohort's Fashion-MNIST reader does: 0.2860 and 0.3530 of 255.
RAW=(--set data.mean=72.93 --set data.std=90.015)

# cohort ROW SEED: one 2-worker cohort train run; its test accuracy (percent).
cohort_run() {
  local row=$1 seed=$2 toml=examples/fashion_mlp.toml args=()
  case $row in
    mlp) args=("${CSV[@]}" "${RAW[@]}") ;;
    cnn) toml=examples/fashion_cnn.toml args=("${NPZ[@]}" "${RAW[@]}") ;;
    seq-mlp) args=("${CSV[@]}" "${RAW[@]}" --set model.type=sequential --set "model.layers=$SEQ_MLP") ;;
    seq-cnn) toml=examples/fashion_cnn.toml
      args=("${NPZ[@]}" "${RAW[@]}" --set model.type=sequential --set "model.layers=$SEQ_CNN") ;;
    seq-png) toml=examples/fashion_cnn.toml
      args=("${PNG[@]}" --set model.type=sequential --set "model.layers=$SEQ_CNN") ;;
  esac
  timeout -k 10 1800 "$COHORT" train "$toml" --workers 2 "${args[@]}" --set run.seed="$seed" \
    --set run.threads=1 --set run.progress=none --set run.dir="$OUT/runs" \
    --set run.name="$row-$seed" >"$OUT/log" 2>&1 ||
    { tail -5 "$OUT/log" >&2; echo failed; return; }
  sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$OUT/log" | tail -1
}

torch_run() {  # ROW SEED: PyTorch DDP on gloo, the same model and images
  local row=$1 seed=$2 args=()
  case $row in
    mlp|cnn) args=(--model "$row") ;;
    seq-mlp) args=(--layers "$SEQ_MLP" --lr 0.05) ;;
    seq-cnn) args=(--layers "$SEQ_CNN") ;;
    seq-png) args=(--layers "$SEQ_CNN" --images "$OUT/data/images" --mean $IMG_MEAN --std $IMG_STD) ;;
  esac
  local log=$OUT/torch.log
  timeout -k 10 1800 "$COHORT" run -n 2 -- /usr/bin/python3 bench/torch_ddp_accuracy.py \
    --backend gloo --seed "$seed" --limit "$LIMIT" "${args[@]}" >"$log" 2>&1 ||
    { tail -5 "$log" >&2; echo failed; return; }
  /usr/bin/python3 -c 'import json, re, sys
for line in open(sys.argv[1]):
    m = re.search(r"\{.*\}", line)
    if m: print("%.2f" % (100 * json.loads(m.group(0))["accuracy"]))' "$log"
}

format_of() {
  case $1 in mlp|seq-mlp) echo csv ;; cnn|seq-cnn) echo npz ;; seq-png) echo png ;; esac
}

case $ROWS in
  builtin) LIST="mlp cnn" ;;
  sequential) LIST="seq-mlp seq-cnn seq-png" ;;
  *) LIST="mlp cnn seq-mlp seq-cnn seq-png" ;;
esac
status=0
for row in $LIST; do
  fmt=$(format_of "$row")
  c=() t=()
  for ((seed = 0; seed < SEEDS; seed++)); do
    c+=("$(cohort_run "$row" $seed)")
    t+=("$(torch_run "$row" $seed)")
    echo "  $row seed $seed: cohort ($fmt) ${c[-1]}%, torch ${t[-1]}%" >&2
  done
  /usr/bin/python3 - "$row" "$fmt" "${c[*]}" "${t[*]}" <<'PY' || status=1
import sys
row, fmt, c, t = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
if "failed" in c + t or not c or not t:
    print(f"{row}: a run failed: cohort {c}, torch {t}")
    sys.exit(1)
mc, mt = sum(map(float, c)) / len(c), sum(map(float, t)) / len(t)
ok = abs(mc - mt) <= 0.5
print(f"{row:7} on {fmt}: cohort {mc:.2f}% (seeds {', '.join(c)}), PyTorch {mt:.2f}% "
      f"(seeds {', '.join(t)}), difference {mc - mt:+.2f} points (goal within 0.5) "
      f"{'PASS' if ok else 'FAIL'}")
PY
done
exit $status
