#!/usr/bin/env bash
# The main job: install what is missing, build, and train an MLP on Fashion-MNIST.
# Extra arguments go to `cohort train` (e.g. --set optim.lr=0.1).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec ./build/bin/cohort train examples/fashion_mlp.toml "$@"
