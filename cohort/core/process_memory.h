#pragma once
// This process's resident memory as the kernel counts it: the figure `ps`, `top` and a
// cgroup's memory limit see, beside the tensor memory the allocator counts
// (tensor/allocator.h). It includes everything the process has in RAM: code and libraries,
// thread stacks, the heap, shared memory it mapped, and the pages of mapped files it read.
//
// Read from /proc/self/status (Linux): VmRSS is what is resident now, VmHWM ("high-water mark")
// the most that was resident at once since the process started. The kernel keeps VmHWM up to
// date whenever resident memory is about to shrink (an munmap, an madvise that drops pages), so
// a peak that was released again still shows. It cannot be reset from here, so it covers the
// whole process, not one phase of it. Ranks run as threads of one process share it.
#include <cstdint>
#include <string_view>

namespace cohort {

struct ProcessMemory {
  uint64_t rss_bytes = 0;       // VmRSS
  uint64_t peak_rss_bytes = 0;  // VmHWM
};

// Zeros when /proc/self/status cannot be read or lacks the fields (not Linux).
ProcessMemory process_memory();

// The fields of a /proc/<pid>/status text ("VmHWM:\t  12345 kB" lines); zero where absent.
ProcessMemory parse_process_status(std::string_view status);

}  // namespace cohort
