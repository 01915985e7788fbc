#!/usr/bin/env bash
# bench/run_gpu_gpt.sh --smoke runs to its end on this machine (the CPU, a tiny GPT) and writes
# its report with a number in cohort's f32 row and, where the interpreter has torch, in
# PyTorch's eager f32 row. The GPU run itself is rare (docs/gpu.md, "bench/gpu_gpt"): this keeps
# the script, its config keys and the report from rotting between two of them.
#   gpu_gpt_smoke_test.sh SOURCE_DIR COHORT_BINARY
set -euo pipefail
ROOT="$1"
COHORT="$2"
export COHORT_BENCH_PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
if ! OUT="$TMP" bash "$ROOT/bench/run_gpu_gpt.sh" --smoke --cohort "$COHORT" \
    --rows "eager-f32 cohort-f32 eager-bf16 cohort-bf16 compile-bf16" >"$TMP/log" 2>&1; then
  echo "FAIL: bench/run_gpu_gpt.sh --smoke exited non-zero:"; cat "$TMP/log"; exit 1
fi
"$COHORT_BENCH_PYTHON" - "$TMP/gpu-gpt-rows.jsonl" <<'PY' || { cat "$TMP/log"; exit 1; }
import json, subprocess, sys
rows = {(r["name"], r["precision"]): r for r in map(json.loads, open(sys.argv[1]))}
assert len(rows) == 5, rows
def ok(key):
    r = rows[key]
    assert r["status"] == "ok" and r["tokens_per_s"] > 0 and r["steps_timed"] >= 1, r
ok(("cohort", "f32"))
has_torch = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
if has_torch:
    ok(("PyTorch eager", "f32"))
    ok(("PyTorch eager", "bf16"))
for r in rows.values():
    assert r["status"] in ("ok", "skipped", "not built", "refused"), r
PY
grep -q '^| cohort | f32 | [0-9]' "$TMP/gpu-gpt.md" || { echo "FAIL: no cohort f32 row in the report"; cat "$TMP/gpu-gpt.md"; exit 1; }
echo "gpu_gpt_smoke_test: bench/run_gpu_gpt.sh --smoke wrote its report"
