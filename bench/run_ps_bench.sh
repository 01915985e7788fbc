#!/usr/bin/env bash
# Parameter servers (docs/ps.md), side by side in one run:
#
#  1. Throughput against a parameter server written the usual torch.distributed.rpc way
#     (bench/torch_rpc_ps.py: one server, asynchronous updates, push and pull in one round
#     trip): the Fashion-MNIST MLP, --workers workers, batch 64 each, one thread per process;
#     cohort with 1 server in ASP when this build has it (else BSP, said so). Goal: cohort >= 3x.
#  2. Time to accuracy with a straggler (needs ps.mode asp/ssp and fault.slow_rank; skipped with a
#     message otherwise): 4 workers, 2 servers, rank 1 slowed --slow-factor times; for BSP, ASP,
#     SSP(s=3) and BSP with one backup worker, the wall time until the test accuracy (evaluated
#     every --eval-every steps) first reaches --target, and the final accuracy after the same
#     number of steps. Goals: ASP and SSP >= 1.5x shorter than BSP, BSP+1 backup >= 1.3x shorter,
#     each final accuracy within 1 point of BSP.
#
#   bench/run_ps_bench.sh [--repeats R] [--workers N] [--steps N] [--slow-factor F]
#                         [--target 0.84] [--eval-every K] [--part 1|2|all] [--build-dir DIR]
#                         [--servers S] [--slow-rotate] [--set KEY=VALUE]...
#
# --slow-rotate: part 2 with a transient straggler instead of one slow worker: the slowed rank
# moves on every step (fault.slow_rotate), so each worker is slow one step in 4.
#
# --servers: part 1's cohort servers (1; torch's peer always has one). --set: passed to every
# cohort run (after the bench's own keys, so it wins), e.g. --set ps.overlap=false.
#
# Medians over --repeats (3) interleaved repeats. PyTorch is Debian's python3-torch through
# /usr/bin/python3 (or $COHORT_BENCH_PYTHON); without it part 1 prints cohort alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
REPEATS=3 WORKERS=2 STEPS=300 SLOW=3 TARGET=0.84 EVAL_EVERY=100 PART=all SERVERS=1 ROTATE=false
USER_SETS=()
BUILD_DIR="$ROOT/build"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --repeats) REPEATS="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --slow-factor) SLOW="$2"; shift 2 ;;
    --target) TARGET="$2"; shift 2 ;;
    --eval-every) EVAL_EVERY="$2"; shift 2 ;;
    --part) PART="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --servers) SERVERS="$2"; shift 2 ;;
    --slow-rotate) ROTATE=true; shift ;;
    --set) USER_SETS+=(--set "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_ps_bench: unknown option '$1'" >&2; usage ;;
  esac
done

cmake --build "$BUILD_DIR" --target cohort_cli >/dev/null
COHORT="$BUILD_DIR/bin/cohort"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
KEYS="$("$COHORT" config docs)"
has_key() { [[ "$KEYS" == *"$1"* ]]; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# median_of "a b - c": the median of the numbers in a list ("-": a run that never got there).
median_of() { tr ' ' '\n' | { grep -v '^-\?$' || true; } | median; }
calc() { awk "BEGIN {print $1}"; }

# cohort_ps NAME WORKERS SERVERS [--set k=v ...]: one run into $TMP/NAME; prints its wall time.
cohort_ps() {
  local name="$1" w="$2" s="$3"
  shift 3
  local t0 t1
  t0=$(date +%s.%N)
  if ! "$COHORT" train "$ROOT/examples/fashion_mlp_ps.toml" --workers "$w" --servers "$s" \
      --set run.threads=1 --set ckpt.enabled=false --set run.progress=none \
      --set "run.dir=$TMP" --set "run.name=$name" "$@" ${USER_SETS[@]+"${USER_SETS[@]}"} \
      >"$TMP/$name.log" 2>&1; then
    echo "run_ps_bench: cohort run $name failed:" >&2; tail -20 "$TMP/$name.log" >&2; exit 1
  fi
  t1=$(date +%s.%N)
  calc "$t1 - $t0"
}

# field FILE KEY: KEY of the summary record (last line) of a metrics file.
summary_field() { tail -1 "$1" | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }

part1() {
  local mode=bsp
  has_key '`asp`' && mode=asp
  echo "== 1. throughput: $WORKERS workers, $SERVERS server(s), batch 64, $STEPS steps (cohort ps.mode=$mode${USER_SETS[*]+ ${USER_SETS[*]}})"
  local ours=() theirs=() comm=() exposed=()
  for r in $(seq "$REPEATS"); do
    cohort_ps "tp$r" "$WORKERS" "$SERVERS" --set data.batch_size=64 --set "train.max_steps=$STEPS" \
      --set train.eval_batches=1 --set "ps.mode=$mode" >/dev/null
    ours+=("$(summary_field "$TMP/tp$r/metrics.jsonl" samples_per_s)")
    comm+=("$(summary_field "$TMP/tp$r/metrics.jsonl" comm_ms)")
    exposed+=("$(summary_field "$TMP/tp$r/metrics.jsonl" exposed_comm_ms)")
    if "$PYTHON" -c "import torch.distributed.rpc" 2>/dev/null; then
      theirs+=("$("$PYTHON" "$ROOT/bench/torch_rpc_ps.py" --workers "$WORKERS" --steps "$STEPS" \
        2>/dev/null | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['samples_per_s'])")")
    fi
  done
  local a b
  a=$(printf '%s\n' "${ours[@]}" | median)
  printf '  cohort ps (%s): %.0f samples/s (runs: %s)\n' "$mode" "$a" "${ours[*]}"
  # comm: the push/pull round trips per step; exposed: the part the step waited for (the rest
  # ran behind backward: ps.overlap).
  printf '  cohort per step (medians): comm %.2f ms, exposed %.2f ms\n' \
    "$(printf '%s\n' "${comm[@]}" | median)" "$(printf '%s\n' "${exposed[@]}" | median)"
  if ((${#theirs[@]})); then
    b=$(printf '%s\n' "${theirs[@]}" | median)
    printf '  torch rpc ps (async): %.0f samples/s (runs: %s)\n' "$b" "${theirs[*]}"
    printf '  cohort / torch: %.2fx (goal >= 3x)\n' "$(calc "$a / $b")"
  else
    echo "  torch rpc ps skipped: $PYTHON cannot import torch.distributed.rpc"
  fi
}

# time_to TARGET METRICS: time_s of the first eval at or above TARGET accuracy ("-" if never).
time_to() {
  "$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
target, path = float(sys.argv[1]), sys.argv[2]
for line in open(path):
    r = json.loads(line)
    if r.get("event") == "eval" and r.get("accuracy", 0) >= target:
        print(r["time_s"]); break
else:
    print("-")
EOF
}

part2() {
  if ! has_key 'fault.slow_rank' || ! has_key '`ssp`'; then
    echo "== 2. time to accuracy with a straggler: skipped (this build has no ps.mode asp/ssp or"
    echo "   fault.slow_rank yet)"
    return
  fi
  local steps=$((2 * 60000 / (4 * 32)))  # two epochs of 4 workers x batch 32
  local who="rank 1"
  [ "$ROTATE" = true ] && who="a rank that changes every step"
  echo "== 2. time to ${TARGET} with $who slowed ${SLOW}x: 4 workers, 2 servers, $steps steps"
  declare -A t acc w  # time to target, final accuracy, wall time of the whole run
  local modes=(bsp asp ssp backup)
  for r in $(seq "$REPEATS"); do
    for m in "${modes[@]}"; do
      # An asynchronous push is a whole optimizer step: the per-push learning rate is BSP's / N
      # (the example's 0.05 with momentum 0.9 diverges when 4 workers each apply it).
      # Every mode decays the rate (cosine over the run, following the servers' global step):
      # at a constant rate asynchronous SGD with momentum ends anywhere in a +-1.5 point band,
      # so "final accuracy" would measure where the last evaluation fell, not the mode.
      local extra=(--set "ps.mode=$m" --set optim.schedule=cosine)
      [ "$m" = asp ] || [ "$m" = ssp ] && extra+=(--set optim.lr=0.0125)
      [ "$m" = ssp ] && extra+=(--set ps.staleness=3)
      [ "$m" = backup ] && extra=(--set ps.mode=bsp --set ps.backup_workers=1 \
        --set optim.schedule=cosine)
      w[$m]+="$(cohort_ps "$m$r" 4 2 --set train.epochs=2 --set "train.max_steps=$steps" \
        --set "train.eval_every=$EVAL_EVERY" --set fault.slow_rank=1 \
        --set "fault.slow_factor=$SLOW" --set "fault.slow_rotate=$ROTATE" "${extra[@]}") "
      t[$m]+="$(time_to "$TARGET" "$TMP/$m$r/metrics.jsonl") "
      acc[$m]+="$(summary_field "$TMP/$m$r/metrics.jsonl" eval_accuracy) "
    done
  done
  local base
  base=$(echo "${t[bsp]}" | median_of)
  local base_acc
  base_acc=$(echo "${acc[bsp]}" | median_of)
  for m in "${modes[@]}"; do
    local tm am
    tm=$(echo "${t[$m]}" | median_of)
    am=$(echo "${acc[$m]}" | median_of)
    if [ -z "$tm" ]; then
      printf '  %-7s did not reach %s in %s steps (runs: %s); final accuracy %s\n' "$m" "$TARGET" \
        "$steps" "${t[$m]}" "$am"
      continue
    fi
    if [ -z "$base" ]; then  # BSP never got there: its whole run is a lower bound
      local wb
      wb=$(echo "${w[bsp]}" | median_of)
      printf '  %-7s time to %s: %6.1f s; bsp did not reach it in its %.1f s run: speed-up > %.2fx; final accuracy %.4f (%+.2f points)\n' \
        "$m" "$TARGET" "$tm" "$wb" "$(calc "$wb / $tm")" "$am" "$(calc "($am - $base_acc) * 100")"
      continue
    fi
    printf '  %-7s time to %s: %6.1f s (runs: %s) speed-up vs bsp %.2fx; final accuracy %.4f (%+.2f points)\n' \
      "$m" "$TARGET" "$tm" "${t[$m]}" "$(calc "$base / $tm")" "$am" \
      "$(calc "($am - $base_acc) * 100")"
  done
  echo "  goals: asp, ssp >= 1.5x; backup >= 1.3x; accuracy within 1 point of bsp"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$PART" = 2 ] || part1
[ "$PART" = 1 ] || part2
