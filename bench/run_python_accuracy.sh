#!/usr/bin/env bash
# Issue 34's accuracy claims, side by side in one run: a torchrun DDP script on gloo and on
# cohort's backend (bench/torch_ddp_accuracy.py: only --backend differs), and Horovod's
# example script with cohort's Horovod API (examples/python/horovod_mnist_style.py, one changed
# import) against the same script on gloo (bench/horovod_gloo_peer.py: Horovod is not a Debian
# package). 2 workers under `cohort run`, one thread each, every seed; prints the test accuracy
# of each run, the mean per row, and cohort's difference from gloo in points (the claim: within
# 0.3 points, mean of 3 seeds).
#
#   bench/run_python_accuracy.sh [--seeds N] [--limit SAMPLES] [--epochs E] [--smoke]
# --smoke: 1 seed, 2,000 samples (a check of the script, not a measurement).
set -uo pipefail
cd "$(dirname "$0")/.."

SEEDS=3 LIMIT=0 EPOCHS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --smoke) SEEDS=1 LIMIT=2000; shift ;;
    *) echo "run_python_accuracy: unknown argument $1" >&2; exit 2 ;;
  esac
done
BUILD=$(realpath "${COHORT_BUILD_DIR:-build}")  # CTest names its build folder
COHORT=$BUILD/bin/cohort
[ -x "$COHORT" ] || { echo "run_python_accuracy: build $COHORT first" >&2; exit 1; }
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
/usr/bin/python3 -c 'import cohort.torch; assert cohort.torch.is_available()' 2>/dev/null ||
  { echo "run_python_accuracy: no cohort torch backend in build/python (build cohort_torch)" >&2; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One 2-worker job; its accuracy (a fraction) on stdout, or "failed".
job() {  # log command...
  local log=$1
  shift
  timeout -k 10 900 "$COHORT" run -n 2 -- /usr/bin/python3 "$@" >"$log" 2>&1 || { echo failed; return; }
  /usr/bin/python3 - "$log" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
m = re.findall(r'"accuracy": ([0-9.]+)', text) or \
    [str(float(v) / 100) for v in re.findall(r"test accuracy ([0-9.]+)%", text)]
print(m[-1] if m else "failed")
PY
}

echo "== machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
ROWS=$OUT/rows
for seed in $(seq 1 "$SEEDS"); do
  common=(--seed "$seed" --epochs "$EPOCHS")
  [ "$LIMIT" != 0 ] && common+=(--limit "$LIMIT")
  for backend in gloo cohort; do
    acc=$(job "$OUT/ddp-$backend-$seed.log" bench/torch_ddp_accuracy.py --backend "$backend" "${common[@]}")
    echo "ddp $backend $seed $acc" | tee -a "$ROWS"
  done
  acc=$(job "$OUT/hvd-gloo-$seed.log" bench/horovod_gloo_peer.py examples/python/horovod_mnist_style.py "${common[@]}")
  echo "horovod gloo $seed $acc" | tee -a "$ROWS"
  acc=$(job "$OUT/hvd-cohort-$seed.log" examples/python/horovod_mnist_style.py "${common[@]}")
  echo "horovod cohort $seed $acc" | tee -a "$ROWS"
done

/usr/bin/python3 - "$ROWS" "$SEEDS" "$LIMIT" "$EPOCHS" <<'PY'
import collections, statistics, sys
rows, seeds, limit, epochs = sys.argv[1], *sys.argv[2:]
acc = collections.defaultdict(list)
failed = []
for line in open(rows):
    script, backend, seed, value = line.split()
    (failed.append(f"{script} {backend} seed {seed}") if value == "failed"
     else acc[(script, backend)].append(float(value)))
print(f"\n2 workers, {seeds} seed(s), {'all' if limit == '0' else limit} training samples, "
      f"{epochs} epoch(s)\n")
print("| script | gloo, mean test accuracy | cohort | cohort - gloo (points) | within 0.3 |")
print("|---|---|---|---|---|")
ok = True
for script, what in (("ddp", "torchrun DDP (bench/torch_ddp_accuracy.py)"),
                     ("horovod", "Horovod's example (examples/python/horovod_mnist_style.py)")):
    g, c = acc.get((script, "gloo")), acc.get((script, "cohort"))
    if not g or not c:
        print(f"| {what} | {g and statistics.fmean(g)} | {c and statistics.fmean(c)} | n/a | n/a |")
        ok = False
        continue
    d = 100 * (statistics.fmean(c) - statistics.fmean(g))
    ok &= abs(d) <= 0.3
    print(f"| {what} | {100 * statistics.fmean(g):.2f}% | {100 * statistics.fmean(c):.2f}% | "
          f"{d:+.2f} | {'yes' if abs(d) <= 0.3 else 'NO'} |")
if failed:
    print("\nfailed runs: " + ", ".join(failed))
sys.exit(0 if ok and not failed else 1)
PY
