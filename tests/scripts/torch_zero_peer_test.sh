#!/usr/bin/env bash
# bench/torch_zero.py, the PyTorch peer of the ZeRO bench, runs to its end and exits 0 in both
# modes, twice each: its workers used to die with SIGABRT ("terminate called without an
# active exception") when the gloo process group outlived destroy_process_group() into the
# interpreter's finalization. A tiny GPT and a generated text keep it to seconds.
# Skipped (77) when the interpreter has no torch with gloo (the peer is optional).
#   torch_zero_peer_test.sh SOURCE_DIR
set -euo pipefail
ROOT="$1"
PYTHON="${COHORT_BENCH_PYTHON:-/usr/bin/python3}"
if ! "$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  echo "torch_zero_peer_test: $PYTHON has no torch with gloo; skipped"
  exit 77
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
printf '[model]\ntype = "gpt"\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n[data]\nbatch_size = 4\n[optim]\nname = "adamw"\nschedule = "cosine"\nwarmup_steps = 1\n' >"$TMP/tiny.toml"
"$PYTHON" -c 'import sys; open(sys.argv[1], "w").write("In the beginning was the word. " * 400)' "$TMP/text.txt"
for mode in "" --plain-ddp; do
  for i in 1 2; do
    if ! out="$("$PYTHON" "$ROOT/bench/torch_zero.py" --config "$TMP/tiny.toml" --data "$TMP/text.txt" \
        --workers 2 --steps 2 --warmup 1 $mode 2>"$TMP/err")"; then
      echo "FAIL: torch_zero.py ${mode:-(ZeRO-1)} run $i:"; cat "$TMP/err"; exit 1
    fi
    if grep -q "terminate called" "$TMP/err"; then
      echo "FAIL: torch_zero.py ${mode:-(ZeRO-1)} run $i printed:"; cat "$TMP/err"; exit 1
    fi
    "$PYTHON" -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["samples_per_s"] > 0, r
assert len(r["memory_ranks"]) == 2, r' "$out"
  done
done
echo "torch_zero_peer_test: 4 runs of bench/torch_zero.py exited 0 with their results"
