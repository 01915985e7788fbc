#pragma once
// Runtime CPU dispatch without SIGILL on older x86-64: a function marked COHORT_SIMD_CLONES is
// compiled twice, for x86-64-v3 (AVX2 + FMA) and for the baseline, and the loader picks one
// per process through an ifunc resolver. Put it on hot loops that the compiler vectorises.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COHORT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define COHORT_SIMD_CLONES
#endif
