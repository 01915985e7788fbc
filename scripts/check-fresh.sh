#!/usr/bin/env bash
# Would a fresh Debian machine that ran scripts/install-deps.sh build and test cohort?
#   check-fresh.sh [--packages FILE] [BUILD_DIR]        (BUILD_DIR: a configured, built ./build)
#
# Why: a package that happens to be installed here but is missing from install-deps.sh only
# shows up on the next fresh machine (that is how ocl-icd-opencl-dev, which Debian's dnnl CMake
# config requires, was found). So this lists every file the build and the tests load and maps
# each to the Debian package that owns it (dpkg -S). A package is fine when it is
#   - in install-deps.sh's list (install-deps.sh --list --with-peers: PACKAGES, FUZZ_PACKAGES,
#     the benchmark peer), or --packages FILE (whitespace-separated names, for tests), or
#   - pulled in by those packages' dependencies (apt-cache depends --recurse, any alternative
#     of an "a | b" dependency and any provider of a virtual package counts), or
#   - Essential or Priority: required (on every Debian system), or a dependency of one.
# Every other package is an error, printed with one file that needed it; exit status 1.
#
# The files: the CMake files configure read (build.ninja's RERUN_CMAKE inputs: config and
# find-module files), CMakeCache.txt entries that name a file or a CMake config dir, every
# header an object included (ninja -t deps), the shared libraries each built executable loads
# (ldd), and the programs the tests and scripts run: mpirun, ip, timeout, the compilers
# (required); chromium-headless-shell (tests/report), /usr/bin/python3 with torch and numpy
# (the benchmark peer) and clang with its libFuzzer runtime (scripts/fuzz.sh) are optional:
# checked only where installed. tc is not used by any test. Files under /usr/local, the source
# tree or the build tree are not Debian's and are ignored; any other file that no package owns
# is an error too.
#
# The dependency closure is cached in BUILD_DIR/check-fresh/, keyed by the package list and
# the dpkg status file, so a second run takes a few seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")

list_file=""
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --packages) list_file=${2:?--packages needs a file}; shift 2 ;;
    -h|--help) sed -n '2,3p' "$0"; exit 0 ;;
    *) build=$1; shift ;;
  esac
done
build=$(realpath "${build:-./build}")
die() { echo "check-fresh: $*" >&2; exit 2; }
for tool in dpkg dpkg-query apt-cache ninja ldd; do
  command -v "$tool" >/dev/null || die "'$tool' not found (this check needs a Debian system)"
done
[ -f "$build/CMakeCache.txt" ] || die "$build/CMakeCache.txt not found: configure and build first"
[ -f "$build/build.ninja" ] || die "$build/build.ninja not found: configure with -G Ninja"

# Scratch files per run (two runs may share a build dir); the closures are cached beside it.
cache_dir="$build/check-fresh"
mkdir -p "$cache_dir"
work=$(mktemp -d "$cache_dir/run.XXXXXX")
trap 'rm -rf "$work"' EXIT
needs="$work/needs.tsv"  # PATH <tab> what needed it
: >"$needs"
need() { printf '%s\t%s\n' "$1" "$2" >>"$needs"; }

# --- The package list --------------------------------------------------------------------
if [ -n "$list_file" ]; then
  tr -s ' \t' '\n\n' <"$list_file" | grep -v '^$' | sort -u >"$work/list.txt"
else
  "$here/install-deps.sh" --list --with-peers | sort -u >"$work/list.txt"
fi
dpkg-query -W -f='${Package}\t${Essential}\t${Priority}\n' |
  awk -F'\t' '$2 == "yes" || $3 == "required" { print $1 }' | sort -u >"$work/required.txt"

# --- What the build read: CMake files, cache entries, headers ------------------------------
collect_cmake() {
  local cache dir f
  # build.ninja depends on every file CMake read (to re-run it when one changes); the probe
  # configures of cmake/probe_package.cmake have their own build.ninja under the build dir.
  while IFS= read -r dir; do
    while IFS= read -r f; do
      need "$f" "read by CMake (${dir#"$build"}/build.ninja)"
    done < <(ninja -C "$dir" -t query build.ninja 2>/dev/null | sed -n 's/^ *| \(\/.*\)$/\1/p')
  done < <(find "$build" -maxdepth 4 -name build.ninja -exec dirname {} \;)
  # Cache entries whose value is a path (or a ;-list of paths): FILEPATH/PATH and the
  # INTERNAL/STRING ones pkg-config and the find modules leave (e.g. OPENBLAS_INCLUDE_DIRS).
  while IFS= read -r cache; do
    sed -n 's/^\([A-Za-z0-9_.+-]*\):[A-Z]*=\(\/.*\)$/\1\t\2/p' "$cache" |
      grep -v -E '^(CMAKE_(INSTALL_PREFIX|CACHEFILE_DIR|HOME_DIRECTORY)|[A-Za-z0-9_]+_(BINARY|SOURCE)_DIR)\b' |
      while IFS=$'\t' read -r key value; do
        tr ';' '\n' <<<"$value" | while IFS= read -r f; do
          case "$f" in /*) ;; *) continue ;; esac
          if [ -d "$f" ]; then
            # A directory: its CMake config files stand for it (header and library
            # directories are covered file by file by ninja -t deps and ldd).
            for g in "$f"/*[Cc]onfig.cmake "$f"/*-config.cmake; do
              if [ -f "$g" ]; then need "$g" "$key in ${cache#"$build"/}"; fi
            done
          else
            need "$f" "$key in ${cache#"$build"/}"
          fi
        done
      done
  done < <(find "$build" -maxdepth 4 -name CMakeCache.txt)
}

collect_headers() {
  # Lines of `ninja -t deps`: "<object>: #deps N, ..." then one indented path per header.
  ninja -C "$build" -t deps 2>/dev/null | awk '
    /^[^ ]/ { obj = $1; sub(/:$/, "", obj); next }
    /^ +\// { p = $1; if (!(p in seen)) { seen[p] = 1; print p "\theader included by " obj } }
  ' >>"$needs"
  grep -q 'header included by' "$needs" || die "ninja -t deps lists nothing in $build: build first"
}

# --- What runs: shared libraries and programs -----------------------------------------------
collect_libraries() {
  local exe line
  while IFS= read -r exe; do
    [ "$(head -c 4 "$exe" | tail -c 3)" = ELF ] || continue
    while IFS= read -r line; do
      case "$line" in
        *"=> not found"*) need "MISSING:${line%% *}" "shared library loaded by ${exe#"$build"/}" ;;
        *"=> /"*) line=${line#*=> }; need "${line%% (*}" "loaded by ${exe#"$build"/}" ;;
        /*) need "${line%% (*}" "loaded by ${exe#"$build"/}" ;;
      esac
    done < <(ldd "$exe" 2>/dev/null | sed 's/^[[:space:]]*//')
  done < <(find "$build" -path "$cache_dir" -prune -o -path '*/CMakeFiles' -prune -o -type f -perm -u+x -print)
}

# program NAME WHO [optional]: the file NAME resolves to on PATH.
program() {
  local path
  if path=$(command -v "$1"); then
    need "$path" "program $1, run by $2"
  elif [ "${3:-}" != optional ]; then
    need "MISSING:$1" "program run by $2"
  fi
}

collect_programs() {
  program mpirun "tests/mpi, tests/e2e, cohort bench"
  program ip "tests/comm/netns_test.cc"
  program timeout "tests/mpi, tests/e2e, tests/report"
  program chromium-headless-shell "tests/report (the report screenshot; skipped without it)" optional
  program cmake "scripts/build.sh"
  program ninja "scripts/build.sh"
  program clang "scripts/fuzz.sh" optional
  program clang++ "scripts/fuzz.sh" optional
  if command -v clang >/dev/null; then
    local rt
    rt=$(clang -print-runtime-dir 2>/dev/null || true)
    if [ -f "$rt/libclang_rt.fuzzer-x86_64.a" ]; then
      need "$rt/libclang_rt.fuzzer-x86_64.a" "libFuzzer runtime, linked by scripts/fuzz.sh"
    fi
  fi
  # The benchmark peer and the safetensors interop tests: optional, so only where installed.
  if [ -x /usr/bin/python3 ]; then
    need /usr/bin/python3 "the PyTorch peer (bench/, tests/ckpt, tests/e2e)"
    local mod f
    for mod in torch numpy; do
      f=$(/usr/bin/python3 -c "import $mod; print($mod.__file__)" 2>/dev/null) || continue
      need "$f" "python3 module $mod (the PyTorch peer)"
    done
  fi
}

# --- Files -> packages -----------------------------------------------------------------------
# merged_usr PATH...: each path plus its other spelling under merged /usr (/lib <-> /usr/lib):
# dpkg records the path the package shipped, the loader may report the other one.
merged_usr() {
  local p
  for p in "$@"; do
    echo "$p"
    case "$p" in
      /usr/lib/* | /usr/lib64/* | /usr/bin/* | /usr/sbin/*) echo "${p#/usr}" ;;
      /lib/* | /lib64/* | /bin/* | /sbin/*) echo "/usr$p" ;;
    esac
  done
}

# owners PATH...: "PACKAGES<tab>PATH" per path some package owns (PACKAGES: "a, b").
owners() {
  [ $# -gt 0 ] || return 0
  dpkg -S "$@" 2>/dev/null | grep -v '^diversion by' |
    sed -n 's/^\(.*\): \(\/.*\)$/\1\t\2/p' || true
}

map_files() {
  local build_real src_real path why real hit
  build_real=$(realpath "$build")
  src_real=$(realpath "$src")
  sort -t $'\t' -k1,1 -u "$needs" | awk -F'\t' -v b="$build_real/" -v s="$src_real/" '
    index($1, "/usr/local/") == 1 || index($1, b) == 1 || index($1, s) == 1 { next }
    { print }' >"$work/files.tsv"
  # One dpkg -S for all paths as given; then, one by one, the few nobody owns: their real path
  # (alternatives such as /usr/bin/mpirun, /usr/include/x86_64-linux-gnu/mpi) and the
  # merged-/usr spellings.
  grep '^/' "$work/files.tsv" | cut -f1 | xargs -r -d '\n' dpkg -S 2>/dev/null |
    grep -v '^diversion by' | sed -n 's/^\(.*\): \(\/.*\)$/\1\t\2/p' >"$work/owners.tsv" || true
  awk -F'\t' -v res="$work/resolved.tsv" -v rest="$work/unowned.tsv" '
    NR == FNR { owner[$2] = $1; next }
    ($1 in owner) { print owner[$1] "\t" $1 "\t" $2 > res; next }
    { print > rest }' "$work/owners.tsv" "$work/files.tsv"
  touch "$work/resolved.tsv" "$work/unowned.tsv"
  while IFS=$'\t' read -r path why; do
    case "$path" in
      MISSING:*) printf 'MISSING\t%s\t%s\n' "${path#MISSING:}" "$why" >>"$work/resolved.tsv"; continue ;;
    esac
    real=$(realpath -q "$path" || echo "$path")
    case "$real" in /usr/local/* | "$build_real"/* | "$src_real"/*) continue ;; esac
    mapfile -t alts < <(merged_usr "$path" "$real" | sort -u)
    hit=$(owners "${alts[@]}" | head -1 | cut -f1)
    printf '%s\t%s\t%s\n' "${hit:-UNOWNED}" "$path" "$why" >>"$work/resolved.tsv"
  done <"$work/unowned.tsv"
}

# closure ROOTS_FILE OUT: every package name in the recursive dependencies of the roots.
# apt-cache prints each package it visits unindented (virtual ones as <name>), then its
# dependencies ("  Depends: x", " |Depends: x" for the first of alternatives, "<x>" for a
# virtual target) and the providers of a virtual target indented further. Every name on any
# such line is taken, so any alternative and any provider satisfies the check.
closure() {
  xargs -r apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances <"$1" 2>/dev/null |
    sed -e 's/^ *|\{0,1\}[A-Za-z-]*: //' -e 's/^ *//' -e 's/[<>]//g' -e 's/:[a-z0-9]*$//' |
    grep -E '^[a-z0-9][a-z0-9+.-]*$' | sort -u >"$2"
  cat "$1" >>"$2"
  sort -u -o "$2" "$2"
}

report() {
  local allowed=$1
  awk -F'\t' -v allowed="$allowed" '
    BEGIN { while ((getline p < allowed) > 0) ok[p] = 1 }
    $1 == "MISSING" { printf "  %s: not installed (%s)\n", $2, $3; bad++; next }
    $1 == "UNOWNED" { printf "  %s: owned by no Debian package (%s)\n", $2, $3; bad++; next }
    {
      n = split($1, pk, /, */); fine = 0; names = ""
      for (i = 1; i <= n; i++) { sub(/:.*/, "", pk[i]); if (pk[i] in ok) fine = 1
                                 names = names (i > 1 ? " or " : "") pk[i] }
      if (!fine && !(names in shown)) {
        shown[names] = 1; bad++
        printf "  %s (needed for %s: %s)\n", names, $2, $3
      }
    }
    END { exit bad > 0 }' "$work/resolved.tsv"
}

collect_cmake
collect_headers
collect_libraries
collect_programs
map_files

cat "$work/list.txt" "$work/required.txt" | sort -u >"$work/roots.txt"
key=$( (cat "$work/roots.txt"; stat -c %Y /var/lib/dpkg/status) | sha256sum | cut -c1-16)
allowed="$cache_dir/closure-$key.txt"
if [ ! -s "$allowed" ]; then
  closure "$work/roots.txt" "$work/closure.txt"
  mv "$work/closure.txt" "$allowed"
fi

files=$(wc -l <"$work/resolved.tsv")
if ! out=$(report "$allowed"); then
  echo "check-fresh: a fresh machine that ran scripts/install-deps.sh would miss these" \
    "(add each to PACKAGES or FUZZ_PACKAGES there):" >&2
  echo "$out" >&2
  exit 1
fi
echo "check-fresh: ok: the $files files the build and tests use come from" \
  "install-deps.sh's $(wc -l <"$work/list.txt") packages, their dependencies or required ones"
