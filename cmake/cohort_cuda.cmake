# COHORT_CUDA=auto|on|off: build kernels/cuda (the tensor engine's GPU kernels) and its tests.
#   auto (default)  where nvcc is found (on PATH, CUDACXX, or /usr/local/cuda/bin/nvcc)
#   on              the same, but configure fails when nvcc is missing
#   off             never
# Sets COHORT_HAVE_CUDA. Targets sm_90 (H100/H200) machine code plus compute_90 PTX, which the
# driver compiles for newer GPUs (CMAKE_CUDA_ARCHITECTURES overrides). The CUDA runtime is
# linked statically, so a binary needs only the driver and cuBLASLt at run time.
set(COHORT_CUDA auto CACHE STRING "Build the CUDA kernels: auto, on or off")
set_property(CACHE COHORT_CUDA PROPERTY STRINGS auto on off)
string(TOLOWER "${COHORT_CUDA}" _cohort_cuda)
if(NOT _cohort_cuda MATCHES "^(auto|on|off)$")
  message(FATAL_ERROR "COHORT_CUDA must be auto, on or off (got '${COHORT_CUDA}')")
endif()

set(COHORT_HAVE_CUDA OFF)
if(NOT _cohort_cuda STREQUAL "off")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # sm_90 SASS + compute_90 PTX
    endif()
    enable_language(CUDA)
    # CMake 3.25 (Debian 12's) knows no -std=c++20 flag for nvcc and refuses CUDA_STANDARD 20
    # at generate time; nvcc 12+ accepts it (a newer CMake defines these: left alone).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(COHORT_HAVE_CUDA ON)
    message(STATUS "cohort: CUDA kernels on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(_cohort_cuda STREQUAL "on")
    message(FATAL_ERROR "COHORT_CUDA=on but no CUDA compiler was found: install the CUDA "
                        "toolkit (nvcc), set CUDACXX, or configure with -DCOHORT_CUDA=auto|off")
  else()
    message(STATUS "cohort: CUDA kernels off (no nvcc found; COHORT_CUDA=auto)")
  endif()
endif()
