#pragma once
// run.device: the device `cohort train` trains on, and the one place the trainer reaches a GPU
// backend (DESIGN.md: feature selection at one registration edge per backend).
#include "cohort/core/config.h"
#include "cohort/tensor/dtype.h"

namespace cohort::train {

// The device run.device names, its backend enabled. "cuda" needs a build with CUDA and a usable
// GPU (or a backend the program registered itself, as tests register a stand-in), and one
// worker; otherwise an InvalidArgument naming run.device and what is missing.
Device select_device(const Config& cfg, int world_size);

// On a GPU only the single-process strategy runs yet: the others communicate from host memory.
// InvalidArgument naming parallel.strategy otherwise.
void check_strategy_on_device(const Config& cfg, Device device, const std::string& running);

}  // namespace cohort::train
