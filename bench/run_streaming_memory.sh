#!/usr/bin/env bash
# Data larger than memory (issue 35, docs/data.md "Data larger than memory"): a data set at
# least 4x run.memory_limit_mb, as a directory of .npy files, as a .npz (np.savez, stored) and
# as a CSV file, trains one epoch with `cohort train --workers 2` under the cap. Prints, per
# format, each worker's tensor peak and its process's peak resident memory (VmHWM) from the
# summary records, and first the same for a tiny data set: what a worker holds before it reads
# any data (code, libraries, thread stacks), which a cap must leave room for.
#
#   bench/run_streaming_memory.sh [--cap-mb MB] [--formats "npy npz csv"] [--dir DIR]
#
# The rows: 784 float32 features (uniform in [-1, 1), 1,009 distinct rows repeated) and a label
# from the signs of the first two, so that the model learns. The CSV holds the same values as
# text (4 decimals); its reader parses every row once when it opens the file (both workers do),
# which takes most of its run. Exits 1 when a run fails or a peak is over the cap.
set -uo pipefail
cd "$(dirname "$0")/.."

CAP=256 FORMATS="npy npz csv" DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cap-mb) CAP=$2; shift 2 ;;
    --formats) FORMATS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    *) echo "run_streaming_memory: unknown argument $1" >&2; exit 2 ;;
  esac
done
BUILD=$(realpath "${COHORT_BUILD_DIR:-build}")
COHORT=$BUILD/bin/cohort
[ -x "$COHORT" ] || { echo "run_streaming_memory: build $COHORT first" >&2; exit 1; }
if [ -z "$DIR" ]; then
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
mkdir -p "$DIR"

# write FORMAT PATH BYTES: a data set of at least BYTES in FORMAT at PATH.
write() {
  /usr/bin/python3 - "$@" <<'EOF'
import os, sys
import numpy as np
fmt, path, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
pool = np.random.default_rng(0).uniform(-1, 1, (1009, 784)).astype(np.float32)
labels = ((pool[:, 0] > 0).astype(np.int64) + 2 * (pool[:, 1] > 0)).astype(np.int64)
if fmt == "csv":
    lines = [",".join("%.4f" % v for v in row) + ",%d\n" % y for row, y in zip(pool, labels)]
    block = "".join(lines).encode()
    with open(path, "wb") as f:
        for _ in range(-(-want // len(block))):
            f.write(block)
    sys.exit(0)
reps = -(-want // pool.nbytes)
x = np.lib.format.open_memmap(path + ".x.tmp.npy", "w+", np.float32, (reps * len(pool), 784))
for r in range(reps):
    x[r * len(pool):(r + 1) * len(pool)] = pool
x.flush()
y = np.tile(labels, reps)
if fmt == "npy":
    os.makedirs(path, exist_ok=True)
    os.replace(path + ".x.tmp.npy", os.path.join(path, "x.npy"))
    np.save(os.path.join(path, "y.npy"), y)
else:  # np.savez stores (no compression): cohort maps the members in place
    np.savez(path, x=np.load(path + ".x.tmp.npy", mmap_mode="r"), y=y)
    os.remove(path + ".x.tmp.npy")
EOF
}

# run NAME DATA-ARGS... CAP: one epoch, 2 workers; prints "seconds" on success.
run() {
  local name=$1 cap=$2; shift 2
  local t0
  t0=$(date +%s%N)
  "$COHORT" train examples/fashion_mlp.toml --workers 2 --set model.hidden=[32] "$@" \
    --set data.batch_size=1024 --set train.epochs=1 --set optim.lr=0.1 --set run.progress=none \
    --set ckpt.enabled=false --set run.dir="$DIR/runs" --set run.name="$name" \
    --set run.memory_limit_mb="$cap" >"$DIR/$name.log" 2>&1 ||
    { tail -5 "$DIR/$name.log" >&2; return 1; }
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$((ms / 1000)).$((ms % 1000 / 100))"
}

# peaks NAME CAP-MB: each rank's tensor and process peaks; exit 1 when one is over the cap.
peaks() {
  /usr/bin/python3 - "$DIR/runs/$1" "$2" <<'EOF'
import json, sys
run, cap = sys.argv[1], int(sys.argv[2]) << 20
out, ok = [], True
for rank, f in enumerate(["metrics.jsonl", "metrics.rank1.jsonl"]):
    s = [json.loads(l) for l in open(f"{run}/{f}") if '"summary"' in l][-1]
    t, r = s["memory_peak_run_bytes"], s["process_peak_rss_bytes"]
    ok = ok and (cap == 0 or (t <= cap and r <= cap))
    out.append("rank %d: tensor peak %.1f MiB, process peak RSS %.1f MiB" % (rank, t / 2**20, r / 2**20))
print("; ".join(out) + ("" if cap == 0 else (", under the cap" if ok else ", OVER THE CAP")))
sys.exit(0 if ok else 1)
EOF
}

source bench/machine_line.sh
echo "# bench/run_streaming_memory.sh --cap-mb $CAP --formats \"$FORMATS\"; $(machine_line)"
echo "# each run: cohort train examples/fashion_mlp.toml --workers 2 --set model.hidden=[32]" \
  "--set data.dataset=FORMAT --set data.path=PATH --set data.batch_size=1024" \
  "--set train.epochs=1 --set optim.lr=0.1 --set run.memory_limit_mb=CAP"
status=0
write npy "$DIR/small" $((4000 * 3136)) || exit 1
s=$(run baseline 0 --set data.dataset=numpy --set data.path="$DIR/small") || exit 1
echo "baseline: 4,000 rows (12 MiB) of .npy, no cap, ${s}s: $(peaks baseline 0)"
for fmt in $FORMATS; do
  case $fmt in
    npy) path=$DIR/data_npy args=(--set data.dataset=numpy --set data.path="$path") ;;
    npz) path=$DIR/data.npz args=(--set data.dataset=numpy --set data.path="$path") ;;
    csv) path=$DIR/data.csv args=(--set data.dataset=csv --set data.path="$path"
           --set data.header=false) ;;
    *) echo "run_streaming_memory: unknown format $fmt" >&2; exit 2 ;;
  esac
  write "$fmt" "$path" $((4 * CAP << 20)) || exit 1
  mib=$(( $(du -sb "$path" | cut -f1) >> 20 ))
  s=$(run "$fmt" "$CAP" "${args[@]}") || { status=1; echo "$fmt: the run failed"; continue; }
  line=$(peaks "$fmt" "$CAP") || status=1
  echo "$fmt: $mib MiB ($(( mib * 10 / CAP / 10 )).$(( mib * 10 / CAP % 10 ))x the $CAP MiB cap)," \
    "1 epoch ${s}s: $line"
  rm -rf "$path"
done
exit $status
