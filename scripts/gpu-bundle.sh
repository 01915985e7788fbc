#!/usr/bin/env bash
# Builds the CUDA test binaries here and packs them, with every shared library they load that a
# bare GPU machine lacks, into ./gpu-bundle/ (git-ignored). The GPU machine has the NVIDIA driver
# and CUDA 13 but none of our Debian packages and no network; scripts/gpu-check.sh runs the
# bundle there (docs/gpu.md: carry ["gpu-bundle"], command `bash scripts/gpu-check.sh`).
#
#   gpu-bundle/bin/            the test binaries (cohort_cuda_kernel_tests, cohort_cuda_math_tests)
#                              and the cohort CLI (gpu-check.sh trains the MLP with it)
#   gpu-bundle/lib.tar.gz      the Debian libraries they need (OpenBLAS, oneDNN, libgomp, ...);
#                              packed because OpenBLAS and oneDNN alone are 76 MB unpacked and the
#                              carry limit is 64 MiB
#   gpu-bundle/glibc.tar.gz    this machine's loader, libc, libm, libstdc++ and libgcc_s: used
#                              only if the binaries do not load against the GPU machine's own
#   gpu-bundle/MANIFEST.txt    what is in it, where each library came from, checksums
#
# Not bundled: libcuda (the driver's) and libcublasLt.so.13 (CUDA 13's, /usr/local/cuda/lib64
# there); the CUDA runtime is linked statically.
#
# Usage: scripts/gpu-bundle.sh [build-dir]       (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${1:-build}
OUTDIR=gpu-bundle
LIMIT=$((64 * 1024 * 1024))
TARGETS=(cohort_cuda_kernel_tests cohort_cuda_math_tests cohort_cli)
# From the GPU machine: the driver and CUDA 13's libraries.
FROM_GPU_MACHINE='^(libcuda|libcudart|libcublas|libcublasLt|libnvidia|libnvrtc|libnvJitLink)[.-]'
# The C runtime: the GPU machine has its own; ours goes in glibc.tar.gz for the fallback only
# (mixing one libc with another's loader breaks every process, so never in lib/).
C_RUNTIME='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libutil|libstdc\+\+|libgcc_s)[.-]'

die() {
  echo "gpu-bundle: error: $*" >&2
  exit 1
}

[ -f "$BUILD/CMakeCache.txt" ] || die "no CMake build in $BUILD (run scripts/build.sh first)"
grep -q '^COHORT_CUDA:STRING=off' "$BUILD/CMakeCache.txt" &&
  die "$BUILD is configured with COHORT_CUDA=off; reconfigure with -DCOHORT_CUDA=on"

echo "== building ${TARGETS[*]} in $BUILD"
flock /tmp/cohort-build.lock cmake --build "$BUILD" --target "${TARGETS[@]}"

BINS=("$BUILD/bin/cohort")  # the CLI, for `cohort train` with run.device = cuda
for t in cohort_cuda_kernel_tests cohort_cuda_math_tests; do
  f=$(find "$BUILD/tests/cuda" -type f -name "$t" -perm -u+x | head -n 1)
  [ -n "$f" ] || die "built $t but cannot find it under $BUILD/tests/cuda"
  BINS+=("$f")
done

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/bin"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/lib" "$STAGE/glibc"
cp "${BINS[@]}" "$OUTDIR/bin/"

# A library from the Debian package that owns it, when the installed file cannot be read.
copy_from_package() {  # soname path dest
  local pkg
  pkg=$(dpkg -S "$2" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  [ -n "$pkg" ] || die "$1: cannot read $2 and no Debian package owns it"
  echo "   $1: unreadable here, taking it from package $pkg (apt-get download)"
  (cd "$STAGE" && apt-get download "$pkg" >/dev/null && dpkg -x ./*.deb pkg && rm -f ./*.deb)
  local found
  found=$(find "$STAGE/pkg" -name "$1" | head -n 1)
  [ -n "$found" ] || die "$1 not in package $pkg"
  cp -L "$found" "$3/$1"
}

# name => resolved path, from ldd over every binary (ldd lists indirect needs too).
declare -A LIBS=()
for b in "${BINS[@]}"; do
  if ldd "$b" | grep -q 'not found'; then
    ldd "$b" | grep 'not found' >&2
    die "$b needs libraries this machine lacks"
  fi
  while read -r name path; do
    LIBS[$name]=$path
  done < <(ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 } $1 ~ /^\/.*ld-linux/ { print "ld-linux-x86-64.so.2", $1 }')
done

MANIFEST="$OUTDIR/MANIFEST.txt"
{
  echo "cohort GPU bundle, made $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
  echo "source: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- cohort tests 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "build: $BUILD, $(grep '^CMAKE_BUILD_TYPE:' "$BUILD/CMakeCache.txt" | cut -d= -f2), nvcc targets $(grep -o 'generate-code=[^ ]*' "$BUILD/build.ninja" | sort -u | cut -d= -f2- | tr '\n' ' ')"
  echo
  echo "binaries (bin/):"
  for b in "$OUTDIR"/bin/*; do
    echo "  $(basename "$b")  $(stat -c %s "$b") bytes  sha256 $(sha256sum "$b" | cut -c1-16)"
  done
  echo
  echo "libraries (name, where from here, Debian package, bytes):"
} >"$MANIFEST"

for name in $(printf '%s\n' "${!LIBS[@]}" | sort); do
  path=${LIBS[$name]}
  if [[ $name =~ $FROM_GPU_MACHINE ]]; then
    printf '  %-24s from the GPU machine (here: %s)\n' "$name" "$path" >>"$MANIFEST"
    continue
  fi
  dest=$STAGE/lib
  where=lib.tar.gz
  if [[ $name =~ $C_RUNTIME ]]; then
    dest=$STAGE/glibc
    where=glibc.tar.gz
  fi
  [[ $name == linux-vdso* ]] && continue
  cp -L "$path" "$dest/$name" 2>/dev/null || copy_from_package "$name" "$path" "$dest"
  pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1) ||
    pkg=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  printf '  %-24s %-14s %-60s %-22s %s\n' "$name" "$where" "$path" "${pkg:-?}" \
    "$(stat -c %s "$dest/$name")" >>"$MANIFEST"
done

echo "== packing libraries"
tar -C "$STAGE/lib" -czf "$OUTDIR/lib.tar.gz" .
tar -C "$STAGE/glibc" -czf "$OUTDIR/glibc.tar.gz" .

total=$(du -sb "$OUTDIR" | cut -f1)
{
  echo
  echo "lib.tar.gz: $(stat -c %s "$OUTDIR/lib.tar.gz") bytes packed, $(du -sb "$STAGE/lib" | cut -f1) unpacked"
  echo "glibc.tar.gz: $(stat -c %s "$OUTDIR/glibc.tar.gz") bytes packed"
  echo "total: $total bytes (limit $LIMIT)"
  echo
  echo "The GPU machine provides: libcuda.so.1 (driver), libcublasLt.so.13 (CUDA 13)."
} >>"$MANIFEST"

cat "$MANIFEST"
if [ "$total" -ge "$LIMIT" ]; then
  die "$OUTDIR is $total bytes, over the 64 MiB the device tool carries; it will not travel"
fi
echo "== $OUTDIR ready: $((total / 1024 / 1024)) MiB of 64"
