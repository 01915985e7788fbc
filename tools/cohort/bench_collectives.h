#pragma once
// `cohort bench collectives`: a sweep of one collective over message sizes, on N ranks that the
// command forks itself, printed as an nccl-tests-style table (size, count, type, time, algbw,
// busbw, #wrong). Kept apart from the command-line parsing (bench_cmd.cc) so that the CLI file
// stays short and the sweep can be read on its own.
#include <cstddef>
#include <string>
#include <string_view>

namespace cohort::cli {

struct BenchCollectivesOptions {
  int ranks = 2;
  std::string op = "allreduce";  // allreduce, broadcast, allgather, reduce_scatter
  std::string sizes = "4K:64M";  // MIN:MAX, doubling; K, M, G suffixes (powers of 1024)
  std::string dtype = "f32";
  std::string transport = "shm";  // shm, tcp, auto
  // auto, ring, recursive_doubling, halving_doubling, hierarchical (allreduce), tree (broadcast)
  std::string algo = "auto";
  int iters = 20;
  int warmup = 5;
  int timeout_s = 60;  // deadline of each collective, and of the whole job's connection
  // native: fork the ranks, cohort's own collectives. mpi: MpiCommunicator under mpirun (the
  // command re-executes itself under mpirun unless it already runs under it).
  std::string backend = "native";
  // Shared-memory messages of at least this size are read straight out of the sender's memory
  // ("off" or "0": never; see DeviceOptions::shm_single_copy_bytes).
  std::string single_copy = "off";
  // core: pin rank r to the r-th CPU when every rank can have one (as mpirun); none: never.
  std::string bind = "core";
  // shared: buffers from the communicator's shared arena (Communicator::alloc_shared), which
  // collectives read in place; heap: ordinary memory, through the transport's rings.
  std::string buffers = "shared";
};

// "4096", "4K", "64M", "1G" -> bytes. InvalidArgument naming the text otherwise.
size_t parse_byte_size(std::string_view text);

// Validates the options (InvalidArgument with a message naming the bad one, before any process
// is started), forks the ranks, runs the sweep and prints the table from rank 0. Returns 0 on
// success, 1 if a rank failed (the message names it), 3 if any result was wrong. With backend
// "mpi" outside mpirun, replaces this process by `mpirun ... -n N <this command>` (does not
// return unless that fails: IoError); inside mpirun, runs this process's rank.
int run_bench_collectives(const BenchCollectivesOptions& options);

}  // namespace cohort::cli
