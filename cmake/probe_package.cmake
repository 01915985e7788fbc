# cohort_probe_config_package(NAME RESULT_VAR): whether find_package(NAME CONFIG) loads.
#
# Why a probe: a package's own config file may call find_package(... REQUIRED) on a dependency
# it only recommends (Debian's dnnl-config.cmake requires OpenCL, which libdnnl-dev merely
# recommends). That is a hard configure error even under QUIET. Running the find_package in a
# throw-away configure of a one-line project turns such a failure into a FALSE result, so an
# optional package that cannot be loaded falls back instead of stopping the build.
# The result is cached; delete the cache entry (or the build dir) to probe again.
function(cohort_probe_config_package name result_var)
  if(DEFINED CACHE{${result_var}})
    return()
  endif()
  set(dir ${CMAKE_BINARY_DIR}/probe-${name})
  file(MAKE_DIRECTORY ${dir}/src)
  file(WRITE ${dir}/src/CMakeLists.txt
       "cmake_minimum_required(VERSION 3.25)\nproject(probe LANGUAGES C CXX)\n"
       "find_package(${name} CONFIG REQUIRED)\n")
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S ${dir}/src -B ${dir}/build -G ${CMAKE_GENERATOR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    set(${result_var} TRUE CACHE BOOL "find_package(${name} CONFIG) loads")
    return()
  endif()
  # The first "Could NOT find"/"CMake Error" line says why; keep the message to one line.
  string(REGEX MATCH "Could NOT find[^\n]*" why "${err}")
  if(NOT why)
    string(REGEX MATCH "CMake Error[^\n]*" why "${err}")
  endif()
  set(${result_var} FALSE CACHE BOOL "find_package(${name} CONFIG) loads")
  set(COHORT_PROBE_${name}_WHY "${why}" CACHE INTERNAL "why find_package(${name}) failed")
endfunction()
