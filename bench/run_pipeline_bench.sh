#!/usr/bin/env bash
# Pipeline parallelism: cohort's model_parallel strategy (2 pipeline stages, one per process,
# GPipe and 1F1B schedules) against a hand-written PyTorch GPipe over 2 gloo processes
# (bench/torch_pipe.py), the GPT of examples/kjv_gpt.toml with AdamW in fp32, side by side.
#
# For each repeat and each micro-batch count m runs in turn (interleaved, so that all share the
# machine's noise): cohort pp=2 GPipe, cohort pp=2 1F1B and PyTorch GPipe. Then prints the
# median samples/s of each, the ratio cohort / PyTorch against the goal (cohort >= 1.5x PyTorch,
# per schedule and m), cohort's measured pipeline bubble (median over repeats of the mean over
# stages) beside the formula (p-1)/(m+p-1), and the peak activation bytes per stage of GPipe
# and 1F1B at each m (1F1B holds at most p micro-batches in flight per stage: its peak should
# be <= GPipe's, visibly so at m=8).
#
#   bench/run_pipeline_bench.sh [--steps S] [--warmup W] [--repeats R] [--micro-batches "4 8"]
#                               [--load] [--no-torch] [--build-dir DIR] [--cohort BIN]
#                               [--json FILE]
#
# cohort: `cohort train examples/kjv_gpt.toml --workers 2 --set parallel.pp=2
# --set pipeline.micro_batches=m --set pipeline.schedule=gpipe|1f1b` with run.threads=1,
# train.max_steps=S, optim.warmup_steps=min(100, S) (the cosine schedule needs warmup <= steps),
# checkpoints off, one evaluation batch at the end and no text sample. samples/s, the bubble
# (pipeline_bubble, pipeline_bubble_formula) and the per-stage figures (pipeline_stages: bubble,
# compute_s, peak_activation_bytes) come from the summary record (last line) of rank 0's
# metrics.jsonl. cohort's samples/s covers every step it ran (its first steps included): it has
# no untimed warm-up.
# PyTorch: Debian's python3-torch 1.13 via /usr/bin/python3 (or $COHORT_BENCH_PYTHON),
# bench/torch_pipe.py: GPipe by hand with gloo send/recv over loopback, the same model, batch
# (32 rows per step, cut into m micro-batches), AdamW hyperparameters, schedule and global-norm
# gradient clipping; --warmup untimed steps (default 5) before the S timed ones. When the
# interpreter cannot import torch with gloo, the PyTorch side is skipped with a message.
#
# When this cohort has no pipeline (`cohort config show` rejects parallel.pp / pipeline.*), the
# script stops with "pipeline not available". A failed cohort run stops the script and prints
# the tail of its log.
# --load: one busy process (a spinning shell loop) runs beside every run: users share machines.
# Defaults: 30 steps, 3 repeats, m = 4 and 8 (a cohort run ~10-15 s, a PyTorch run ~15-20 s on
# 2 cores: ~5 min in all, ~7 min with --load).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
CONFIG="$ROOT/examples/kjv_gpt.toml"
STEPS=30 WARMUP=5 REPEATS=3 MICRO="4 8" LOAD=0 TORCH=1
BUILD_DIR="$ROOT/build" COHORT="" JSON_OUT=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --micro-batches) MICRO="$2"; shift 2 ;;
    --load) LOAD=1; shift ;;
    --no-torch) TORCH=0; shift ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --cohort) COHORT="$2"; shift 2 ;;
    --json) JSON_OUT="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_pipeline_bench: unknown option '$1'" >&2; usage ;;
  esac
done
for v in STEPS REPEATS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "run_pipeline_bench: --${v,,} must be >= 1, got '${!v}'" >&2; exit 2; }
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "run_pipeline_bench: --warmup must be >= 0" >&2; exit 2; }
[[ -n "${MICRO// /}" ]] || { echo "run_pipeline_bench: --micro-batches needs at least one m" >&2; exit 2; }
for m in $MICRO; do  # the batch of 32 rows must split into m equal micro-batches
  [[ "$m" =~ ^[1-9][0-9]*$ ]] && ((32 % m == 0)) ||
    { echo "run_pipeline_bench: --micro-batches takes divisors of the batch 32, got '$m'" >&2; exit 2; }
done

TMP="$(mktemp -d)"
LINES="$TMP/lines.jsonl" ERR="$TMP/err"
LOAD_PID=""
trap 'rm -rf "$TMP"; [[ -n "$LOAD_PID" ]] && kill "$LOAD_PID" 2>/dev/null; true' EXIT

if [[ -z "$COHORT" ]]; then  # build (a no-op when up to date); -j2: small shared machines
  if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
    nice cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  if ! nice cmake --build "$BUILD_DIR" --target cohort_cli -j 2 >"$ERR" 2>&1; then
    echo "run_pipeline_bench: building cohort failed:" >&2; cat "$ERR" >&2; exit 1
  fi
  COHORT="$BUILD_DIR/bin/cohort"
fi
[[ -x "$COHORT" ]] || { echo "run_pipeline_bench: $COHORT is not an executable" >&2; exit 1; }

# Before the thread variables below: nproc reports OMP_NUM_THREADS when it is set.
MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) cores"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# Does this cohort have the pipeline? The config registry knows pipeline.* once it is built in.
for s in gpipe 1f1b; do
  if ! "$COHORT" config show "$CONFIG" --set parallel.pp=2 --set "pipeline.schedule=$s" \
      >/dev/null 2>"$ERR"; then
    echo "run_pipeline_bench: pipeline not available (schedule $s) in $COHORT: $(tail -1 "$ERR")" >&2
    exit 1
  fi
done

HAVE_TORCH=0 TORCH_VERSION=""
if ((TORCH)); then
  if TORCH_VERSION="$("$PYTHON" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()
print(torch.__version__)' 2>/dev/null)"; then
    HAVE_TORCH=1
  else
    echo "run_pipeline_bench: $PYTHON cannot import torch with gloo (install Debian's" \
      "python3-torch); skipping the PyTorch side" >&2
  fi
fi

if ((LOAD)); then
  (while :; do :; done) &
  LOAD_PID=$!
fi

# cohort_run SCHEDULE M REPEAT: one cohort pp=2 run into $TMP/cohort-SCHEDULE-mM-REPEAT;
# appends the summary record of every rank, tagged, to $LINES.
cohort_run() {
  local sched="$1" m="$2" rep="$3" name="cohort-$1-m$2-$3"
  if ! "$COHORT" train "$CONFIG" --workers 2 --set run.threads=1 --set "train.max_steps=$STEPS" \
      --set "optim.warmup_steps=$((STEPS < 100 ? STEPS : 100))" --set ckpt.enabled=false \
      --set run.progress=none --set train.eval_batches=1 --set train.sample_bytes=0 \
      --set "run.dir=$TMP" --set "run.name=$name" --set parallel.pp=2 \
      --set "pipeline.micro_batches=$m" --set "pipeline.schedule=$sched" \
      >"$TMP/$name.log" 2>&1; then
    echo "run_pipeline_bench: cohort $sched m=$m (repeat $rep) failed:" >&2
    tail -20 "$TMP/$name.log" >&2; exit 1
  fi
  python3 - "$TMP/$name" "$sched" "$m" "$rep" "$LINES" <<'PY' >&2 || { echo "run_pipeline_bench: no summary in $TMP/$name" >&2; tail -20 "$TMP/$name.log" >&2; exit 1; }
import glob, json, os, sys
run, sched, m, rep, lines = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
files = sorted(glob.glob(os.path.join(run, "metrics*.jsonl")))
out = []
for f in files:
    r = json.loads(open(f).read().splitlines()[-1])
    assert r.get("event") == "summary", "last line of %s is not the summary record" % f
    r.update(impl="cohort", schedule=sched, m=m, repeat=rep)
    out.append(r)
with open(lines, "a") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
r0 = next(r for r in out if r.get("rank", 0) == 0)
b, bf = r0.get("pipeline_bubble"), r0.get("pipeline_bubble_formula")
print("  cohort %-5s m=%d: %.1f samples/s%s" % (sched, m, r0["samples_per_s"],
      ", bubble %.1f%% measured, %.1f%% formula" % (100 * b, 100 * bf)
      if isinstance(b, (int, float)) and isinstance(bf, (int, float)) else ""))
PY
}

# torch_run M REPEAT: one bench/torch_pipe.py run; appends its JSON line to $LINES.
torch_run() {
  local m="$1" rep="$2" out
  if ! out="$("$PYTHON" "$ROOT/bench/torch_pipe.py" --config "$CONFIG" --stages 2 \
      --micro-batches "$m" --steps "$STEPS" --warmup "$WARMUP" 2>"$ERR")"; then
    echo "run_pipeline_bench: torch gpipe m=$m (repeat $rep) failed:" >&2; tail -20 "$ERR" >&2; exit 1
  fi
  printf '%s\n' "$out" | sed "s/}\$/,\"impl\":\"torch\",\"schedule\":\"gpipe\",\"m\":$m,\"repeat\":$rep}/" >>"$LINES"
  sed 's/^/  /' "$ERR" >&2
}

echo "pipeline bench: GPT of examples/kjv_gpt.toml, AdamW fp32, 2 stages (1 process each, 1 thread)," \
  "batch 32, m = $MICRO, $STEPS steps (torch +$WARMUP warmup), $REPEATS repeats interleaved;" \
  "torch ${TORCH_VERSION:-absent}; machine: $MACHINE; load $(cut -d' ' -f1-3 /proc/loadavg)$( ((LOAD)) && echo '; one busy process beside')" >&2
for ((r = 1; r <= REPEATS; r++)); do
  for m in $MICRO; do
    cohort_run gpipe "$m" "$r"
    cohort_run 1f1b "$m" "$r"
    if ((HAVE_TORCH)); then torch_run "$m" "$r"; fi
  done
  echo "repeat $r/$REPEATS done (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
[[ -n "$JSON_OUT" ]] && cp "$LINES" "$JSON_OUT"

python3 - "$LINES" "$REPEATS" "$STEPS" "$MACHINE" "$LOAD" "$MICRO" <<'PY'
import json, statistics, sys
lines, repeats, steps, machine, load, micro = sys.argv[1:7]
micro = [int(m) for m in micro.split()]
rows = [json.loads(l) for l in open(lines) if l.strip()]
def runs(impl, sched, m):
    return [r for r in rows if r["impl"] == impl and r["schedule"] == sched and r["m"] == m
            and r.get("rank", 0) == 0]
def med(impl, sched, m, key="samples_per_s"):
    v = [r[key] for r in runs(impl, sched, m) if isinstance(r.get(key), (int, float))]
    return statistics.median(v) if v else None
def fmt(v, spec=",.1f"): return format(v, spec) if v is not None else "n/a"
def pct(v): return "%.1f%%" % (100 * v) if v is not None else "n/a"
def div(a, b): return a / b if a is not None and b else None

passed = failed = skipped = 0
def goal(value, want=1.5):
    global passed, failed, skipped
    if value is None:
        skipped += 1
        return "n/a"
    failed += value < want
    passed += value >= want
    return f"{value:.2f}x {'PASS' if value >= want else 'FAIL'}"

print("\n%-7s %-6s %3s %10s %18s %9s %9s   %s" % ("impl", "sched", "m", "samples/s",
      "cohort/torch", "bubble", "formula", "per repeat (samples/s)"))
for m in micro:
    t = med("torch", "gpipe", m)
    for impl, sched in (("cohort", "gpipe"), ("cohort", "1f1b"), ("torch", "gpipe")):
        per = ", ".join("%.1f" % r["samples_per_s"] for r in runs(impl, sched, m))
        if impl == "cohort":
            ratio = goal(div(med(impl, sched, m), t))
            bub, form = pct(med(impl, sched, m, "pipeline_bubble")), pct(med(impl, sched, m, "pipeline_bubble_formula"))
        else:
            ratio, bub, form = "1.00x" if t else "n/a", "", ""
            per = per or "skipped (no torch)"
        print("%-7s %-6s %3d %10s %18s %9s %9s   %s" % (impl, sched, m, fmt(med(impl, sched, m)),
              ratio, bub, form, per))

MiB = 2 ** 20
def stages(sched, m):
    """pipeline_stages of rank 0's summary in the last repeat."""
    rs = [r for r in runs("cohort", sched, m) if r["repeat"] == int(repeats)]
    return {s["stage"]: s for s in (rs[0].get("pipeline_stages") or [])} if rs else {}
print("\ncohort per stage (repeat %s): peak activation MiB, bubble, compute s" % repeats)
print("  %3s %5s %10s %10s %8s %8s %9s %9s   %s" % ("m", "stage", "act gpipe", "act 1f1b",
      "bub gp", "bub 1f1b", "comp gp", "comp 1f1b", "1f1b <= gpipe"))
for m in micro:
    g, o = stages("gpipe", m), stages("1f1b", m)
    for s in sorted(set(g) | set(o)):
        ga, oa = g.get(s, {}).get("peak_activation_bytes"), o.get(s, {}).get("peak_activation_bytes")
        ok = "yes" if ga is not None and oa is not None and oa <= ga else (
             "NO" if ga is not None and oa is not None else "n/a")
        f = lambda d, k, sp: format(d[k], sp) if isinstance(d.get(k), (int, float)) else "n/a"
        print("  %3d %5d %10s %10s %8s %8s %9s %9s   %s" % (m, s,
              "%.2f" % (ga / MiB) if ga is not None else "n/a",
              "%.2f" % (oa / MiB) if oa is not None else "n/a",
              pct(g.get(s, {}).get("bubble")), pct(o.get(s, {}).get("bubble")),
              f(g.get(s, {}), "compute_s", ".2f"), f(o.get(s, {}), "compute_s", ".2f"), ok))

print(f"\nmodel: GPT of examples/kjv_gpt.toml, AdamW fp32, batch 32 rows per step, 2 pipeline"
      f" stages (one process, one thread each); {steps} steps, medians over {repeats}"
      f" interleaved repeats; machine: {machine}" + ("; one busy process beside" if load == "1" else ""))
print("bubble: cohort's measured idle share of a step, mean over stages (median over repeats);"
      " formula (p-1)/(m+p-1)")
print(f"goals (cohort >= 1.5x torch GPipe, each schedule and m): {passed} met, {failed} not met,"
      f" {skipped} not checked" + (" (torch was skipped)" if skipped else ""))
PY
