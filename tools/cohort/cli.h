#pragma once
// The `cohort` command line as a function, so that a program can add to the library (a strategy
// of its own, say) and still be the whole CLI, `train --workers N` included: the launcher
// re-runs the program itself for each worker (examples/local_sgd_strategy.cpp).
namespace cohort::cli {

// Parses argv as `cohort` does and runs the subcommand; returns the exit status.
int main(int argc, char** argv);

}  // namespace cohort::cli
