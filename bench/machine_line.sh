#!/usr/bin/env bash
# Sourced by the torch backend benches: machine_line prints the one line that names the machine
# a table was measured on, as docs/benchmarks.md names it (lscpu model name, cores, memcpy of
# 64 MiB as the median of 15 copies: what bounds every shared-memory collective here) and the
# load average at that moment (other jobs on a 2-core VM move every figure).
#
#   source bench/machine_line.sh; machine_line [PYTHON]
machine_line() {
  local py="${1:-/usr/bin/python3}" model gbps
  model="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  # numpy's copyto of a 64 MiB float32 array is one memcpy; the first copy faults the pages in.
  gbps="$(timeout 60 "$py" -c 'import numpy as np, time
a = np.ones(16 << 20, np.float32); b = np.empty_like(a); np.copyto(b, a); ts = []
for _ in range(15):
    t = time.perf_counter(); np.copyto(b, a); ts.append(time.perf_counter() - t)
print("%.1f" % (a.nbytes / sorted(ts)[7] / 1e9))' 2>/dev/null || echo "?")"
  echo "machine: ${model:-unknown CPU}, $(nproc --all) cores, memcpy ${gbps} GB/s (64 MiB," \
    "median of 15); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
