#!/usr/bin/env bash
# The main job: install what is missing, build, and train an MLP on Fashion-MNIST with two
# data-parallel workers on this machine. Extra arguments go to `cohort train`
# (e.g. --set optim.lr=0.1, or --workers 4).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Only what the main job runs: the `cohort` command and the libraries under it (about half of
# the build; scripts/test.sh builds the rest: tests, examples, benchmarks).
echo "main-job: building the cohort command (build/bin/cohort; a few minutes on 2 cores)"
./scripts/build.sh --target cohort_cli
exec ./build/bin/cohort train examples/fashion_mlp.toml --workers 2 "$@"
