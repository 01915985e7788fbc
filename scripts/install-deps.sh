#!/usr/bin/env bash
# Installs every Debian package that cohort's build, tests, examples and benchmarks need.
# Idempotent: packages already present are skipped, so a second run is fast and offline-safe.
#   install-deps.sh [--with-peers] [--list]
# --with-peers also installs the benchmark peer (PyTorch); --list prints the packages one per
# line (PACKAGES, then FUZZ_PACKAGES) and installs nothing: scripts/check-fresh.sh reads the
# list from here so that it is written down once.
set -euo pipefail

with_peers=0
list_only=0
for arg in "$@"; do
  case "$arg" in
    --with-peers) with_peers=1 ;;
    --list) list_only=1 ;;
    *)
      echo "install-deps: unknown argument '$arg' (expected --with-peers or --list)" >&2
      exit 2
      ;;
  esac
done

# ocl-icd-opencl-dev: Debian's dnnl CMake config requires OpenCL, which libdnnl-dev only recommends.
# libjs-chart.js: Chart.js, inlined into `cohort report` pages; chromium-headless-shell: the
# report tests render a page to PNG with it (tests/report/report_screenshot_test.cc), and the
# dashboard test reads the live page with it (tests/e2e/dashboard_e2e_test.cc).
# libcpp-httplib-dev: the dashboard's HTTP server (cohort/monitor); python3-prometheus-client:
# the reference parser that reads /metrics back in tests/monitor. python3-pytest: the docs test
# (tests/docs: every code block of README.md and docs/ compiled, parsed or run).
# pybind11-dev, python3-dev: the Python package `cohort` (python/, COHORT_PYTHON=auto builds it
# where they are found); python3-numpy: its tests (tests/python), so it is not a peer only.
# libtorch-dev: the torch.distributed backend cohort.torch (python/torch_plugin, built where it
# is found); python3-torch: its tests (tests/python/torch), so PyTorch is not a peer only either.
# libpng-dev, libjpeg-dev (libjpeg62-turbo): the image folder data set's decoders
# (cohort/data/image_decode.cc); python3-pil: bench/fashion_to_files.py writes the PNG folder,
# and the PyTorch peer reads it (bench/run_file_data_accuracy.sh, its CTest smoke).
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev zlib1g-dev libssl-dev libpng-dev libjpeg-dev
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist bible-kjv-text bible-kjv
  iproute2 procps
  libjs-chart.js chromium-headless-shell libcpp-httplib-dev python3-prometheus-client
  python3-pytest
  pybind11-dev python3-dev python3-numpy
  libtorch-dev python3-torch python3-pil
)
# The benchmark peer (never a dependency of cohort itself); skipped with COHORT_NO_PEERS=1.
if [ "${COHORT_NO_PEERS:-0}" != "1" ] && [ "$with_peers" = 1 ]; then
  PACKAGES+=(python3-torch)
fi
# The fuzz run of scripts/test.sh (scripts/fuzz.sh): clang and its runtime libraries, which
# hold libFuzzer (libclang_rt.fuzzer) for -fsanitize=fuzzer. Optional: if they cannot be
# installed, the fuzz run is skipped with a message and everything else goes on.
FUZZ_PACKAGES=(clang libclang-rt-dev)

if [ "$list_only" = 1 ]; then
  printf '%s\n' "${PACKAGES[@]}" "${FUZZ_PACKAGES[@]}"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
updated=0

# install_missing LABEL PACKAGE...: apt-get installs those not installed yet (nothing if none).
install_missing() {
  local label=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all $# $label packages already installed"
    return 0
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ "$updated" = 0 ]; then
    $SUDO apt-get update -qq || return 1
    updated=1
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

install_missing required "${PACKAGES[@]}"
install_missing fuzz "${FUZZ_PACKAGES[@]}" ||
  echo "install-deps: could not install ${FUZZ_PACKAGES[*]}; the fuzz run will be skipped"
