#pragma once
// The sweep arguments shared by the stand-alone allreduce peers (mpi_allreduce, shm_limit):
// [--sizes MIN:MAX] [--iters I] [--warmup W], sizes with K/M/G suffixes, doubling.
#include <cstdlib>
#include <string>

namespace bench {

inline size_t parse_size(const std::string& s) {
  char* end = nullptr;
  size_t v = std::strtoull(s.c_str(), &end, 10);
  std::string suffix = end;
  if (suffix == "K" || suffix == "k") v <<= 10;
  if (suffix == "M" || suffix == "m") v <<= 20;
  if (suffix == "G" || suffix == "g") v <<= 30;
  return v;
}

struct SweepArgs {
  size_t min_bytes = 4096, max_bytes = size_t{64} << 20;
  int iters = 20, warmup = 5;
  int ranks = 2;          // shm_limit only (mpi_allreduce takes mpirun's -n)
  bool in_place = false;  // shm_limit only: reduce into the inputs (out of place: as the bench)
};

// False on an unknown flag or a bad value. `-n` and `--in-place 0|1` only where allowed.
inline bool parse_sweep_args(int argc, char** argv, SweepArgs& a, bool limit_flags = false) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--sizes") {
      size_t colon = v.find(':');
      a.min_bytes = parse_size(v.substr(0, colon));
      a.max_bytes = colon == std::string::npos ? a.min_bytes : parse_size(v.substr(colon + 1));
    } else if (k == "--iters") {
      a.iters = std::atoi(v.c_str());
    } else if (k == "--warmup") {
      a.warmup = std::atoi(v.c_str());
    } else if (k == "-n" && limit_flags) {
      a.ranks = std::atoi(v.c_str());
    } else if (k == "--in-place" && limit_flags && (v == "0" || v == "1")) {
      a.in_place = v == "1";
    } else {
      return false;
    }
  }
  if (argc % 2 == 0) return false;  // a flag without its value
  return a.min_bytes > 0 && a.min_bytes <= a.max_bytes && a.iters >= 1 && a.warmup >= 0 &&
         a.ranks >= 1 && a.ranks <= 64;
}

}  // namespace bench
