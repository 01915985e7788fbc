#!/usr/bin/env bash
# Communication-efficient training on a slow link (docs/compression.md, docs/decentralized.md):
# two "hosts" (network namespaces joined by a veth pair, `tc qdisc ... tbf rate RATE` on both
# ends), one worker in each, the native TCP backend between them. For every method, at every
# rate: the training time (evaluations excluded) until the test accuracy, evaluated every
# --eval-every steps, first reaches --target, training samples/s and the final accuracy; then
# the medians over --repeats (repeat r runs seed r - 1, cohort's run.seed and torch's, so the
# accuracy spread is over seeds), each method's ratio to ddp, and cohort against PyTorch.
#
#   ddp                      plain data parallelism (the baseline)
#   local_sgd                parallel.strategy = local_sgd, local_sgd.period = 8
#   gossip                   parallel.strategy = gossip (a ring of 2: neighbour averaging)
#   fp16 / topk / powersgd   ddp.compression = ... (top-k 1%; PowerSGD rank --powersgd-rank,
#                            10 plain warm-up steps)
#   torch_ddp / torch_fp16 / torch_powersgd
#                            the peer: PyTorch DDP over gloo on the same link, model, batch,
#                            optimizer and hook (bench/torch_slow_link.py: PowerSGD at the same
#                            rank and warm-up); it evaluates once, at the end
#
#   sudo bench/run_compression_bench.sh [--rates "100mbit 1gbit"] [--repeats 3]
#        [--config examples/fashion_cnn.toml] [--target 0.85] [--eval-every 50] [--epochs 1]
#        [--methods "ddp powersgd torch_powersgd"] [--powersgd-rank 4] [--build-dir DIR]
#
# Needs root (ip netns, tc). The namespaces are deleted on every way out. Issue 13's goals at
# 100 Mbit/s: PowerSGD or top-k, and local SGD H=8, reach the target >= 2x sooner than ddp;
# cohort's PowerSGD samples/s >= 1.5x torch's, final accuracy within 0.5 points of it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RATES=100mbit CONFIG="$ROOT/examples/fashion_cnn.toml" TARGET=0.85 EVAL_EVERY=50 EPOCHS=1
REPEATS=1 METHODS="" BUILD_DIR="$ROOT/build" PSGD_RANK=4
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --rate|--rates) RATES="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    --target) TARGET="$2"; shift 2 ;;
    --eval-every) EVAL_EVERY="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --methods) METHODS="$2"; shift 2 ;;
    --powersgd-rank) PSGD_RANK="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_compression_bench: unknown option '$1'" >&2; usage ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "run_compression_bench: needs root (ip netns, tc)" >&2; exit 1; }
[ -n "$METHODS" ] ||
  METHODS="ddp local_sgd gossip fp16 topk powersgd torch_ddp torch_fp16 torch_powersgd"

cmake --build "$BUILD_DIR" --target cohort_cli >/dev/null
COHORT="$BUILD_DIR/bin/cohort"
PYTHON=/usr/bin/python3

TAG="cs$$"
NS=("${TAG}a" "${TAG}b")
DEVS=("v${TAG}a" "v${TAG}b")
ADDR=(10.233.0.1 10.233.0.2)
TMP="$(mktemp -d)"
cleanup() {
  for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

# Two namespaces, a veth pair between them.
ip netns add "${NS[0]}"
ip netns add "${NS[1]}"
ip link add "${DEVS[0]}" netns "${NS[0]}" type veth peer name "${DEVS[1]}" netns "${NS[1]}"
for i in 0 1; do
  ip -n "${NS[$i]}" addr add "${ADDR[$i]}/24" dev "${DEVS[$i]}"
  ip -n "${NS[$i]}" link set "${DEVS[$i]}" up
  ip -n "${NS[$i]}" link set lo up
done
# set_rate RATE: the tbf limit on both ends.
set_rate() {
  for i in 0 1; do
    ip netns exec "${NS[$i]}" tc qdisc replace dev "${DEVS[$i]}" root tbf rate "$1" \
      burst 256kbit latency 50ms
  done
}

method_args() {
  case "$1" in
    ddp) echo "--set parallel.strategy=ddp" ;;
    gossip) echo "--set parallel.strategy=gossip" ;;
    local_sgd) echo "--set parallel.strategy=local_sgd --set local_sgd.period=8" ;;
    fp16|topk) echo "--set parallel.strategy=ddp --set ddp.compression=$1" ;;
    powersgd) echo "--set parallel.strategy=ddp --set ddp.compression=powersgd" \
      "--set ddp.powersgd_rank=$PSGD_RANK --set ddp.powersgd_start_step=10" ;;
    *) echo "run_compression_bench: unknown method '$1'" >&2; exit 2 ;;
  esac
}

# wait_all NAME PID...: waits for the job's two processes; their logs on failure.
wait_all() {
  local name="$1" failed=0
  shift
  for p in "$@"; do wait "$p" || failed=1; done
  if [ "$failed" = 1 ]; then
    echo "run_compression_bench: $name failed:" >&2; tail -20 "$TMP/$name".*.log >&2; exit 1
  fi
}

# run_cohort NAME METHOD SEED: both "hosts" at once; prints the job's wall time.
run_cohort() {
  local name="$1" method="$2" seed="$3" port=$((20000 + RANDOM % 20000)) t0 t1 pids=()
  local secret
  secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  t0=$(date +%s.%N)
  for i in 0 1; do
    # shellcheck disable=SC2046
    COHORT_JOB_SECRET="$secret" ip netns exec "${NS[$i]}" "$COHORT" run --nnodes 2 \
      --node-rank "$i" --master "${ADDR[0]}:$port" -n 1 -- "$COHORT" train "$CONFIG" \
      --set run.threads=1 --set ckpt.enabled=false --set run.progress=none \
      --set "train.epochs=$EPOCHS" --set "train.eval_every=$EVAL_EVERY" \
      --set "comm.bind_address=${ADDR[$i]}" --set comm.timeout_s=600 \
      --set "run.dir=$TMP" --set "run.name=$name" --set "run.seed=$seed" \
      $(method_args "$method") \
      >"$TMP/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  wait_all "$name" "${pids[@]}"
  t1=$(date +%s.%N)
  awk "BEGIN {print $t1 - $t0}"
}

# run_torch NAME HOOK SEED: bench/torch_slow_link.py in both namespaces; its JSON line in
# NAME.json.
run_torch() {
  local name="$1" hook="$2" seed="$3" port=$((20000 + RANDOM % 20000)) pids=() model
  model="$(sed -n 's/^type *= *"\(.*\)"/\1/p' "$CONFIG" | head -1)"
  for i in 0 1; do
    ip netns exec "${NS[$i]}" "$PYTHON" "$ROOT/bench/torch_slow_link.py" --node-rank "$i" \
      --master "${ADDR[0]}:$port" --ifname "${DEVS[$i]}" --model "$model" --epochs "$EPOCHS" \
      --hook "$hook" --rank "$PSGD_RANK" --start-iter 10 --seed "$seed" \
      >"$TMP/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  wait_all "$name" "${pids[@]}"
  grep '^{' "$TMP/$name.0.log" >"$TMP/$name.json"
}

# cohort_results TARGET METRICS: the training seconds (train_s: evaluations excluded, they are
# the bench's probe) at the first eval at or above TARGET ("-" if never), rank 0's training
# samples/s and the last eval's accuracy.
cohort_results() {
  "$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
target, path = float(sys.argv[1]), sys.argv[2]
first, last, sps = "-", 0.0, "-"
for line in open(path):
    r = json.loads(line)
    if r.get("event") == "summary" and r.get("rank", 0) == 0:
        sps = "%.0f" % r["samples_per_s"]
    if r.get("event") != "eval":
        continue
    last = r["accuracy"]
    if first == "-" and last >= target:
        first = "%.1f" % r["train_s"]
print(first, sps, "%.4f" % last)
EOF
}

# one_run METHOD NAME SEED: prints "wall time_to samples_per_s accuracy" ("-": not measured).
one_run() {
  local m="$1" name="$2" seed="$3"
  if [[ "$m" == torch_* ]]; then
    local hook="${m#torch_}"
    [ "$hook" = ddp ] && hook=none
    run_torch "$name" "$hook" "$seed"
    "$PYTHON" -c 'import json, sys; r = json.load(open(sys.argv[1]))
print("%.1f - %.0f %.4f" % (r["seconds"], r["samples_per_s"], r["accuracy"]))' "$TMP/$name.json"
    return
  fi
  local wall
  wall=$(run_cohort "$name" "$m" "$seed")
  echo "$wall $(cohort_results "$TARGET" "$TMP/$name/metrics.jsonl")"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; link: veth + tbf"
echo "config: $CONFIG, $EPOCHS epoch(s), target $TARGET, eval every $EVAL_EVERY steps," \
  "PowerSGD rank $PSGD_RANK, $REPEATS repeat(s)"
RESULTS="$TMP/results"
for rate in $RATES; do
  set_rate "$rate"
  for r in $(seq "$REPEATS"); do
    for m in $METHODS; do
      read -r wall tt sps acc < <(one_run "$m" "$m.$rate.$r" $((r - 1)))
      printf '  %-8s %-15s run %d: wall %6.1f s, to %s: %6s s, %6s samples/s, accuracy %s\n' \
        "$rate" "$m" "$r" "$wall" "$TARGET" "$tt" "$sps" "$acc"
      echo "$rate $m $wall $tt $sps $acc" >>"$RESULTS"
    done
  done
done
"$PYTHON" "$ROOT/bench/compression_table.py" "$RESULTS" "$TARGET"
