// The `cohort` executable: the command line of tools/cohort/cli.h.
#include "tools/cohort/cli.h"

int main(int argc, char** argv) {
  return cohort::cli::main(argc, argv);
}
