#pragma once
// The version of the cohort library a program runs with ("0.1.0"): libcohort.so defines it
// (cmake/cohort_version.cc.in), so a program built against the installed package
// (find_package(cohort) or pkg-config) can print what it loaded.
namespace cohort {
const char* version();
}  // namespace cohort
