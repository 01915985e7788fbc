#!/usr/bin/env bash
# cohort in a project of one's own (docs/install.md), checked as a user would:
#   1. `cmake --install` into a fresh prefix; examples/external_project/ configured with
#      find_package(cohort) against it, built, and run as a 2-rank job by the installed CLI
#      (both ranks end with the same parameters; the model learned);
#   2. the same program built with pkg-config alone and run as one rank;
#   3. add_subdirectory of the source tree builds no tests, benches or examples;
#   4. `cpack -G DEB`: the package depends on runtime packages (and the header-only
#      nlohmann-json3-dev) only; unpacked, the external project builds against it and runs.
#      With COHORT_DEB_INSTALL=1 (CI sets it: a throwaway machine, root) the .deb is installed
#      with `apt-get install ./cohort_*.deb` from a clean directory, the project built against
#      /usr, run, and the package purged again.
#
#   tests/scripts/install_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail

SRC="$1" BUILD="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }
step() { echo "== $*"; }

# run_job COHORT APP: a 2-rank job; the ranks' checksums agree and the accuracy is high.
run_job() {
  local out="$TMP/job.out"
  timeout 120 "$1" run -n 2 -- "$2" 3 >"$out" 2>&1 || { cat "$out"; fail "the 2-rank job failed"; }
  cat "$out"
  local sums
  sums="$(grep -o 'parameter checksum .*' "$out" | sort -u | wc -l)"
  [[ "$(grep -c 'parameter checksum' "$out")" == 2 && "$sums" == 1 ]] ||
    fail "the ranks do not end with the same parameters"
  # 4 classes: chance is 0.25; the MLP reaches about 0.85 in 3 epochs
  awk '/^\[rank 0\] accuracy/ { found = 1; ok = $4 > 0.7 } END { exit !(found && ok) }' "$out" ||
    fail "rank 0's accuracy is missing or not above 0.7"
}

# build_app PREFIX DIR: examples/external_project against PREFIX, in DIR.
build_app() {
  cmake -S "$SRC/examples/external_project" -B "$2" -G Ninja -DCMAKE_PREFIX_PATH="$1" \
    -DCMAKE_BUILD_TYPE=Release >"$TMP/configure.log" 2>&1 ||
    { cat "$TMP/configure.log"; fail "find_package(cohort) against $1 failed"; }
  cmake --build "$2" >"$TMP/build.log" 2>&1 || { cat "$TMP/build.log"; fail "building the app failed"; }
}

step "cmake --install into a fresh prefix"
cmake --install "$BUILD" --prefix "$TMP/prefix" >"$TMP/install.log" 2>&1 ||
  { cat "$TMP/install.log"; fail "cmake --install failed"; }
LIBDIR="$(dirname "$(find "$TMP/prefix" -name 'libcohort.so' | head -1)")"
[[ -x "$TMP/prefix/bin/cohort" && -f "$TMP/prefix/include/cohort/comm/init.h" && -d "$LIBDIR" ]] ||
  fail "the prefix lacks bin/cohort, include/cohort or libcohort.so"

step "find_package(cohort) in examples/external_project, 2 ranks"
build_app "$TMP/prefix" "$TMP/app"
run_job "$TMP/prefix/bin/cohort" "$TMP/app/ddp_app"

step "pkg-config --cflags --libs cohort"
FLAGS="$(PKG_CONFIG_PATH="$LIBDIR/pkgconfig" pkg-config --cflags --libs cohort)" ||
  fail "pkg-config does not find cohort.pc"
# shellcheck disable=SC2086  # the flags are words
g++ -O1 -o "$TMP/pc_app" "$SRC/examples/external_project/main.cpp" $FLAGS -Wl,-rpath,"$LIBDIR" ||
  fail "building with pkg-config's flags failed"
"$TMP/pc_app" 1 | tee "$TMP/pc.out"
grep -q "^cohort 0\.[0-9]*\.[0-9]*: 1 rank" "$TMP/pc.out" || fail "the pkg-config build did not run"

step "add_subdirectory(cohort) builds no tests, benches or examples"
mkdir -p "$TMP/super"
cat >"$TMP/super/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(super LANGUAGES C CXX)
add_subdirectory("$SRC" cohort)
add_executable(app "$SRC/examples/external_project/main.cpp")
target_link_libraries(app PRIVATE cohort::cohort)
EOF
cmake -S "$TMP/super" -B "$TMP/super/build" -G Ninja -DCOHORT_PYTHON=off -DCOHORT_CUDA=off \
  >"$TMP/super.log" 2>&1 || { cat "$TMP/super.log"; fail "configuring a superproject failed"; }
targets="$(ninja -C "$TMP/super/build" -t targets all | sed 's/: .*//; s|.*/||' | sort -u)"
extra="$(grep -E '_tests$|_bench$|^train_bench$|^custom_model$|^tensor_parallel_mlp$' \
  <<<"$targets" || true)"
[[ -z "$extra" ]] || fail "add_subdirectory builds these too: $extra"
grep -qx app <<<"$targets" || fail "the superproject has no target app"

step "cpack -G DEB"
(cd "$BUILD" && cpack -G DEB -B "$TMP/deb" >"$TMP/cpack.log" 2>&1) ||
  { cat "$TMP/cpack.log"; fail "cpack failed"; }
DEB="$(ls "$TMP"/deb/cohort_*.deb)"
DEPENDS="$(dpkg-deb -f "$DEB" Depends)"
echo "Depends: $DEPENDS"
dev="$(tr ',' '\n' <<<"$DEPENDS" | grep -- '-dev' | grep -v nlohmann-json3-dev || true)"
[[ -z "$dev" ]] || fail "the .deb depends on development packages: $dev"
grep -q libopenblas <<<"$DEPENDS" || fail "the .deb does not depend on OpenBLAS's runtime package"
dpkg -x "$DEB" "$TMP/debroot"
build_app "$TMP/debroot/usr" "$TMP/app_deb"
run_job "$TMP/debroot/usr/bin/cohort" "$TMP/app_deb/ddp_app"

if [[ "${COHORT_DEB_INSTALL:-0}" == 1 ]]; then
  step "apt-get install ./cohort_*.deb in a clean directory"
  mkdir "$TMP/clean" && cp "$DEB" "$TMP/clean/"
  (cd "$TMP/clean" && DEBIAN_FRONTEND=noninteractive apt-get install -y ./cohort_*.deb) \
    >"$TMP/apt.log" 2>&1 || { cat "$TMP/apt.log"; fail "apt-get install of the .deb failed"; }
  trap 'DEBIAN_FRONTEND=noninteractive apt-get purge -y cohort >/dev/null 2>&1; rm -rf "$TMP"' EXIT
  build_app /usr "$TMP/app_usr"
  run_job /usr/bin/cohort "$TMP/app_usr/ddp_app"
fi
echo "install_test: OK"
