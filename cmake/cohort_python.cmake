# COHORT_PYTHON=auto|on|off: build the Python package `cohort` (python/: the pybind11 extension
# cohort._core and the pure-Python modules, assembled in ${CMAKE_BINARY_DIR}/python/cohort).
#   auto (default)  where pybind11 (Debian: pybind11-dev) and Python's headers for
#                   /usr/bin/python3 (python3-dev) are found
#   on              the same, but configure fails when either is missing
#   off             never
# Sets COHORT_HAVE_PYTHON. The interpreter is Debian's /usr/bin/python3 unless Python3_EXECUTABLE
# says otherwise: the `python3` first on PATH may be another one (pyenv) without the packages
# the tests use, and the extension only loads into the interpreter it was built for.
set(COHORT_PYTHON auto CACHE STRING "Build the Python package: auto, on or off")
set_property(CACHE COHORT_PYTHON PROPERTY STRINGS auto on off)
string(TOLOWER "${COHORT_PYTHON}" _cohort_python)
if(NOT _cohort_python MATCHES "^(auto|on|off)$")
  message(FATAL_ERROR "COHORT_PYTHON must be auto, on or off (got '${COHORT_PYTHON}')")
endif()

set(COHORT_HAVE_PYTHON OFF)
if(NOT _cohort_python STREQUAL "off")
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The interpreter cohort's package is built for")
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    # After FindPython3: pybind11 then uses that interpreter (its "new" tools) instead of
    # searching PATH for one of its own.
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    set(COHORT_HAVE_PYTHON ON)
    message(STATUS "cohort: Python package on (${Python3_EXECUTABLE}, Python ${Python3_VERSION}, "
                   "pybind11 ${pybind11_VERSION})")
  else()
    if(NOT Python3_FOUND)
      set(_why "no Python headers for ${Python3_EXECUTABLE} (install python3-dev)")
    else()
      set(_why "no pybind11 CMake config (install pybind11-dev)")
    endif()
    if(_cohort_python STREQUAL "on")
      message(FATAL_ERROR "COHORT_PYTHON=on but ${_why}; or configure with -DCOHORT_PYTHON=auto|off")
    endif()
    message(STATUS "cohort: Python package off: ${_why} (COHORT_PYTHON=${COHORT_PYTHON})")
  endif()
else()
  message(STATUS "cohort: Python package off (COHORT_PYTHON=off)")
endif()
