#!/usr/bin/env bash
# Allreduce busbw and latency, cohort vs Open MPI vs PyTorch gloo, measured side by side in the
# same run (float32 sum, one host), and the zero-copy limit of the machine (bench/shm_limit.cc:
# every input already in one shared mapping; each rank reduces its segment and writes it into
# every output, with no staging copy).
#
# For each rank count and repeat, runs one full size sweep of each tool in turn (cohort over
# shared memory, Open MPI's MPI_Allreduce with `--mca btl self,vader`, gloo over loopback), so
# that all three share the machine's noise; then prints, per size, the median busbw of each
# over the repeats, the ratios cohort/MPI and cohort/gloo, cohort's share of the limit, the 4 KiB
# latency, and the goals.
#
#   bench/run_collectives_bench.sh [--ranks "2 4"] [--sizes 4K:64M] [--iters 20] [--warmup 5]
#                                  [--repeats 3] [--load N] [--build-dir DIR]
#
# --load N starts N busy-loop processes for the whole run (a shared machine): every tool is
# measured under the same load.
#
# A peer that is not available (no mpirun or bench/mpi_allreduce target; no torch for
# /usr/bin/python3 or $COHORT_BENCH_PYTHON) is skipped with a message.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
RANKS="2 4" SIZES=4K:64M ITERS=20 WARMUP=5 REPEATS=3 LOAD=0 BUILD_DIR="$ROOT/build"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --ranks) RANKS="$2"; shift 2 ;;
    --sizes) SIZES="$2"; shift 2 ;;
    --iters) ITERS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --load) LOAD="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_collectives_bench: unknown option '$1'" >&2; usage ;;
  esac
done
for v in ITERS REPEATS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "run_collectives_bench: --${v,,} must be >= 1" >&2; exit 2; }
done
[[ "$LOAD" =~ ^[0-9]+$ ]] || { echo "run_collectives_bench: --load must be >= 0" >&2; exit 2; }
[[ "$WARMUP" =~ ^[0-9]+$ ]] || { echo "run_collectives_bench: --warmup must be >= 0" >&2; exit 2; }
for n in $RANKS; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "run_collectives_bench: bad rank count '$n'" >&2; exit 2; }
done

OUT="$(mktemp -d)" ERR="$(mktemp)" LOAD_PIDS=()
trap 'rm -rf "$OUT" "$ERR"; ((${#LOAD_PIDS[@]})) && kill "${LOAD_PIDS[@]}" 2>/dev/null; true' EXIT

if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
  nice cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if ! nice cmake --build "$BUILD_DIR" --target cohort_cli -j 2 >"$ERR" 2>&1; then
  echo "run_collectives_bench: building cohort failed:" >&2; cat "$ERR" >&2; exit 1
fi
COHORT="$BUILD_DIR/bin/cohort"

HAVE_MPI=1
if ! command -v mpirun >/dev/null; then
  echo "run_collectives_bench: mpirun not found: skipping Open MPI" >&2; HAVE_MPI=0
elif ! nice cmake --build "$BUILD_DIR" --target mpi_allreduce -j 2 >"$ERR" 2>&1; then
  echo "run_collectives_bench: no mpi_allreduce target (MPI not found by cmake?): skipping Open MPI" >&2
  HAVE_MPI=0
fi
HAVE_LIMIT=1
if ! nice cmake --build "$BUILD_DIR" --target shm_limit -j 2 >"$ERR" 2>&1; then
  echo "run_collectives_bench: building bench/shm_limit failed: no limit column" >&2; HAVE_LIMIT=0
fi
HAVE_GLOO=1
if ! TORCH_VERSION="$("$PYTHON" -c 'import torch, torch.distributed as d; assert d.is_gloo_available(); print(torch.__version__)' 2>/dev/null)"; then
  echo "run_collectives_bench: $PYTHON cannot import torch with gloo: skipping gloo" >&2; HAVE_GLOO=0
fi

COMMON=(--sizes "$SIZES" --iters "$ITERS" --warmup "$WARMUP")
run_tool() {  # tool n repeat: appends the tool's table to $OUT/tool.n.repeat
  local tool="$1" n="$2" rep="$3" file="$OUT/$1.$2.$3"
  case "$tool" in
    cohort) "$COHORT" bench collectives -n "$n" --op allreduce --transport shm "${COMMON[@]}" ;;
    mpi) mpirun --allow-run-as-root --oversubscribe -n "$n" --mca btl self,vader \
           "$BUILD_DIR/bin/mpi_allreduce" "${COMMON[@]}" ;;
    gloo) "$PYTHON" "$ROOT/bench/torch_gloo_allreduce.py" -n "$n" "${COMMON[@]}" ;;
    limit) "$BUILD_DIR/bin/shm_limit" -n "$n" "${COMMON[@]}" ;;
  esac >"$file" 2>"$ERR" || {
    echo "run_collectives_bench: $tool with $n ranks failed:" >&2; cat "$ERR" >&2; exit 1; }
}

TOOLS=(cohort)
((HAVE_MPI)) && TOOLS+=(mpi)
((HAVE_GLOO)) && TOOLS+=(gloo)
((HAVE_LIMIT)) && TOOLS+=(limit)
for ((i = 0; i < LOAD; i++)); do
  bash -c 'while :; do :; done' & LOAD_PIDS+=($!)
done
echo "# allreduce f32 sum, sizes $SIZES, iters $ITERS, warmup $WARMUP, repeats $REPEATS;" \
     "tools: ${TOOLS[*]}${TORCH_VERSION:+ (torch $TORCH_VERSION)}; $(nproc) cores;" \
     "load: $LOAD busy process(es)"
for n in $RANKS; do
  for ((rep = 1; rep <= REPEATS; rep++)); do
    for tool in "${TOOLS[@]}"; do run_tool "$tool" "$n" "$rep"; done
  done
done

# Summary: the tables have columns size count type time algbw busbw #wrong [algo].
"$(command -v python3 || echo "$PYTHON")" - "$OUT" "$RANKS" <<'PY'
import glob, os, statistics, sys
out, ranks = sys.argv[1], [int(n) for n in sys.argv[2].split()]
def load(tool, n):
    rows = {}  # size -> list of (time_us, busbw) over repeats
    for path in sorted(glob.glob(os.path.join(out, f"{tool}.{n}.*"))):
        for line in open(path):
            f = line.split()
            if len(f) >= 7 and f[0].isdigit():
                if int(f[6]) != 0:
                    sys.exit(f"run_collectives_bench: {tool} {n} ranks: {f[6]} wrong results at {f[0]} B")
                rows.setdefault(int(f[0]), []).append((float(f[3]), float(f[5])))
    return rows
def med(rows, size, k):
    return statistics.median(r[k] for r in rows[size]) if size in rows else None
def fmt(v, spec): return format(v, spec) if v is not None else "-"
def ratio(a, b): return a / b if a is not None and b else None
def label(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K" if b >= 1 << 10 else str(b)
failed = skipped = 0
def goal(text, value, want, higher=True):
    global failed, skipped
    if value is None:
        skipped += 1
        print(f"  {text}: n/a (peer skipped)"); return
    ok = value >= want if higher else value <= want
    failed += not ok
    print(f"  {text}: {value:.2f}x (goal {'>=' if higher else '<='} {want}x) {'PASS' if ok else 'FAIL'}")
for n in ranks:
    c, m, g, z = load("cohort", n), load("mpi", n), load("gloo", n), load("limit", n)
    print(f"\n## {n} ranks: median busbw (GB/s) over repeats")
    print("%8s %10s %10s %10s %10s %11s %11s %13s" % ("size", "cohort", "open-mpi", "gloo", "limit",
          "cohort/mpi", "cohort/gloo", "cohort/limit"))
    for size in sorted(c):
        cb, mb, gb, zb = med(c, size, 1), med(m, size, 1), med(g, size, 1), med(z, size, 1)
        print("%8s %10s %10s %10s %10s %11s %11s %13s" % (label(size), fmt(cb, ".3f"),
              fmt(mb, ".3f"), fmt(gb, ".3f"), fmt(zb, ".3f"), fmt(ratio(cb, mb), ".2f"),
              fmt(ratio(cb, gb), ".2f"), fmt(ratio(cb, zb), ".2f")))
    lat = min(c) if c else None
    if lat is None: continue
    ct, mt, gt = med(c, lat, 0), med(m, lat, 0), med(g, lat, 0)
    print(f"latency at {label(lat)} (us, median): cohort {fmt(ct, '.2f')}, open-mpi {fmt(mt, '.2f')},"
          f" gloo {fmt(gt, '.2f')}")
    print("goals:")
    big = [s for s in c if (1 << 20) <= s <= (64 << 20)]
    for s in sorted(big):
        goal(f"busbw vs Open MPI at {label(s)}", ratio(med(c, s, 1), med(m, s, 1)), 1.5)
    for s in sorted(big):
        goal(f"busbw vs the zero-copy limit at {label(s)}", ratio(med(c, s, 1), med(z, s, 1)), 0.8)
    for s in sorted(s for s in c if s >= 64 << 10):
        goal(f"busbw vs gloo at {label(s)}", ratio(med(c, s, 1), med(g, s, 1)), 3.0)
    goal(f"latency at {label(lat)}, cohort/Open MPI", ratio(ct, mt), 1.5, higher=False)
    goal(f"latency at {label(lat)}, gloo/cohort", ratio(gt, ct), 20.0)
print(f"\n{failed} goal(s) not met" if failed else "\nall goals met", end="")
print(f" ({skipped} not checked: peer skipped)" if skipped else "")
PY
