# Installing cohort (docs/install.md): `cmake --install build [--prefix DIR]` puts
#   bin/cohort                                the CLI
#   lib/<arch>/libcohort.so.<version>         every layer in one shared library
#   include/cohort/...                        the headers, laid out as in the source tree
#   lib/<arch>/cmake/cohort/                  find_package(cohort) -> cohort::cohort
#   lib/<arch>/pkgconfig/cohort.pc            pkg-config --cflags --libs cohort
# and `cpack -G DEB` (in the build directory) makes cohort_<version>_<arch>.deb of the same
# files, depending on the runtime packages the library and CLI load (dpkg-shlibdeps) and on
# nlohmann-json3-dev, the header-only library cohort's public headers include.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
find_package(nlohmann_json REQUIRED)  # imported targets are per directory: cohort/ found its own

# The layers (cohort/CMakeLists.txt), bottom up. Whole archives: strategies, models and codecs
# register themselves from static initialisers that nothing else references.
set(_cohort_layers cohort_core cohort_net cohort_rendezvous cohort_launch cohort_comm
    cohort_comm_init cohort_tensor cohort_ckpt cohort_kernels_cpu cohort_dispatch cohort_autograd
    cohort_ops cohort_nn cohort_optim cohort_data cohort_metrics cohort_compress cohort_parallel
    cohort_ps cohort_federated cohort_monitor cohort_train cohort_report)
if(COHORT_HAVE_CUDA)
  list(APPEND _cohort_layers cohort_kernels_cuda cohort_device)
endif()

configure_file(${PROJECT_SOURCE_DIR}/cmake/cohort_version.cc.in
               ${PROJECT_BINARY_DIR}/generated/cohort_version.cc @ONLY)
add_library(cohort_shared SHARED ${PROJECT_BINARY_DIR}/generated/cohort_version.cc)
# Each archive whole, once, then the layers as targets for what they link (OpenBLAS, OpenSSL,
# ...): an archive met again adds nothing. (CMake's WHOLE_ARCHIVE feature repeats the flag at
# every appearance of a layer in the link line, and the linker then loads its objects twice.)
set(_cohort_whole "-Wl,--whole-archive")
foreach(_layer IN LISTS _cohort_layers)
  list(APPEND _cohort_whole "$<TARGET_FILE:${_layer}>")
endforeach()
list(APPEND _cohort_whole "-Wl,--no-whole-archive")
target_link_libraries(cohort_shared PRIVATE ${_cohort_whole} ${_cohort_layers})
# Users include "cohort/<layer>/<file>.h"; some of those headers include nlohmann/json.
target_include_directories(cohort_shared INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(cohort_shared INTERFACE nlohmann_json::nlohmann_json Threads::Threads)
target_compile_features(cohort_shared INTERFACE cxx_std_20)
set_target_properties(cohort_shared PROPERTIES
  OUTPUT_NAME cohort
  EXPORT_NAME cohort
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)

install(TARGETS cohort_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS cohort_shared EXPORT cohortTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/cohort/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cohort
        FILES_MATCHING PATTERN "*.h")

set(_cohort_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/cohort)
install(EXPORT cohortTargets NAMESPACE cohort:: DESTINATION ${_cohort_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cohortConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/generated/cohortConfig.cmake
                              INSTALL_DESTINATION ${_cohort_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/generated/cohortConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/generated/cohortConfig.cmake
              ${PROJECT_BINARY_DIR}/generated/cohortConfigVersion.cmake
        DESTINATION ${_cohort_cmake_dir})
# pkg-config: paths relative to the .pc file, so an unpacked tree works where it lies.
file(RELATIVE_PATH COHORT_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${PROJECT_SOURCE_DIR}/cmake/cohort.pc.in ${PROJECT_BINARY_DIR}/generated/cohort.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/generated/cohort.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CPack: one .deb of what `cmake --install` puts under /usr.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cohort)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "cohort maintainers <cohort@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed deep-learning training: the cohort CLI, library, headers and CMake package")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "nlohmann-json3-dev")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
include(CPack)
