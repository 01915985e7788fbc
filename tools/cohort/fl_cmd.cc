// `cohort fl keys|server|client|run`: federated learning (docs/federated.md).
//   cohort fl keys DIR [--clients K] [--server-name NAME]...  the job's CA, certificates, secret
//   cohort fl server CONFIG [--set k=v]... [--resume auto]    serve fl.rounds rounds
//   cohort fl client CONFIG --server HOST:PORT --client-id I  one client, anywhere
//   cohort fl run CONFIG --clients K                          a server and K clients here
#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <memory>

#include <sys/stat.h>
#include "cohort/core/error.h"
#include "cohort/net/pki.h"
#include "cohort/net/secret.h"
#include "cohort/train/config/train_config.h"
#include "cohort/train/roles/federated_roles.h"
#include "tools/cohort/commands.h"
#include "tools/cohort/fl_local.h"

namespace cohort::cli {
namespace {

struct FlArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string resume;
  std::string address_file;
  std::string server;
  uint32_t client_id = 0;
  int clients = 0;
  std::string keys_dir;
  std::vector<std::string> server_names;
};

Config load(const FlArgs& a) {
  std::vector<std::string> sets = a.sets;
  if (!a.resume.empty()) sets.push_back("run.resume=" + a.resume);
  return train::load_config(a.config, sets, train::environment_snapshot());
}

int keys(const FlArgs& a) {
  net::PkiOptions o;
  if (!a.server_names.empty()) o.server_names = a.server_names;
  o.clients = a.clients;
  net::write_job_pki(a.keys_dir, o);
  write_secret_file(a.keys_dir);
  std::printf(
      "wrote the job CA, a server certificate for %zu name(s), %d client certificate(s) "
      "and the job secret to %s\n",
      o.server_names.size(), o.clients, a.keys_dir.c_str());
  return 0;
}

int server(const FlArgs& a) {
  train::FlServerSummary s = train::run_fl_server(load(a), {a.address_file});
  std::printf("federated training done: %lld rounds in %.1f s, test accuracy %.2f%%",
              (long long)s.rounds, s.seconds, 100 * s.eval.accuracy);
  if (s.epsilon >= 0) std::printf(", epsilon %.3f", s.epsilon);
  std::printf(" (run directory %s)\n", s.run_dir.c_str());
  return 0;
}

int client(const FlArgs& a) {
  federated::ClientSummary s = train::run_fl_client(load(a), {a.server, a.client_id});
  return s.bye ? 0 : 1;
}

void add_config_options(CLI::App* cmd, FlArgs& a) {
  cmd->add_option("config", a.config, "TOML config file (see docs/config.md, fl.*)")->required();
  cmd->add_option("--set", a.sets, "Override a key, e.g. --set fl.rounds=5 (repeatable)");
}

}  // namespace

void write_secret_file(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "secret").string();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << net::Secret::generate().to_hex() << "\n";
    COHORT_CHECK_IO(f.good(), "cannot write the job secret to '", tmp, "'");
  }
  COHORT_CHECK_IO(::chmod(tmp.c_str(), 0600) == 0, "cannot chmod '", tmp, "'");
  std::filesystem::rename(tmp, path);
}

void add_fl_command(CLI::App& app, Handlers& h) {
  CLI::App* fl =
      app.add_subcommand("fl", "Federated learning: a server and clients (docs/federated.md)");
  fl->require_subcommand(1);
  auto a = std::make_shared<FlArgs>();

  CLI::App* k =
      fl->add_subcommand("keys", "Write the job's CA, server and client certificates and secret");
  k->add_option("dir", a->keys_dir, "Directory to create")->required();
  k->add_option("--clients", a->clients, "Client certificates to make (client-0 ...)")
      ->default_val(10);
  k->add_option("--server-name", a->server_names,
                "A name or IP the server is reached at (repeatable; default localhost and "
                "127.0.0.1)");
  k->callback([&h, a] { h.run = [a] { return keys(*a); }; });

  CLI::App* s = fl->add_subcommand("server", "Serve federated rounds (fl.rounds) to clients");
  add_config_options(s, *a);
  s->add_option("--resume", a->resume, "`auto`: continue from the newest checkpoint");
  s->add_option("--address-file", a->address_file,
                "Write HOST:PORT here once listening (for scripts)");
  s->callback([&h, a] { h.run = [a] { return server(*a); }; });

  CLI::App* c = fl->add_subcommand("client", "Join a federated server as one client");
  add_config_options(c, *a);
  c->add_option("--server", a->server, "The server's HOST:PORT")->required();
  c->add_option("--client-id", a->client_id, "This client's id, 0..fl.clients-1 (its data part)")
      ->required();
  c->callback([&h, a] { h.run = [a] { return client(*a); }; });

  CLI::App* r = fl->add_subcommand("run", "Start a server and K clients on this machine");
  add_config_options(r, *a);
  r->add_option("--clients", a->clients, "K clients (sets fl.clients)")
      ->required()
      ->check(CLI::Range(1, 1000));
  r->callback(
      [&h, a] { h.run = [a] { return run_local_federation(a->config, a->sets, a->clients); }; });
}

}  // namespace cohort::cli
