#!/usr/bin/env bash
# Installs every Debian package that cohort's build, tests, examples and benchmarks need.
# Idempotent: packages already present are skipped, so a second run is fast and offline-safe.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-dev libdnnl-dev zlib1g-dev libssl-dev
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist bible-kjv-text bible-kjv
  iproute2 procps
)
# The benchmark peer (never a dependency of cohort itself); skipped with COHORT_NO_PEERS=1.
if [ "${COHORT_NO_PEERS:-0}" != "1" ] && [ "${1:-}" = "--with-peers" ]; then
  PACKAGES+=(python3-torch python3-numpy)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
