#!/usr/bin/env bash
# scripts/check-fresh.sh against this build: the real package list passes, and a list missing
# a package the build needs fails naming that package. Run by CTest (tests/scripts).
#   check_fresh_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
check="$src/scripts/check-fresh.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# expect_missing PACKAGE FILE_PATTERN: without PACKAGE in the list the check fails and names
# it together with a file of it that the build used.
expect_missing() {
  "$src/scripts/install-deps.sh" --list --with-peers | grep -v -x -F "$1" >"$tmp/list.txt"
  if "$check" --packages "$tmp/list.txt" "$build" >"$tmp/out.txt" 2>&1; then
    cat "$tmp/out.txt"
    fail "check-fresh passed with $1 left out of the list"
  fi
  grep -E "^  $1 \(needed for [^ ]*$2" "$tmp/out.txt" >/dev/null || {
    cat "$tmp/out.txt"
    fail "check-fresh failed without $1 but did not name it with a $2 file"
  }
  echo "ok: without $1: $(grep -E "^  $1 " "$tmp/out.txt")"
}

"$check" "$build" || fail "check-fresh fails with install-deps.sh's own list"
# Always needed: the CLI includes CLI11's headers.
expect_missing libcli11-dev "/usr/include/CLI/"
# The bug this check exists for: Debian's dnnl CMake config finds OpenCL, which libdnnl-dev
# only recommends. Only a build that uses oneDNN needs it.
if grep -q '^OpenCL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt"; then
  expect_missing ocl-icd-opencl-dev "libOpenCL"
else
  echo "note: this build does not use oneDNN (no OpenCL_LIBRARY in CMakeCache.txt): the" \
    "ocl-icd-opencl-dev case is not checked"
fi
