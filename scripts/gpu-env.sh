# Sourced, not run: what a script on the GPU machine needs to start the binaries that
# scripts/gpu-bundle.sh packed (scripts/gpu-check.sh, bench/run_gpu_gpt.sh). That machine has the
# driver and CUDA 13 but none of our Debian packages, and maybe an older C runtime.
#
#   gpu_unpack_libs WORK BUNDLE      unpacks BUNDLE/lib.tar.gz into WORK/lib (and makes
#                                    WORK/glibc); non-zero when it cannot
#   gpu_find_cublaslt                prints the folder holding libcublasLt.so.13, or nothing
#   gpu_library_path WORK CUBLAS_DIR prints the LD_LIBRARY_PATH the binaries need (the bundle's
#                                    libraries, cuBLASLt's folder, then the caller's own path)
#   gpu_glibc_runner WORK BUNDLE LIBRARY_PATH
#                                    unpacks BUNDLE/glibc.tar.gz and sets RUNNER to the bundled
#                                    loader with LIBRARY_PATH: for binaries that do not load
#                                    against the machine's own C runtime (they were linked on
#                                    Debian 12, glibc 2.36). Run them as "${RUNNER[@]}" BINARY.
#
# The path is printed rather than exported: gpu-check.sh exports it for everything it runs, while
# a script that also starts PyTorch gives it to cohort alone (the bundle's OpenBLAS and libgomp
# are not the ones PyTorch's wheels were built against).

gpu_unpack_libs() {
  mkdir -p "$1/lib" "$1/glibc"
  timeout 45 tar -C "$1/lib" -xzf "$2/lib.tar.gz"
}

# libcublasLt.so.13: CUDA 13's, or the pip wheel PyTorch brought (nvidia/cublas/lib).
gpu_find_cublaslt() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
    /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/libcublasLt.so.13" ] && { echo "$d"; return; }
  done
  timeout 15 python3 -c 'import importlib.util, os
s = importlib.util.find_spec("nvidia.cublas")
print(os.path.join(list(s.submodule_search_locations)[0], "lib"))' 2>/dev/null
}

gpu_library_path() {
  echo "$1/lib:${2:-/usr/local/cuda/lib64}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

gpu_glibc_runner() {
  timeout 45 tar -C "$1/glibc" -xzf "$2/glibc.tar.gz"
  RUNNER=("$1/glibc/ld-linux-x86-64.so.2" --library-path "$1/glibc:$3")
}
