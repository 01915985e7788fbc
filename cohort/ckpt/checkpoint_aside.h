#pragma once
// Moving checkpoints out of the way without losing any.
//
// A fresh run that finds an earlier run's checkpoints in its checkpoint directory, or a resume
// that abandons checkpoints written after the step it resumes from, must not leave them where
// `--resume auto`, restarts and retention would pick them up; nor may it delete them (the user
// asked for neither). They go to a new generation folder beside the directory:
//
//   <dir>.earlier/1/step-0000000400/    the first set moved aside
//   <dir>.earlier/2/step-0000000400/    the next one: same step names, nothing replaced
//
// A generation folder is claimed with mkdir (which fails when it exists), so two processes
// moving aside at the same moment never share one, and nothing already under <dir>.earlier
// (older generations, or the flat layout of cohort versions before generations) is touched.
#include <string>
#include <vector>

namespace cohort::ckpt {

// "<dir>.earlier": where checkpoints moved out of `dir` go.
std::string earlier_root(const std::string& dir);

// Creates and returns a new, empty generation folder <root>/<n> (n = one more than the highest
// number there, 1 for the first). IoError naming the folder when it cannot be created.
std::string claim_generation(const std::string& root);

// Renames each of `paths` (files or directories) into a new generation folder of `root`, under
// its own file name, and returns that folder ("" when `paths` is empty: nothing is created).
// IoError naming the path when a rename fails; what was moved before it stays moved.
std::string move_aside(const std::vector<std::string>& paths, const std::string& root);

}  // namespace cohort::ckpt
