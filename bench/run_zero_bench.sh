#!/usr/bin/env bash
# ZeRO throughput and memory: cohort DDP and ZeRO stages 1, 2, 3 against PyTorch 1.13's
# ZeroRedundancyOptimizer (ZeRO stage 1) around DDP, the GPT of examples/kjv_gpt.toml with AdamW
# in fp32, 2 processes, side by side in one run.
#
# For each repeat runs in turn (interleaved, so that all share the machine's noise): cohort DDP,
# cohort ZeRO stage 1, 2, 3, PyTorch ZeRO-1 (bench/torch_zero.py) and PyTorch DDP with a plain
# AdamW (bench/torch_zero.py --plain-ddp). Then prints the median samples/s (all ranks together)
# of each, the ratios against the goals (cohort ZeRO-1 >= 1.5x PyTorch ZeRO-1; cohort ZeRO-3
# >= 0.8x cohort DDP) and the memory per rank.
#
#   bench/run_zero_bench.sh [--steps S] [--warmup W] [--repeats R] [--stages "1 2 3"] [--load]
#                           [--no-torch] [--build-dir DIR] [--cohort BIN] [--json FILE]
#
# cohort: `cohort train examples/kjv_gpt.toml --workers 2 --set parallel.strategy=zero
# --set zero.stage=K` (DDP: the default strategy) with run.threads=1, train.max_steps=S,
# optim.warmup_steps=min(100, S) (the cosine schedule needs warmup <= steps), checkpoints off,
# one evaluation batch at the end and no text sample. samples/s and the memory come from the
# summary record (last line) of each rank's metrics.jsonl: memory_peak_bytes and memory_bytes
# {parameters, gradients, optimizer, communication, other}, measured by cohort's allocator
# ("n/a" when the build does not write them). cohort's samples/s covers every step it ran (its
# first steps included): it has no untimed warm-up.
# PyTorch: Debian's python3-torch 1.13 via /usr/bin/python3 (or $COHORT_BENCH_PYTHON), gloo
# over loopback, the same model, batch (32 per rank), AdamW hyperparameters, schedule and
# gradient clipping; --warmup untimed steps (default 5) before the S timed ones. Its memory per
# rank is the nbytes of the parameters, gradients and optimizer state tensors (the allocator
# has no CPU peak counter) and the peak resident set of the whole process. When the
# interpreter cannot import torch with gloo, the PyTorch side is skipped with a message.
# PyTorch's FullyShardedDataParallel (ZeRO-3) is not measured: Debian's torch 1.13 FSDP does not
# import under Python 3.11 (the script prints the import error).
#
# When this cohort has no ZeRO (`cohort config show` rejects zero.stage), the ZeRO runs are
# skipped with "zero strategy not available" and the goals that need them print n/a.
# --load: one busy process (a spinning shell loop) runs beside every run: users share machines.
# Defaults: 30 steps, 3 repeats (a cohort run ~15 s, a PyTorch run ~45 s on 2 cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
CONFIG="$ROOT/examples/kjv_gpt.toml"
STEPS=30 WARMUP=5 REPEATS=3 STAGES="1 2 3" LOAD=0 TORCH=1
BUILD_DIR="$ROOT/build" COHORT="" JSON_OUT=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --stages) STAGES="$2"; shift 2 ;;
    --load) LOAD=1; shift ;;
    --no-torch) TORCH=0; shift ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --cohort) COHORT="$2"; shift 2 ;;
    --json) JSON_OUT="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_zero_bench: unknown option '$1'" >&2; usage ;;
  esac
done
for v in STEPS REPEATS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "run_zero_bench: --${v,,} must be >= 1, got '${!v}'" >&2; exit 2; }
done
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "run_zero_bench: --warmup must be >= 0" >&2; exit 2; }
for k in $STAGES; do
  [[ "$k" =~ ^[123]$ ]] || { echo "run_zero_bench: --stages takes 1, 2 and 3, got '$k'" >&2; exit 2; }
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
    echo "run_zero_bench: building cohort failed:" >&2; cat "$ERR" >&2; exit 1
  fi
  COHORT="$BUILD_DIR/bin/cohort"
fi
[[ -x "$COHORT" ]] || { echo "run_zero_bench: $COHORT is not an executable" >&2; exit 1; }

# Before the thread variables below: nproc reports OMP_NUM_THREADS when it is set.
MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) cores"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# Which ZeRO stages this cohort has: the config registry knows zero.stage once ZeRO is built in.
ZERO_STAGES=()
for k in $STAGES; do
  if "$COHORT" config show "$CONFIG" --set parallel.strategy=zero --set "zero.stage=$k" \
      >/dev/null 2>"$ERR"; then
    ZERO_STAGES+=("$k")
  else
    echo "run_zero_bench: zero strategy not available (stage $k) in $COHORT: $(tail -1 "$ERR");" \
      "skipping cohort ZeRO stage $k" >&2
  fi
done

HAVE_TORCH=0 TORCH_VERSION=""
if ((TORCH)); then
  if TORCH_VERSION="$("$PYTHON" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()
from torch.distributed.optim import ZeroRedundancyOptimizer; print(torch.__version__)' 2>/dev/null)"; then
    HAVE_TORCH=1
  else
    echo "run_zero_bench: $PYTHON cannot import torch with gloo and ZeroRedundancyOptimizer" \
      "(install Debian's python3-torch); skipping the PyTorch side" >&2
  fi
fi
FSDP="not checked"
if ((HAVE_TORCH)); then
  if FSDP_ERR="$("$PYTHON" -c 'from torch.distributed.fsdp import FullyShardedDataParallel' 2>&1)"; then
    FSDP="imports (not measured by this script)"
  else
    FSDP="does not import: $(printf '%s\n' "$FSDP_ERR" | tail -1)"
  fi
fi

if ((LOAD)); then
  (while :; do :; done) &
  LOAD_PID=$!
fi

# cohort_run IMPL REPEAT [--set k=v ...]: one cohort run into $TMP/IMPL-REPEAT; appends the
# summary record of every rank, tagged, to $LINES.
cohort_run() {
  local impl="$1" rep="$2" name="$1-$2"
  shift 2
  if ! "$COHORT" train "$CONFIG" --workers 2 --set run.threads=1 --set "train.max_steps=$STEPS" \
      --set "optim.warmup_steps=$((STEPS < 100 ? STEPS : 100))" --set ckpt.enabled=false \
      --set run.progress=none --set train.eval_batches=1 --set train.sample_bytes=0 \
      --set "run.dir=$TMP" --set "run.name=$name" "$@" >"$TMP/$name.log" 2>&1; then
    echo "run_zero_bench: cohort $impl failed:" >&2; tail -20 "$TMP/$name.log" >&2; exit 1
  fi
  python3 - "$TMP/$name" "$impl" "$rep" "$LINES" <<'PY' >&2 || { echo "run_zero_bench: no summary in $TMP/$name" >&2; exit 1; }
import glob, json, os, sys
run, impl, rep, lines = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
files = sorted(glob.glob(os.path.join(run, "metrics*.jsonl")))
out = []
for f in files:
    r = json.loads(open(f).read().splitlines()[-1])
    assert r.get("event") == "summary", "last line of %s is not the summary record" % f
    r.update(impl=impl, repeat=rep)
    out.append(r)
with open(lines, "a") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
r0 = next(r for r in out if r.get("rank", 0) == 0)
peak = r0.get("memory_peak_bytes")
print("  %s: %.1f samples/s%s" % (impl, r0["samples_per_s"],
      ", peak %.2f MiB on rank 0" % (peak / 2**20) if isinstance(peak, (int, float)) else ""))
PY
}

# torch_run IMPL REPEAT [ARGS...]: one bench/torch_zero.py run; appends its JSON line to $LINES.
torch_run() {
  local impl="$1" rep="$2" out
  shift 2
  if ! out="$("$PYTHON" "$ROOT/bench/torch_zero.py" --config "$CONFIG" --workers 2 \
      --steps "$STEPS" --warmup "$WARMUP" "$@" 2>"$ERR")"; then
    echo "run_zero_bench: $impl failed:" >&2; tail -20 "$ERR" >&2; exit 1
  fi
  printf '%s\n' "$out" | sed "s/}\$/,\"repeat\":$rep}/" >>"$LINES"
  sed 's/^/  /' "$ERR" >&2
}

echo "zero bench: GPT of examples/kjv_gpt.toml, AdamW fp32, 2 workers, 1 thread each, $STEPS steps" \
  "(torch +$WARMUP warmup), $REPEATS repeats interleaved; cohort ZeRO stages: ${ZERO_STAGES[*]:-none};" \
  "torch ${TORCH_VERSION:-absent}; machine: $MACHINE; load $(cut -d' ' -f1-3 /proc/loadavg)$( ((LOAD)) && echo '; one busy process beside')" >&2
for ((r = 1; r <= REPEATS; r++)); do
  cohort_run cohort-ddp "$r"
  for k in "${ZERO_STAGES[@]}"; do
    cohort_run "cohort-zero$k" "$r" --set parallel.strategy=zero --set "zero.stage=$k"
  done
  if ((HAVE_TORCH)); then
    torch_run torch-zero1 "$r"
    torch_run torch-ddp "$r" --plain-ddp
  fi
  echo "repeat $r/$REPEATS done (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
[[ -n "$JSON_OUT" ]] && cp "$LINES" "$JSON_OUT"
PARAMS="$(python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).readline())
print(r["parameters"] if r.get("event") == "start" else 0)' "$TMP/cohort-ddp-1/metrics.jsonl")"

python3 - "$LINES" "$REPEATS" "$STEPS" "$MACHINE" "$FSDP" "${PARAMS:-0}" "$LOAD" "$STAGES" \
    "${ZERO_STAGES[*]:-}" <<'PY'
import json, statistics, sys
lines, repeats, steps, machine, fsdp, psi, load, stages, zstages = sys.argv[1:10]
psi, stages, zstages = int(psi), stages.split(), zstages.split()
rows = [json.loads(l) for l in open(lines) if l.strip()]
def rank0(impl):
    return [r for r in rows if r["impl"] == impl and r.get("rank", 0) == 0]
def med(impl, key="samples_per_s"):
    v = [r[key] for r in rank0(impl) if isinstance(r.get(key), (int, float))]
    return statistics.median(v) if v else None
def fmt(v, spec=",.1f"): return format(v, spec) if v is not None else "n/a"
def fmtx(v): return "%.2fx" % v if v is not None else "n/a"
def div(a, b): return a / b if a is not None and b else None
impls = ["cohort-ddp"] + [f"cohort-zero{k}" for k in stages] + ["torch-zero1", "torch-ddp"]
print("\n%-14s %12s   %s" % ("impl", "samples/s", "per repeat"))
for impl in impls:
    runs = [r["samples_per_s"] for r in rank0(impl)]
    why = ""
    if not runs:
        why = ("zero strategy not available" if impl.startswith("cohort-zero")
               else "skipped (no torch)")
    print("%-14s %12s   %s" % (impl, fmt(med(impl)), ", ".join("%.1f" % x for x in runs) or why))

passed = failed = skipped = 0
def goal(value, want):
    global passed, failed, skipped
    if value is None:
        skipped += 1
        return "n/a"
    failed += value < want
    passed += value >= want
    return f"{value:.2f}x (goal >= {want}x) {'PASS' if value >= want else 'FAIL'}"
print("\nratios (of medians):")
print(f"  cohort ZeRO-1 / torch ZeRO-1:  {goal(div(med('cohort-zero1'), med('torch-zero1')), 1.5)}")
print(f"  cohort ZeRO-3 / cohort DDP:    {goal(div(med('cohort-zero3'), med('cohort-ddp')), 0.8)}")
print(f"  cohort ZeRO-2 / cohort DDP:    {fmtx(div(med('cohort-zero2'), med('cohort-ddp')))}")
print(f"  cohort DDP / torch DDP:        {fmtx(div(med('cohort-ddp'), med('torch-ddp')))}")
print(f"  torch ZeRO-1 / torch DDP:      {fmtx(div(med('torch-zero1'), med('torch-ddp')))}")

MiB = 2 ** 20
def mib(v): return "%.2f" % (v / MiB) if isinstance(v, (int, float)) else "n/a"
last = int(repeats)
print("\nmemory per rank, MiB (repeat %d):" % last)
print("  %-13s %4s %9s %9s %9s %9s %9s %9s" % ("impl", "rank", "peak", "params", "grads",
      "optim", "comm", "other"))
for impl in impls:
    if not impl.startswith("cohort"):
        continue
    for r in sorted((r for r in rows if r["impl"] == impl and r["repeat"] == last),
                    key=lambda r: r.get("rank", 0)):
        mb = r.get("memory_bytes") if isinstance(r.get("memory_bytes"), dict) else {}
        print("  %-13s %4d %9s %9s %9s %9s %9s %9s" % (impl, r.get("rank", 0),
              mib(r.get("memory_peak_bytes")), *(mib(mb.get(k)) for k in
              ("parameters", "gradients", "optimizer", "communication", "other"))))
for impl in ("torch-zero1", "torch-ddp"):
    for r in (r for r in rows if r["impl"] == impl and r["repeat"] == last):
        for m in r["memory_ranks"]:
            print("  %-13s %4d %9s %9s %9s %9s %9s %9s" % (impl, m["rank"], "n/a", mib(m["parameters"]),
                  mib(m["gradients"]), mib(m["optimizer"]), "n/a", "n/a")
                  + "   (peak RSS of the process %.0f MiB)" % (m["max_rss"] / MiB))
if psi:
    n = 2
    print("  model states expected per rank (ZeRO paper, fp32 AdamW, Psi = %d, N = %d):" % (psi, n))
    for name, (p, g, o) in (("DDP", (4, 4, 8)), ("ZeRO-1", (4, 4, 8 / n)),
                            ("ZeRO-2", (4, 4 / n, 8 / n)), ("ZeRO-3", (4 / n, 4 / n, 8 / n))):
        print("    %-7s params %.2f + grads %.2f + optim %.2f = %.2f MiB" % (
            name, p * psi / MiB, g * psi / MiB, o * psi / MiB, (p + g + o) * psi / MiB))

print(f"\nmodel: GPT of examples/kjv_gpt.toml, Psi = {psi:,} parameters, AdamW fp32, batch 32 per"
      f" rank; {steps} steps, medians over {repeats} interleaved repeats; machine: {machine}"
      + ("; one busy process beside" if load == "1" else ""))
print(f"torch FSDP (ZeRO-3 peer): {fsdp}")
print(f"goals: {passed} met, {failed} not met, {skipped} not checked"
      + (" (a run they need was skipped)" if skipped else ""))
PY
