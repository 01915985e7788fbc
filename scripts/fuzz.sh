#!/usr/bin/env bash
# A short libFuzzer run of the fuzz targets (tests/fuzz/): configures ./build-fuzz with clang,
# builds ONLY the fuzz targets, and runs each for a few seconds (ctest -L fuzz). scripts/test.sh
# calls it; it takes well under a minute once clang is installed. Without clang or libFuzzer it
# prints "skipping fuzz: <why>" and exits 0. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
skip() {
  echo "skipping fuzz: $*"
  exit 0
}
command -v clang >/dev/null && command -v clang++ >/dev/null ||
  skip "clang not found (scripts/install-deps.sh installs clang and libclang-rt-dev)"

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# Configuring builds nothing; benchmarks are left out because nothing here needs them.
mkdir -p build-fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOHORT_BUILD_BENCH=OFF "${launcher[@]}" >build-fuzz/configure.log 2>&1 || {
  cat build-fuzz/configure.log
  echo "fuzz: configuring build-fuzz with clang failed"
  exit 1
}
targets=(store_frame_fuzz service_frame_fuzz tcp_frame_fuzz safetensors_fuzz fl_message_fuzz)
for t in "${targets[@]}"; do
  ninja -C build-fuzz -t query "$t" >/dev/null 2>&1 ||
    skip "no target $t: -fsanitize=fuzzer does not link with this clang (install libclang-rt-dev)"
done
ninja -C build-fuzz "${targets[@]}"
ctest --test-dir build-fuzz -L fuzz --output-on-failure "$@"
