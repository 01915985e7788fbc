#pragma once
// `cohort fl run`: a server and K clients as processes of this machine, for a quick start.
#include <string>
#include <vector>

namespace cohort::cli {

// Writes a fresh job secret (hex, mode 0600) to DIR/secret, atomically.
void write_secret_file(const std::string& dir);

// Makes the job's keys in <run dir>/keys unless fl.keys names some, starts `cohort fl server`,
// waits for its address, starts K `cohort fl client`s, and waits for the server. Clients still
// running 30 s after it ended are killed. The server's exit code.
int run_local_federation(const std::string& config, std::vector<std::string> sets, int clients);

}  // namespace cohort::cli
