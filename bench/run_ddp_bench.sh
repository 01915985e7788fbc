#!/usr/bin/env bash
# Data-parallel training throughput, cohort DDP vs PyTorch DDP (gloo), side by side in one run.
#
# For each repeat and model, runs in turn: cohort 1 worker, cohort 2 workers, PyTorch 1 process,
# PyTorch DDP 2 processes (interleaved, so that all four share the machine's noise). Every run
# trains on the real Fashion-MNIST train set with 1 thread per rank, a batch of 64 per rank and
# the SGD settings of examples/fashion_<model>.toml. Then prints the median samples/s (all ranks
# together) of each, the ratios cohort/PyTorch, the 1->2 worker scaling of both, cohort's share
# of allreduce hidden behind backward (goal >= 50%), its share of the ceiling below (goal >= 85%)
# and its per-step breakdown, and the goals.
#
#   bench/run_ddp_bench.sh [--model mlp|cnn|all] [--repeats R] [--mlp-steps N] [--cnn-steps N]
#                          [--warmup W] [--torch-single plain|ddp] [--build-dir DIR]
#                          [--cohort BIN] [--json FILE] [--torch-malloc glibc|tuned]
#                          [--overlap-mb MB]
#
# Also per repeat: cohort 2 workers with small gradient buckets (--overlap-mb, default 0.25 MiB,
# "cohort-overlap"), whose allreduce runs during backward, against the default buckets (PyTorch's
# 25 MiB with a 1 MiB first bucket: one bucket for these small models, reduced at the end of
# backward); and two independent 1-worker cohort processes started together ("ceiling"): what
# this machine gives two workers that never communicate.
#
# cohort: `cohort train examples/fashion_<model>.toml --workers W` with data.batch_size=64,
# run.threads=1, train.max_steps=N, checkpoints off; samples/s, comm_hidden and the per-step
# times come from the summary record (last line) of rank 0's metrics.jsonl. cohort's figure
# covers every step it ran (its first steps included): it has no untimed warm-up.
# PyTorch: bench/torch_ddp.py, which runs --warmup untimed steps (20) before the timed ones.
# With one process it trains the plain model (no DDP wrapper, no process group) unless
# --torch-single ddp asks for DDP with a world of 1. --torch-malloc tuned runs PyTorch with glibc
# malloc told to keep freed memory, as in bench/run_train_bench.sh (stock PyTorch hands the CNN's
# activations back to the kernel every step and faults them in again); default glibc.
#
# Steps default to MLP 600, CNN 150 (~3-5 s a run on 2 cores). --cohort BIN uses that binary
# instead of building cohort_cli in --build-dir (default build/). PyTorch is Debian's
# python3-torch via /usr/bin/python3 (or $COHORT_BENCH_PYTHON); when it cannot import torch with
# gloo, the PyTorch side is skipped with a message.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
OVERLAP_MB=0.25 MODEL=all REPEATS=3 WARMUP=20 TORCH_SINGLE=plain TORCH_MALLOC=glibc BUILD_DIR="$ROOT/build" COHORT="" JSON_OUT=""
declare -A STEPS=([mlp]=600 [cnn]=150)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --mlp-steps) STEPS[mlp]="$2"; shift 2 ;;
    --cnn-steps) STEPS[cnn]="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --torch-single) TORCH_SINGLE="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --cohort) COHORT="$2"; shift 2 ;;
    --json) JSON_OUT="$2"; shift 2 ;;
    --torch-malloc) TORCH_MALLOC="$2"; shift 2 ;;
    --overlap-mb) OVERLAP_MB="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_ddp_bench: unknown option '$1'" >&2; usage ;;
  esac
done
case "$MODEL" in mlp) MODELS=(mlp) ;; cnn) MODELS=(cnn) ;; all) MODELS=(mlp cnn) ;;
  *) echo "run_ddp_bench: --model must be mlp, cnn or all, got '$MODEL'" >&2; exit 2 ;;
esac
for v in REPEATS "STEPS[mlp]" "STEPS[cnn]"; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "run_ddp_bench: $v must be >= 1, got '${!v}'" >&2; exit 2; }
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "run_ddp_bench: --warmup must be >= 0" >&2; exit 2; }
[[ "$TORCH_SINGLE" == plain || "$TORCH_SINGLE" == ddp ]] ||
  { echo "run_ddp_bench: --torch-single must be plain or ddp" >&2; exit 2; }
TORCH_ENV=()
case "$TORCH_MALLOC" in
  glibc) ;;
  tuned) TORCH_ENV=(MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824) ;;
  *) echo "run_ddp_bench: --torch-malloc must be glibc or tuned" >&2; exit 2 ;;
esac

TMP="$(mktemp -d)" ERR="$(mktemp)"
LINES="$TMP/lines.jsonl"
trap 'rm -rf "$TMP" "$ERR" "$ERR".*' EXIT

if [[ -z "$COHORT" ]]; then  # build (a no-op when up to date); -j2: small shared machines
  if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
    nice cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  if ! nice cmake --build "$BUILD_DIR" --target cohort_cli -j 2 >"$ERR" 2>&1; then
    echo "run_ddp_bench: building cohort failed:" >&2; cat "$ERR" >&2; exit 1
  fi
  COHORT="$BUILD_DIR/bin/cohort"
fi
[[ -x "$COHORT" ]] || { echo "run_ddp_bench: $COHORT is not an executable" >&2; exit 1; }

export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
HAVE_TORCH=1
if ! TORCH_VERSION="$("$PYTHON" -c 'import torch, torch.distributed as d; assert d.is_gloo_available(); print(torch.__version__)' 2>/dev/null)"; then
  HAVE_TORCH=0
  echo "run_ddp_bench: $PYTHON cannot import torch with gloo (install Debian's python3-torch);" \
    "skipping the PyTorch side, printing cohort's numbers only" >&2
fi

# cohort_train MODEL WORKERS NAME [--set k=v ...]: one cohort run into $TMP/NAME.
cohort_train() {
  local m="$1" w="$2" name="$3"
  shift 3
  if ! "$COHORT" train "$ROOT/examples/fashion_$m.toml" --workers "$w" \
      --set data.batch_size=64 --set run.threads=1 --set "train.max_steps=${STEPS[$m]}" \
      --set train.epochs=1000 --set ckpt.enabled=false --set run.progress=none \
      --set train.eval_batches=1 --set "run.dir=$TMP" --set "run.name=$name" "$@" \
      >"$ERR.$name" 2>&1; then
    echo "run_ddp_bench: cohort $m with $w worker(s) failed:" >&2; cat "$ERR.$name" >&2; exit 1
  fi
}

# run_cohort MODEL WORKERS REPEAT [IMPL [--set k=v ...]]: one cohort run; appends its summary
# record, tagged with IMPL (default cohort), to $LINES.
run_cohort() {
  local m="$1" w="$2" rep="$3" impl="${4:-cohort}"
  local name="$impl-$1-$2w-$3"
  shift $(($# < 4 ? $# : 4))
  cohort_train "$m" "$w" "$name" "$@"
  summary_line "$TMP/$name/metrics.jsonl" "$m" "$rep" "$impl"
}

# run_ceiling MODEL REPEAT: two independent 1-worker cohort runs started together. Their summed
# samples/s is what this machine gives two workers that never communicate: the ceiling of DDP
# with 2 workers here (two workers share caches, memory bandwidth and, on a shared VM, cores).
run_ceiling() {
  local m="$1" rep="$2" a="ceiling-$1-a-$2" b="ceiling-$1-b-$2"
  cohort_train "$m" 1 "$a" & local pa=$!
  cohort_train "$m" 1 "$b" & local pb=$!
  wait "$pa" && wait "$pb" || { echo "run_ddp_bench: ceiling run failed" >&2; exit 1; }
  python3 -c 'import json, sys
rs = [json.loads(open(p).read().splitlines()[-1]) for p in sys.argv[1:3]]
print(json.dumps({"impl": "ceiling", "model": sys.argv[3], "workers": 2, "repeat": int(sys.argv[4]),
                  "samples_per_s": sum(r["samples_per_s"] for r in rs)}))' \
    "$TMP/$a/metrics.jsonl" "$TMP/$b/metrics.jsonl" "$m" "$rep" | tee -a "$LINES" |
    python3 -c 'import json, sys; r = json.loads(sys.stdin.read())
print("  2 independent cohort %s processes: %.1f samples/s together" % (r["model"], r["samples_per_s"]))' >&2
}

# summary_line METRICS MODEL REPEAT IMPL: the summary record of a run, tagged, into $LINES.
summary_line() {
  # train.epochs=1000: the examples say 1 epoch, which would end a 2-worker MLP run at 469 steps.
  local line
  line="$(python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert r.get("event") == "summary", "last line of %s is not the summary record" % sys.argv[1]
r.update(impl=sys.argv[4], model=sys.argv[2], repeat=int(sys.argv[3]))
print(json.dumps(r))' "$1" "$2" "$3" "$4")" ||
    { echo "run_ddp_bench: no summary in $1" >&2; exit 1; }
  printf '%s\n' "$line" >>"$LINES"
  printf '%s\n' "$line" | python3 -c 'import json, sys
r = json.loads(sys.stdin.read())
h = " allreduce %.0f%% hidden (%.2f of %.2f ms exposed, backward %.2f ms)" % (
    100 * r["comm_hidden"], r["exposed_comm_ms"], r["comm_ms"], r["backward_ms"]) \
    if "comm_hidden" in r else ""
print("  %s %s %d worker(s): %.1f samples/s%s" % (r["impl"], r["model"], r["workers"],
      r["samples_per_s"], h))' >&2
}

# run_torch MODEL WORKERS REPEAT: one bench/torch_ddp.py run; appends its JSON line to $LINES.
run_torch() {
  local m="$1" w="$2" rep="$3" out
  if ! out="$(env "${TORCH_ENV[@]}" "$PYTHON" "$ROOT/bench/torch_ddp.py" --model "$m" --workers "$w" \
      --steps "${STEPS[$m]}" --warmup "$WARMUP" --batch 64 --single "$TORCH_SINGLE" 2>"$ERR")"; then
    echo "run_ddp_bench: torch $m with $w worker(s) failed:" >&2; cat "$ERR" >&2; exit 1
  fi
  printf '%s\n' "$out" | sed "s/}\$/,\"repeat\":$rep}/" >>"$LINES"
  sed 's/^/  /' "$ERR" >&2
}

echo "ddp bench: models ${MODELS[*]}, 1 thread and batch 64 per rank, steps mlp ${STEPS[mlp]}" \
  "cnn ${STEPS[cnn]} (torch +$WARMUP warmup), $REPEATS repeats interleaved; torch" \
  "${TORCH_VERSION:-absent} (1 process: $TORCH_SINGLE, malloc $TORCH_MALLOC); $(nproc --all) cores, load average" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 1; r <= REPEATS; r++)); do
  for m in "${MODELS[@]}"; do
    run_cohort "$m" 1 "$r"
    run_cohort "$m" 2 "$r"
    run_cohort "$m" 2 "$r" cohort-overlap --set "ddp.bucket_mb=$OVERLAP_MB" \
      --set "ddp.first_bucket_mb=$OVERLAP_MB"
    run_ceiling "$m" "$r"
    if ((HAVE_TORCH)); then
      run_torch "$m" 1 "$r"
      run_torch "$m" 2 "$r"
    fi
  done
  echo "repeat $r/$REPEATS done (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
[[ -n "$JSON_OUT" ]] && cp "$LINES" "$JSON_OUT"

python3 - "$LINES" "${MODELS[*]}" "$REPEATS" "$TORCH_SINGLE" "$TORCH_MALLOC" <<'PY'
import json, statistics, sys
lines, models, repeats, single, malloc = sys.argv[1], sys.argv[2].split(), *sys.argv[3:]
rows = [json.loads(l) for l in open(lines) if l.strip()]
def med(impl, model, workers, key="samples_per_s"):
    v = [r[key] for r in rows if r["impl"] == impl and r["model"] == model
         and r["workers"] == workers and key in r]
    return statistics.median(v) if v else None
def fmt(v, spec=",.0f"): return format(v, spec) if v is not None else "-"
def div(a, b): return a / b if a is not None and b else None
print("\n%-14s %-6s %8s %12s" % ("impl", "model", "workers", "samples/s"))
for m in models:
    for impl in ("cohort", "torch"):
        for w in (1, 2):
            label = impl if impl == "cohort" else ("torch" if w == 1 and single == "plain"
                                                   else "torch-ddp")
            print("%-14s %-6s %8d %12s" % (label, m, w, fmt(med(impl, m, w))))
    for impl in ("cohort-overlap", "ceiling"):
        print("%-14s %-6s %8d %12s" % (impl, m, 2, fmt(med(impl, m, 2))))
failed = skipped = 0
def goal(value, want, unit="x"):
    global failed, skipped
    if value is None:
        skipped += 1
        return "n/a"
    ok = value >= want
    failed += not ok
    shown = f"{value:.2f}x" if unit == "x" else f"{100 * value:.0f}%"
    want_s = f"{want}x" if unit == "x" else f"{100 * want:.0f}%"
    return f"{shown} (goal >= {want_s}) {'PASS' if ok else 'FAIL'}"
print("\nratios (of medians):")
for m in models:
    c1, c2, t1, t2 = (med(i, m, w) for i in ("cohort", "torch") for w in (1, 2))
    print(f"  {m}: cohort/torch at 2 workers: {goal(div(c2, t2), 1.3)}")
    r1 = div(c1, t1)
    print(f"  {m}: cohort/torch at 1 worker:  {fmt(r1, '.2f')}x")
    print(f"  {m}: cohort scaling 1->2:       {goal(div(c2, 2 * c1) if c1 else None, 0.9, '%')}")
    ts = div(t2, 2 * t1) if t1 else None
    print(f"  {m}: torch scaling 1->2:        {fmt(ts and 100 * ts, '.0f')}%")
    print(f"  {m}: cohort allreduce hidden:   {goal(med('cohort', m, 2, 'comm_hidden'), 0.5, '%')}"
          " (default buckets)")
    print(f"  {m}: hidden, small buckets:     {goal(med('cohort-overlap', m, 2, 'comm_hidden'), 0.8, '%')}"
          f" at {fmt(med('cohort-overlap', m, 2), ',.0f')} samples/s")
    ce = med("ceiling", m, 2)
    print(f"  {m}: 2 independent processes:   {fmt(ce)} samples/s (the ceiling)")
    print(f"  {m}: cohort DDP, share of it:   {goal(div(c2, ce), 0.85, '%')}")
    for w in (1, 2):  # where a 2-worker step's time goes, beside the 1-worker step's
        keys = (("forward_ms", "backward_ms") + (("comm_ms", "exposed_comm_ms") if w == 2 else ())
                + ("optimizer_ms", "data_ms"))
        print(f"  {m}: cohort {w} worker(s), ms/step (medians): " +
              ", ".join(f"{k[:-3]} {fmt(med('cohort', m, w, k), '.2f')}" for k in keys))
print(f"\nsamples/s: all ranks together, medians over {repeats} interleaved repeats; 1 thread,"
      f" batch 64 per rank, real Fashion-MNIST; torch 1 process: {single}, malloc {malloc}")
print(f"{failed} goal(s) not met" if failed else "all goals met", end="")
print(f" ({skipped} not checked: peer skipped)" if skipped else "")
PY
