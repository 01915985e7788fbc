#!/usr/bin/env bash
# The main job: install what is missing, build, and train an MLP on Fashion-MNIST with two
# data-parallel workers on this machine. Extra arguments go to `cohort train`
# (e.g. --set optim.lr=0.1, or --workers 4).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec ./build/bin/cohort train examples/fashion_mlp.toml --workers 2 "$@"
