#!/usr/bin/env bash
# Installs what is missing, builds, checks that every package the build and tests use comes
# from install-deps.sh (scripts/check-fresh.sh, a few seconds), runs every test (CTest, 2 jobs),
# then a short fuzz run (scripts/fuzz.sh: the libFuzzer targets, built with clang in
# ./build-fuzz). What CI runs.
# Tests labelled "slow" (long accuracy runs) are skipped unless COHORT_SLOW_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./scripts/check-fresh.sh build
# CI runs on a throwaway machine: there install_external_project also installs the .deb it
# makes with apt-get (and purges it after), as a user would (docs/install.md).
[ "${CI:-}" != "true" ] || export COHORT_DEB_INSTALL="${COHORT_DEB_INSTALL:-1}"
args=(--test-dir build --output-on-failure -j 2 --timeout 600)
[ "${COHORT_SLOW_TESTS:-0}" = "1" ] || args+=(-LE slow)
ctest "${args[@]}"
./scripts/fuzz.sh
