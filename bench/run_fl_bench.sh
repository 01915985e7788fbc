#!/usr/bin/env bash
# Federated learning (issue 17, docs/federated.md): what `cohort fl run` reaches, and a PyTorch
# FedAvg simulation measured side by side in the same run. The federation of
# examples/fashion_mlp_fl.toml: MLP 784-512-256-10 on Fashion-MNIST, 10 clients, C = 0.5, E = 1,
# SGD lr 0.05 momentum 0.9 (fresh every round), batch 64.
#
#  1. Non-IID: Dirichlet alpha = 0.5, FedAvg, --rounds rounds: the accuracy curve.
#     Goal: >= 82% test accuracy within 30 rounds.
#  2. alpha = 0.1: FedProx (mu = 0.01) vs FedAvg after --rounds rounds.
#     Goal: FedProx ends no worse than FedAvg (mean over seeds).
#  3. IID FedAvg vs centralized `cohort train` after the same number of samples (FedAvg's: the sum
#     over rounds of the participants' local samples; centralized: that many samples as epochs,
#     cut with train.max_steps when not a whole number of epochs).
#  4. Peer: bench/torch_fedavg.py, the same FedAvg (IID, and Dirichlet alpha 0.5 drawn with numpy)
#     simulated sequentially in one process (like Flower's simulation mode), interleaved with
#     cohort's runs of the same configurations (reused from parts 1 and 3 when they run too):
#     per-round wall time, final accuracy, and cohort s/round / torch s/round. cohort runs a
#     server and 10 client processes over loopback TCP with mutual TLS.
#
#   bench/run_fl_bench.sh [--rounds N] [--seeds "0 1 2"] [--parts "1 2 3 4"] [--quick]
#                         [--torch-threads "1 2"] [--build-dir DIR] [--results DIR]
#                         [--set KEY=VALUE]...
#
# --torch-threads: the peer runs once per thread count (default: 1 and all cores); the ratio is
# taken against its fastest (on a shared machine, torch's OpenMP threads can lose to one thread).
# --quick: 5 rounds, seed 0 (a smoke run). --set: passed to every cohort run (after the bench's own
# keys). Per-run curves (one JSON line per round) go to --results (bench/results/fl):
# p<part>-<impl>-<config>-seed<s>.jsonl. Accuracy: mean ± std and min-max over seeds. Time per
# round: the median over rounds 2..N (round 1 of cohort includes the clients' start and
# connection) and over seeds. Accuracy curves: the mean over seeds at rounds 1, 5, 10, 20, 30.
#
# PyTorch is Debian's python3-torch through /usr/bin/python3 (or $COHORT_BENCH_PYTHON); without
# it part 4 prints cohort alone with a message (./scripts/install-deps.sh --with-peers). The
# tables are made with python3 (standard library only).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
ROUNDS=30 SEEDS="0 1 2" PARTS="1 2 3 4" QUICK=0
TORCH_THREADS="1 $(nproc)"
BUILD_DIR="$ROOT/build" RESULTS="$ROOT/bench/results/fl"
USER_SETS=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --seeds) SEEDS="$2"; shift 2 ;;
    --parts) PARTS="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --torch-threads) TORCH_THREADS="$2"; shift 2 ;;
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --results) RESULTS="$2"; shift 2 ;;
    --set) USER_SETS+=(--set "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "run_fl_bench: unknown option '$1'" >&2; usage ;;
  esac
done
((QUICK)) && { ROUNDS=5 SEEDS=0; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "run_fl_bench: --rounds must be >= 1" >&2; exit 2; }
for s in $SEEDS; do
  [[ "$s" =~ ^[0-9]+$ ]] || { echo "run_fl_bench: --seeds: '$s' is not a seed" >&2; exit 2; }
done
TORCH_THREADS="$(tr ' ' '\n' <<<"$TORCH_THREADS" | awk 'NF && !seen[$1]++' | tr '\n' ' ')"
for t in $TORCH_THREADS; do
  [[ "$t" =~ ^[1-9][0-9]*$ ]] || { echo "run_fl_bench: --torch-threads: '$t'" >&2; exit 2; }
done
for p in $PARTS; do
  [[ "$p" =~ ^[1-4]$ ]] || { echo "run_fl_bench: --parts: '$p' is not 1-4" >&2; exit 2; }
done
want_part() { [[ " $PARTS " == *" $1 "* ]]; }
[[ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]] ||
  { echo "run_fl_bench: Fashion-MNIST missing (./scripts/install-deps.sh)" >&2; exit 1; }

# Build (a no-op when up to date). -j2: the benchmark machines are small and shared.
if [[ ! -f "$BUILD_DIR/build.ninja" && ! -f "$BUILD_DIR/Makefile" ]]; then
  nice cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
if ! nice cmake --build "$BUILD_DIR" --target cohort_cli -j 2 >"$TMP/build.log" 2>&1; then
  echo "run_fl_bench: building cohort failed:" >&2; cat "$TMP/build.log" >&2; exit 1
fi
COHORT="$BUILD_DIR/bin/cohort"
HAVE_TORCH=0 TORCH_VERSION=absent
if want_part 4; then
  if TORCH_VERSION="$("$PYTHON" -c 'import torch, numpy; print(torch.__version__)' 2>/dev/null)"
  then HAVE_TORCH=1
  else
    TORCH_VERSION=absent
    echo "run_fl_bench: $PYTHON cannot import torch and numpy (Debian's python3-torch:" \
      "./scripts/install-deps.sh --with-peers); part 4 prints cohort's numbers only" >&2
  fi
fi
mkdir -p "$RESULTS"

FL_CONFIG="$ROOT/examples/fashion_mlp_fl.toml"
declare -A SETS=(
  [dir0.5-fedavg]="fl.partition=dirichlet fl.alpha=0.5 fl.strategy=fedavg"
  [dir0.1-fedavg]="fl.partition=dirichlet fl.alpha=0.1 fl.strategy=fedavg"
  [dir0.1-fedprox]="fl.partition=dirichlet fl.alpha=0.1 fl.strategy=fedprox fl.mu=0.01"
  [iid-fedavg]="fl.partition=iid fl.strategy=fedavg"
)
declare -A TORCH_ARGS=(
  [dir0.5-fedavg]="--partition dirichlet --alpha 0.5 --strategy fedavg"
  [iid-fedavg]="--partition iid --strategy fedavg"
)
declare -A RAN=()  # "impl config seed" -> its curve file (each run once per invocation)
INDEX="$TMP/index"  # lines: part impl config seed file wall_s
: >"$INDEX"

# cohort_fl PART CONFIG SEED: one `cohort fl run`; its fl_round lines go to the results folder.
cohort_fl() {
  local part="$1" cfg="$2" seed="$3" key="cohort $2 $3"
  if [[ -n "${RAN["$key"]:-}" ]]; then echo "$part ${RAN["$key"]}" >>"$INDEX"; return; fi
  local name="p$part-cohort-$cfg-seed$seed" sets=() s
  for s in ${SETS[$cfg]} fl.rounds="$ROUNDS" run.seed="$seed" ckpt.enabled=false \
      run.dir="$TMP/runs" run.name="$name"; do sets+=(--set "$s"); done
  echo "  cohort fl run $cfg seed $seed ($ROUNDS rounds) ..." >&2
  local t0 t1
  t0="$(date +%s.%N)"
  if ! "$COHORT" fl run "$FL_CONFIG" --clients 10 "${sets[@]}" "${USER_SETS[@]}" \
      >"$TMP/$name.log" 2>&1; then
    echo "run_fl_bench: cohort fl run failed ($cfg, seed $seed); its output:" >&2
    tail -n 40 "$TMP/$name.log" >&2; exit 1
  fi
  t1="$(date +%s.%N)"
  grep '"event":"fl_round"' "$TMP/runs/$name/metrics.jsonl" >"$RESULTS/$name.jsonl" || true
  [[ -s "$RESULTS/$name.jsonl" ]] ||
    { echo "run_fl_bench: no fl_round records in $TMP/runs/$name/metrics.jsonl" >&2; exit 1; }
  cp "$TMP/runs/$name/partition.json" "$TMP/$name.partition.json" 2>/dev/null || true
  sed -n 's/^\(round [0-9]*\/[0-9]*:.*\)/    \1/p' "$TMP/$name.log" | tail -n 1 >&2
  RAN["$key"]="cohort $cfg $seed $RESULTS/$name.jsonl $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')"
  echo "$part ${RAN["$key"]}" >>"$INDEX"
}

# torch_fl PART CONFIG SEED: bench/torch_fedavg.py on the same configuration, once per
# --torch-threads count (impl "torch-<T>t").
torch_fl() {
  local part="$1" cfg="$2" seed="$3" t name t0 t1
  ((HAVE_TORCH)) || return 0
  for t in $TORCH_THREADS; do
    name="p$part-torch-${t}t-$cfg-seed$seed"
    rm -f "$RESULTS/$name.jsonl"
    echo "  torch FedAvg simulation $cfg seed $seed ($ROUNDS rounds, $t thread(s)) ..." >&2
    t0="$(date +%s.%N)"
    # shellcheck disable=SC2086
    if ! OMP_NUM_THREADS="$t" "$PYTHON" "$ROOT/bench/torch_fedavg.py" ${TORCH_ARGS[$cfg]} \
        --rounds "$ROUNDS" --seed "$seed" --threads "$t" --out "$RESULTS/$name.jsonl" \
        >"$TMP/$name.log" 2>&1; then
      echo "run_fl_bench: torch_fedavg.py failed ($cfg, seed $seed):" >&2
      tail -n 20 "$TMP/$name.log" >&2; exit 1
    fi
    t1="$(date +%s.%N)"
    grep '^round' "$TMP/$name.log" | tail -n 1 | sed 's/^/    /' >&2
    echo "$part torch-${t}t $cfg $seed $RESULTS/$name.jsonl" \
      "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$INDEX"
  done
}

# central PART SEED SAMPLES: `cohort train` on SAMPLES training samples.
central() {
  local part="$1" seed="$2" samples="$3" name="p$1-cohort-central-seed$2"
  local epochs steps sets=() t0 t1
  epochs=$(((samples + 59999) / 60000))
  sets=(--set train.epochs="$epochs" --set run.seed="$seed" --set run.progress=none
    --set ckpt.enabled=false --set run.dir="$TMP/runs" --set run.name="$name")
  if ((samples % 60000)); then
    steps=$(((samples + 63) / 64))
    sets+=(--set train.max_steps="$steps")
  fi
  echo "  cohort train, $samples samples ($epochs epoch(s)${steps:+, $steps steps}), seed $seed ..." >&2
  t0="$(date +%s.%N)"
  if ! "$COHORT" train "$ROOT/examples/fashion_mlp.toml" "${sets[@]}" "${USER_SETS[@]}" \
      >"$TMP/$name.log" 2>&1; then
    echo "run_fl_bench: cohort train failed (seed $seed):" >&2; tail -n 40 "$TMP/$name.log" >&2
    exit 1
  fi
  t1="$(date +%s.%N)"
  grep '"event":"eval"' "$TMP/runs/$name/metrics.jsonl" >"$RESULTS/$name.jsonl" || true
  [[ -s "$RESULTS/$name.jsonl" ]] ||
    { echo "run_fl_bench: no eval records in $TMP/runs/$name/metrics.jsonl" >&2; exit 1; }
  echo "$part cohort central $seed $RESULTS/$name.jsonl $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}') $samples" \
    >>"$INDEX"
}

# fl_samples FILE PARTITION_JSON: the sum over rounds of the participants' local samples.
fl_samples() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
totals = json.load(open(sys.argv[2]))["totals"]
print(sum(sum(totals[c] for c in json.loads(l)["participants"]) for l in open(sys.argv[1])))
EOF
}

MODEL_NAME="$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
echo "fl bench: parts $PARTS, $ROUNDS rounds, seeds $SEEDS; torch $TORCH_VERSION;" \
  "$MODEL_NAME, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
START="$(date +%s)"
for seed in $SEEDS; do
  echo "seed $seed:" >&2
  if want_part 1; then
    cohort_fl 1 dir0.5-fedavg "$seed"
  fi
  if want_part 2; then
    cohort_fl 2 dir0.1-fedavg "$seed"
    cohort_fl 2 dir0.1-fedprox "$seed"
  fi
  if want_part 3; then
    cohort_fl 3 iid-fedavg "$seed"
    central 3 "$seed" "$(fl_samples "$RESULTS/p3-cohort-iid-fedavg-seed$seed.jsonl" \
      "$TMP/p3-cohort-iid-fedavg-seed$seed.partition.json")"
  fi
  if want_part 4; then
    # cohort then torch on each configuration (cohort's runs of parts 1 and 3 are reused).
    cohort_fl 4 iid-fedavg "$seed"
    torch_fl 4 iid-fedavg "$seed"
    cohort_fl 4 dir0.5-fedavg "$seed"
    torch_fl 4 dir0.5-fedavg "$seed"
  fi
done
ELAPSED=$(($(date +%s) - START))

# Tables: one Markdown table per part, and the curves.
python3 - "$INDEX" "$ROUNDS" "$PARTS" <<'EOF'
import json, math, statistics as st, sys
index, rounds, parts = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
runs = {}  # (part, impl, config) -> [(seed, records, wall, samples)]
for line in open(index):
    f = line.split()
    part, impl, cfg, seed, path, wall = f[:6]
    recs = [json.loads(l) for l in open(path) if l.strip()]
    runs.setdefault((part, impl, cfg), []).append((int(seed), recs, float(wall),
                                                   int(f[6]) if len(f) > 6 else None))

def acc_of(rec):
    return 100 * (rec["test_accuracy"] if "test_accuracy" in rec else rec["accuracy"])

def final_accs(rs):
    return [acc_of(r[1][-1]) for r in rs]

def spread(v):
    if len(v) == 1:
        return f"{v[0]:.2f}"
    return f"{st.mean(v):.2f} ± {st.stdev(v):.2f} ({min(v):.2f}–{max(v):.2f})"

def s_per_round(rs):
    t = [x["seconds"] for r in rs for x in r[1] if x["round"] >= 2] or \
        [x["seconds"] for r in rs for x in r[1]]
    return st.median(t)

def first_at(recs, goal):
    return next((x["round"] for x in recs if acc_of(x) >= goal), None)

marks = [r for r in (1, 5, 10, 20, 30) if r <= rounds]
if rounds not in marks:
    marks.append(rounds)

def curve_rows(keys):
    out = ["| run | seeds | " + " | ".join(f"round {r}" for r in marks) + " |",
           "|---|---|" + "---|" * len(marks)]
    for k in keys:
        rs = runs.get(k)
        if not rs:
            continue
        cells = []
        for m in marks:
            v = [acc_of(r[1][m - 1]) for r in rs if len(r[1]) >= m]
            cells.append(f"{st.mean(v):.2f}" if v else "-")
        out.append(f"| {k[1]} {k[2]} | {len(rs)} | " + " | ".join(cells) + " |")
    return out

print()
if "1" in parts and ("1", "cohort", "dir0.5-fedavg") in runs:
    rs = runs[("1", "cohort", "dir0.5-fedavg")]
    acc = final_accs(rs)
    best = [max(acc_of(x) for x in r[1]) for r in rs]
    firsts = [first_at(r[1], 82.0) for r in rs]
    met = st.mean(acc) >= 82.0
    print(f"### 1. Non-IID (Dirichlet α = 0.5), FedAvg, {rounds} rounds, 10 clients, C = 0.5, E = 1\n")
    print("| seeds | final accuracy % (mean ± std, min–max) | best round's accuracy % | "
          "first round ≥ 82% (per seed) | s/round (median) | goal ≥ 82% |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(rs)} | {spread(acc)} | {spread(best)} | "
          f"{', '.join(str(f) if f else 'never' for f in firsts)} | {s_per_round(rs):.2f} | "
          f"{'met' if met else 'MISSED'} (mean final) |\n")
if "2" in parts and ("2", "cohort", "dir0.1-fedavg") in runs:
    avg, prox = runs[("2", "cohort", "dir0.1-fedavg")], runs[("2", "cohort", "dir0.1-fedprox")]
    a, p = final_accs(avg), final_accs(prox)
    diff = [y - x for x, y in zip(a, p)]
    print(f"### 2. Dirichlet α = 0.1: FedProx (μ = 0.01) vs FedAvg after {rounds} rounds\n")
    print("| strategy | seeds | final accuracy % (mean ± std, min–max) | "
          "mean of last 5 rounds % | s/round (median) |")
    print("|---|---|---|---|---|")
    for nm, rs in (("FedAvg", avg), ("FedProx μ=0.01", prox)):
        last5 = [st.mean(acc_of(x) for x in r[1][-5:]) for r in rs]
        print(f"| {nm} | {len(rs)} | {spread(final_accs(rs))} | {spread(last5)} | "
              f"{s_per_round(rs):.2f} |")
    print(f"\nFedProx − FedAvg, per seed: {', '.join(f'{d:+.2f}' for d in diff)} points; mean "
          f"{st.mean(diff):+.2f}: goal (FedProx no worse) "
          f"{'met' if st.mean(p) >= st.mean(a) else 'MISSED'}\n")
if "3" in parts and ("3", "cohort", "central") in runs:
    fl, c = runs[("3", "cohort", "iid-fedavg")], runs[("3", "cohort", "central")]
    fa, ca = final_accs(fl), final_accs(c)
    print(f"### 3. IID FedAvg ({rounds} rounds) vs centralized `cohort train`, same samples\n")
    print("| run | seeds | training samples | final accuracy % (mean ± std, min–max) | wall s |")
    print("|---|---|---|---|---|")
    print(f"| FedAvg IID, 10 clients, C = 0.5, E = 1 | {len(fl)} | {c[0][3]:,} | {spread(fa)} | "
          f"{st.median(r[2] for r in fl):.0f} |")
    print(f"| centralized, batch 64 | {len(c)} | {c[0][3]:,} ({c[0][3] / 60000:g} epochs) | "
          f"{spread(ca)} | {st.median(r[2] for r in c):.0f} |")
    print(f"\nFedAvg − centralized: {st.mean(fa) - st.mean(ca):+.2f} points (mean over seeds)\n")
if "4" in parts:
    print(f"### 4. cohort vs PyTorch FedAvg simulation, {rounds} rounds\n")
    print("cohort: `cohort fl run`, a server and 10 client processes on this machine over "
          "loopback TCP with mutual TLS 1.3; torch: bench/torch_fedavg.py, the clients trained "
          "one after the other in one process (like Flower's simulation mode), no network.\n")
    print("| config | seeds | cohort accuracy % | torch accuracy % | cohort s/round | "
          "torch s/round | cohort/torch time |")
    print("|---|---|---|---|---|---|---|")
    for cfg in ("iid-fedavg", "dir0.5-fedavg"):
        c = runs.get(("4", "cohort", cfg))
        if not c:
            continue
        cs = s_per_round(c)
        ts = {k[1]: (s_per_round(v), v) for k, v in runs.items()
              if k[0] == "4" and k[2] == cfg and k[1].startswith("torch")}
        if not ts:
            print(f"| {cfg} | {len(c)} | {spread(final_accs(c))} | skipped (no torch) | "
                  f"{cs:.2f} | - | - |")
            continue
        best = min(v[0] for v in ts.values())
        for impl, (t, v) in sorted(ts.items(), key=lambda kv: int(kv[0][6:-1])):
            mark = " (fastest)" if t == best and len(ts) > 1 else ""
            print(f"| {cfg} | {len(c)} | {spread(final_accs(c))} | {spread(final_accs(v))} | "
                  f"{cs:.2f} | {t:.2f} ({impl[6:-1]} thread(s)){mark} | {cs / t:.2f}x |")
    print("\ncohort/torch time < 1: cohort's rounds are shorter. s/round: median over rounds "
          "2.., training and aggregation, without the evaluation.\n")
print("### Accuracy curves (test accuracy %, mean over seeds)\n")
keys, seen = [], set()
for k in sorted(runs, key=lambda k: (k[0], k[2], k[1])):
    if k[2] != "central" and (k[1], k[2]) not in seen:  # part 4 reuses parts 1 and 3's runs
        seen.add((k[1], k[2]))
        keys.append(k)
print("\n".join(curve_rows(keys)))
EOF
echo
echo "machine: $MODEL_NAME, $(nproc) cores; load average after: $(cut -d' ' -f1-3 /proc/loadavg);" \
  "bench time ${ELAPSED} s; curves in $RESULTS"
