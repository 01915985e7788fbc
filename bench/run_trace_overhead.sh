#!/usr/bin/env bash
# What the timeline trace (run.trace, docs/monitoring.md) costs: the CNN of
# examples/fashion_cnn.toml trained with the trace off and on, interleaved (off, on, off, on,
# ...) so that both share the machine's noise; prints the median samples/s (all ranks together,
# from the summary record of rank 0's metrics.jsonl) of each and the ratio on/off. Issue 14 asks
# that trace + dashboard cost at most 3%.
#
#   bench/run_trace_overhead.sh [--repeats R] [--steps N] [--workers W] [--build-dir DIR]
#                               [--cohort BIN] [--dashboard] [--load] [-- EXTRA...]
#
# --dashboard: the "on" runs also serve the live dashboard (`--dashboard`), and a poller reads
# /api/state and /metrics once a second while they train, as a browser and Prometheus would.
# --load: one busy process (a spinning shell loop) runs beside every run: users share machines.
#
# Everything after `--` is passed to both kinds of run (e.g. `-- --dashboard` to measure the
# trace and the dashboard together, or `-- --set ddp.bucket_mb=0.25`); the "on" runs add
# `--set run.trace=true`. Defaults: 3 repeats, 1000 steps, 2 workers (DDP), batch 64 per rank,
# 1 thread per rank, checkpoints off: ~30-60 s a run on 2 cores. The "on" runs write and merge
# the trace; that end-of-run write is outside the timed training and not in samples/s, so the
# script also prints the trace's size and event count.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPEATS=3 STEPS=1000 WORKERS=2 BUILD_DIR="$ROOT/build" COHORT="" DASHBOARD=0 LOAD=0
EXTRA=()

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --repeats) REPEATS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --cohort) COHORT="$2"; shift 2 ;;
    --dashboard) DASHBOARD=1; shift ;;
    --load) LOAD=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage 0 ;;
    *) echo "run_trace_overhead: unknown option '$1'" >&2; usage ;;
  esac
done
if [[ -z "$COHORT" ]]; then
  cmake --build "$BUILD_DIR" --target cohort_cli >/dev/null
  COHORT="$BUILD_DIR/bin/cohort"
fi

TMP="$(mktemp -d)"
LOAD_PID=""
trap 'rm -rf "$TMP"; [[ -n "$LOAD_PID" ]] && kill "$LOAD_PID" 2>/dev/null; true' EXIT
if ((LOAD)); then
  (while :; do :; done) &
  LOAD_PID=$!
fi

# poll_dashboard LOG PID: while PID runs, reads the page's data and /metrics once a second from
# the address the run printed in LOG.
poll_dashboard() {
  local log="$1" pid="$2" url=""
  while kill -0 "$pid" 2>/dev/null; do
    [[ -z "$url" ]] && url="$(grep -o 'http://[0-9.:]*/' "$log" | head -1 || true)"
    if [[ -n "$url" ]]; then
      curl -s "${url}api/state" >/dev/null || true
      curl -s "${url}metrics" >/dev/null || true
    fi
    sleep 1
  done
}

# one_run NAME [ARGS...]: trains into $TMP/NAME and prints its samples/s.
one_run() {
  local name="$1"
  shift
  "$COHORT" train "$ROOT/examples/fashion_cnn.toml" --workers "$WORKERS" \
      --set data.batch_size=64 --set run.threads=1 --set "train.max_steps=$STEPS" \
      --set train.epochs=1000 --set ckpt.enabled=false --set run.progress=none \
      --set train.eval_batches=1 --set "run.dir=$TMP" --set "run.name=$name" \
      "${EXTRA[@]}" "$@" >"$TMP/$name.log" 2>&1 &
  local pid=$!
  [[ " $* " == *" --dashboard "* ]] && poll_dashboard "$TMP/$name.log" "$pid"
  if ! wait "$pid"; then
    echo "run_trace_overhead: run $name failed:" >&2; cat "$TMP/$name.log" >&2; exit 1
  fi
  python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert r.get("event") == "summary", "no summary record in " + sys.argv[1]
print(r["samples_per_s"])' "$TMP/$name/metrics.jsonl"
}

OFF=() ON=()
for ((rep = 1; rep <= REPEATS; ++rep)); do
  OFF+=("$(one_run "off-$rep")")
  if ((DASHBOARD)); then
    ON+=("$(one_run "on-$rep" --set run.trace=true --dashboard)")
  else
    ON+=("$(one_run "on-$rep" --set run.trace=true)")
  fi
  echo "repeat $rep: off ${OFF[-1]} samples/s, on ${ON[-1]} samples/s" >&2
done

WHAT="trace"; ((DASHBOARD)) && WHAT="trace + dashboard"
((LOAD)) && WHAT="$WHAT, one busy process beside"
python3 - "$TMP/on-1/trace.json" "${OFF[*]}" "${ON[*]}" "$WHAT" <<'EOF'
import json, os, statistics, sys
trace, off, on = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
what = sys.argv[4]
events = len(json.load(open(trace))["traceEvents"])
m_off, m_on = statistics.median(off), statistics.median(on)
print("CNN, %d repeats interleaved, on = %s" % (len(off), what))
print("  off: median %.1f samples/s  (%s)" % (m_off, ", ".join("%.1f" % x for x in off)))
print("  on:  median %.1f samples/s  (%s)" % (m_on, ", ".join("%.1f" % x for x in on)))
print("  on/off: %.4f  (cost %.2f%%; goal with the dashboard: <= 3%%)" % (m_on / m_off, 100 * (1 - m_on / m_off)))
print("  trace.json of one run: %d events, %.1f MB" % (events, os.path.getsize(trace) / 1e6))
EOF
