#!/usr/bin/env bash
# Communication-efficient training on a slow link (docs/decentralized.md, docs/compression.md):
# two "hosts" (network namespaces joined by a veth pair, `tc qdisc ... tbf rate RATE` on both
# ends), one worker in each, the native TCP backend between them. For every method this build
# has, the wall time until the test accuracy (evaluated every --eval-every steps) first reaches
# --target, and the final accuracy:
#
#   ddp                      plain data parallelism (the baseline)
#   local_sgd H=8            parallel.strategy = local_sgd, local_sgd.period = 8  (if built)
#   gossip                   parallel.strategy = gossip (a ring of 2: neighbour averaging)
#   fp16 / topk / powersgd   ddp.compression = ...                                (if built)
#
#   sudo bench/run_slow_link_bench.sh [--rate 100mbit] [--config examples/fashion_cnn.toml]
#        [--target 0.85] [--eval-every 100] [--epochs 1] [--repeats 1] [--methods "ddp gossip"]
#        [--build-dir DIR]
#
# Needs root (ip netns, tc). The namespaces are deleted on every way out. Issue 13's goal:
# PowerSGD or top-k and local SGD H=8 reach the target >= 2x sooner than ddp at 100 Mbit/s.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RATE=100mbit CONFIG="$ROOT/examples/fashion_cnn.toml" TARGET=0.85 EVAL_EVERY=100 EPOCHS=1
REPEATS=1 METHODS="" BUILD_DIR="$ROOT/build"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --rate) RATE="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    --target) TARGET="$2"; shift 2 ;;
    --eval-every) EVAL_EVERY="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --methods) METHODS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_slow_link_bench: unknown option '$1'" >&2; usage ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "run_slow_link_bench: needs root (ip netns, tc)" >&2; exit 1; }

cmake --build "$BUILD_DIR" --target cohort_cli >/dev/null
COHORT="$BUILD_DIR/bin/cohort"
PYTHON=/usr/bin/python3
KEYS="$("$COHORT" config docs)"
has_key() { [[ "$KEYS" == *"$1"* ]]; }

TAG="cs$$"
NS=("${TAG}a" "${TAG}b")
ADDR=(10.233.0.1 10.233.0.2)
TMP="$(mktemp -d)"
cleanup() {
  for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

# Two namespaces, a veth pair between them, the rate limit on both ends.
ip netns add "${NS[0]}"
ip netns add "${NS[1]}"
ip link add "v${TAG}a" netns "${NS[0]}" type veth peer name "v${TAG}b" netns "${NS[1]}"
for i in 0 1; do
  dev="v${TAG}$([ $i = 0 ] && echo a || echo b)"
  ip -n "${NS[$i]}" addr add "${ADDR[$i]}/24" dev "$dev"
  ip -n "${NS[$i]}" link set "$dev" up
  ip -n "${NS[$i]}" link set lo up
  ip netns exec "${NS[$i]}" tc qdisc add dev "$dev" root tbf rate "$RATE" burst 256kbit \
    latency 50ms
done

# The methods this build has.
if [ -z "$METHODS" ]; then
  METHODS="ddp gossip"
  has_key 'local_sgd.period' && METHODS+=" local_sgd"
  if has_key 'ddp.compression'; then
    for c in fp16 topk powersgd; do has_key "\`$c\`" && METHODS+=" $c"; done
  fi
fi
method_args() {
  case "$1" in
    ddp) echo "--set parallel.strategy=ddp" ;;
    gossip) echo "--set parallel.strategy=gossip" ;;
    local_sgd) echo "--set parallel.strategy=local_sgd --set local_sgd.period=8" ;;
    fp16|topk|powersgd) echo "--set parallel.strategy=ddp --set ddp.compression=$1" ;;
    *) echo "run_slow_link_bench: unknown method '$1'" >&2; exit 2 ;;
  esac
}

# run_method NAME METHOD: both "hosts" at once; prints the job's wall time.
run_method() {
  local name="$1" method="$2" port=$((20000 + RANDOM % 20000)) t0 t1 pids=()
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
      --set "run.dir=$TMP" --set "run.name=$name" $(method_args "$method") \
      >"$TMP/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  t1=$(date +%s.%N)
  if [ "$failed" = 1 ]; then
    echo "run_slow_link_bench: $name failed:" >&2; tail -20 "$TMP/$name".*.log >&2; exit 1
  fi
  awk "BEGIN {print $t1 - $t0}"
}

# time_to TARGET METRICS: time_s of the first eval at or above TARGET ("-" if never), and the
# last eval's accuracy.
evals() {
  "$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
target, path = float(sys.argv[1]), sys.argv[2]
first, last = "-", 0.0
for line in open(path):
    r = json.loads(line)
    if r.get("event") != "eval":
        continue
    last = r["accuracy"]
    if first == "-" and last >= target:
        first = "%.1f" % r["time_s"]
print(first, "%.4f" % last)
EOF
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; link: veth, tbf $RATE"
echo "config: $CONFIG, $EPOCHS epoch(s), target $TARGET, eval every $EVAL_EVERY steps"
for r in $(seq "$REPEATS"); do
  for m in $METHODS; do
    wall=$(run_method "$m$r" "$m")
    read -r tt acc < <(evals "$TARGET" "$TMP/$m$r/metrics.jsonl")
    printf '  %-10s run %d: wall %6.1f s, time to %s: %6s s, final accuracy %s\n' \
      "$m" "$r" "$wall" "$TARGET" "$tt" "$acc"
  done
done
