#!/usr/bin/env bash
# Recovery time and work lost when a worker dies (issue 36, docs/elastic.md "Recovery time,
# beside torchrun"): cohort's in-place recovery (elastic.min_workers) against torch's elastic
# agent (torchrun --max_restarts 1, restarting every worker from a checkpoint written every 50
# steps: bench/torch_elastic_peer.py), the same MLP 784-128-10 on Fashion-MNIST, batch 64 per
# rank, one thread per worker.
#
# For each world size W, N separate short jobs per framework, each killing one worker once with
# SIGKILL: run i kills rank 1 + i mod (W-1) (never rank 0) right after step S, S spread over
# 60..80, and trains on to step S+20.
#   recovery: the kill to the survivors' next completed step, less the run's median step time
#     (what the kill cost): cohort: time_s(step S+1) - time_s(step S) in rank 0's metrics.jsonl,
#     with its membership record's recover_s beside it; torchrun: the wall time of the first step
#     completed after the restart - that of step S on the first attempt.
#   cohort runs with elastic.fixed_batch = false (each survivor keeps its batch): the time
#   measured is recovery alone, not the longer steps of survivors that compute a lost worker's
#   slots of a fixed global batch (docs/elastic.md).
#   samples of work lost: cohort: the failed step's global batch, W x 64 (in-place recovery redoes
#     only the step in flight; checked: the steps of metrics.jsonl run 1..S+20, each once);
#     torchrun: the steps redone after loading the checkpoint (S - its step, read from the log)
#     x W x 64 + the failed step's W x 64.
# Prints per world size the medians (min, max), the ratios torchrun/cohort and PASS/FAIL against
# the goals: cohort <= 1 s; no larger at 8 ranks than at 4; >= 10x faster; >= 5x fewer samples
# lost.
#
#   bench/run_elastic_recovery.sh [--kills N (10)] [--ranks "4 8"] [--busy] [--smoke]
# --busy: one busy process (`yes`, pinned to CPU 0) runs beside every job.
# --smoke: 2 kills, 4 ranks, 5 steps after the kill (a check of the script, not a measurement).
# Exits 1 when a run fails (77: skipped, without torch or the data); a missed goal is reported,
# not an error.
set -uo pipefail
cd "$(dirname "$0")/.."

KILLS=10 RANKS="4 8" AFTER=20 BUSY=0 SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --kills) KILLS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --busy) BUSY=1; shift ;;
    --smoke) KILLS=2 RANKS=4 AFTER=5 SMOKE=1; shift ;;
    *) echo "run_elastic_recovery: unknown argument $1" >&2; exit 2 ;;
  esac
done
BUILD=$(realpath "${COHORT_BUILD_DIR:-build}")
COHORT=$BUILD/bin/cohort
[ -x "$COHORT" ] || { echo "run_elastic_recovery: build $COHORT first" >&2; exit 1; }
# The peer needs PyTorch and both sides the Fashion-MNIST files: without them, skip (77).
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
  { echo "run_elastic_recovery: skipped: /usr/bin/python3 has no torch" >&2; exit 77; }
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  { echo "run_elastic_recovery: skipped: no /usr/share/datasets/fashion-mnist" >&2; exit 77; }
export OMP_NUM_THREADS=1
OUT=$(mktemp -d)
BUSY_PID=
cleanup() {
  [ -n "$BUSY_PID" ] && kill "$BUSY_PID" 2>/dev/null
  rm -rf "$OUT"
}
trap cleanup EXIT
source bench/machine_line.sh
ARGS="--kills $KILLS --ranks \"$RANKS\""
[ $BUSY = 1 ] && ARGS+=" --busy"
[ $SMOKE = 1 ] && ARGS="--smoke"
echo "# bench/run_elastic_recovery.sh $ARGS; $(machine_line /usr/bin/python3)"
if [ $BUSY = 1 ]; then
  taskset -c 0 yes >/dev/null &
  BUSY_PID=$!
  echo "# beside every job: one busy process (yes, pinned to CPU 0)"
fi

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# cohort W K S NAME: one job; prints "recovery recover_s lost" or "failed WHY".
cohort_run() {
  local w=$1 k=$2 s=$3 name=$4
  timeout -k 10 300 "$COHORT" train /dev/null --workers "$w" --set data.dataset=fashion_mnist \
    --set 'model.hidden=[128]' --set data.batch_size=64 --set run.threads=1 \
    --set run.log_every=1 --set run.progress=none --set elastic.min_workers=2 \
    --set elastic.fixed_batch=false \
    --set fault.kill_rank="$k" --set fault.kill_at_step="$s" --set train.max_steps=$((s + AFTER)) \
    --set ckpt.enabled=false --set run.dir="$OUT/runs" --set run.name="$name" \
    >"$OUT/$name.log" 2>&1 || { tail -5 "$OUT/$name.log" >&2; echo "failed: exit status"; return; }
  /usr/bin/python3 - "$OUT/runs/$name/metrics.jsonl" "$w" "$s" $((s + AFTER)) <<'PY'
import json, statistics, sys
path, w, s, last = sys.argv[1], *map(int, sys.argv[2:])
recs = [json.loads(l) for l in open(path)]
steps = [r for r in recs if r.get("event") == "step"]
members = [r for r in recs if r.get("event") == "membership"]
numbers = [r["step"] for r in steps]
if numbers != list(range(1, last + 1)):
    sys.exit(print(f"failed: steps logged are not 1..{last} each once"))
if len(members) != 1 or members[0]["step"] != s:
    sys.exit(print(f"failed: not one membership record at step {s}: {members}"))
t = [r["time_s"] for r in steps]
gaps = [b - a for a, b in zip(t, t[1:])]
print(f"{t[s] - t[s - 1] - statistics.median(gaps):.4f} {members[0]['recover_s']:.4f} {w * 64}")
PY
}

# torchrun W K S NAME: one job; prints "recovery lost back" (back: step S to step S+1, the
# redone steps included) or "failed WHY".
torch_run() {
  local w=$1 k=$2 s=$3 name=$4
  mkdir -p "$OUT/$name"
  timeout -k 10 600 /usr/bin/python3 tests/docs/torchrun_compat.py --nproc_per_node "$w" \
    --max_restarts 1 --monitor_interval 0.1 --rdzv_backend c10d \
    --rdzv_endpoint 127.0.0.1:"$(free_port)" bench/torch_elastic_peer.py \
    --steps $((s + AFTER)) --ckpt-every 50 --kill-rank "$k" --kill-at-step "$s" \
    --ckpt "$OUT/$name/ckpt.pt" --log "$OUT/$name/steps.jsonl" >"$OUT/$name.log" 2>&1 ||
    { tail -5 "$OUT/$name.log" >&2; echo "failed: exit status"; return; }
  /usr/bin/python3 - "$OUT/$name/steps.jsonl" "$w" "$s" $((s + AFTER)) <<'PY'
import json, statistics, sys
path, w, s, last = sys.argv[1], *map(int, sys.argv[2:])
recs = [json.loads(l) for l in open(path)]
a0 = [r for r in recs if r["attempt"] == 0]
a1 = [r for r in recs if r["attempt"] == 1]
if not a0 or a0[-1]["step"] != s or not a1 or a1[-1]["step"] != last:
    sys.exit(print(f"failed: attempt 0 did not end at step {s} or attempt 1 at {last}"))
gaps = [b["wall"] - a["wall"] for run in (a0, a1) for a, b in zip(run, run[1:])]
recovery = a1[0]["wall"] - a0[-1]["wall"] - statistics.median(gaps)
redone = s - (a1[0]["step"] - 1)  # the steps done again after loading the checkpoint
back = next(r["wall"] for r in a1 if r["step"] == s + 1) - a0[-1]["wall"]  # to step S+1 again
print(f"{recovery:.4f} {(redone + 1) * w * 64} {back:.4f}")
PY
}

status=0
for w in $RANKS; do
  : >"$OUT/results.$w"
  for ((i = 0; i < KILLS; i++)); do
    k=$((1 + i % (w - 1)))
    s=$((60 + (KILLS > 1 ? i * 20 / (KILLS - 1) : 0)))
    c=$(cohort_run "$w" "$k" "$s" "c$w-$i")
    t=$(torch_run "$w" "$k" "$s" "t$w-$i")
    echo "  $w ranks, kill $i: rank $k after step $s: cohort $c; torchrun $t" >&2
    case "$c $t" in *failed*) status=1 ;; esac
    echo "$k $s $c | $t" >>"$OUT/results.$w"
  done
done

/usr/bin/python3 - "$OUT" $RANKS <<'PY' || status=1
import statistics, sys
out, sizes = sys.argv[1], [int(w) for w in sys.argv[2:]]
ok = lambda b: "PASS" if b else "FAIL"
med, failed = {}, False
for w in sizes:
    rows = [l.split("|") for l in open(f"{out}/results.{w}")]
    good = [(c.split(), t.split()) for c, t in rows if "failed" not in c + t]
    if len(good) < len(rows):
        print(f"{w} ranks: {len(rows) - len(good)} of {len(rows)} runs failed")
        failed = True
    if not good:
        continue
    ks = sorted({int(c[0]) for c, _ in good})
    ss = sorted({int(c[1]) for c, _ in good})
    cr = [float(c[2]) for c, _ in good]
    cs = [float(c[3]) for c, _ in good]
    cl = [int(c[4]) for c, _ in good]
    tr = [float(t[0]) for _, t in good]
    tl = [int(t[1]) for _, t in good]
    tb = [float(t[2]) for _, t in good]
    mc, mt, mcl, mtl = map(statistics.median, (cr, tr, cl, tl))
    med[w] = mc
    print(f"{w} ranks, {len(good)} kills (rank {ks[0]}-{ks[-1]} after step {ss[0]}-{ss[-1]}):")
    print(f"  recovery, the kill to the survivors' next completed step less a step time:")
    print(f"    cohort   median {mc:.3f} s (min {min(cr):.3f}, max {max(cr):.3f}); "
          f"membership recover_s median {statistics.median(cs):.3f} s "
          f"(min {min(cs):.3f}, max {max(cs):.3f})")
    print(f"    torchrun median {mt:.3f} s (min {min(tr):.3f}, max {max(tr):.3f}); from step S "
          f"to step S+1 again, the redone steps included, median {statistics.median(tb):.3f} s")
    print(f"    torchrun / cohort {mt / mc:.1f}x" if mc > 0 else "    torchrun / cohort: n/a")
    print(f"  samples of work lost: cohort median {mcl:.0f} (the failed step), torchrun median "
          f"{mtl:.0f} (min {min(tl)}, max {max(tl)}: the steps since the checkpoint + the "
          f"failed step); {mtl / mcl:.1f}x fewer")
    print(f"  goals: cohort <= 1 s {ok(mc <= 1)}; >= 10x faster {ok(mt >= 10 * mc)}; "
          f">= 5x fewer samples lost {ok(mtl >= 5 * mcl)}")
if 4 in med and 8 in med:
    print(f"cohort at 8 ranks no slower than at 4: median {med[8]:.3f} s against "
          f"{med[4]:.3f} s {ok(med[8] <= med[4])}")
sys.exit(1 if failed else 0)
PY
exit $status
