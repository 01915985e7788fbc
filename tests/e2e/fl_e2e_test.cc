// `cohort fl` as users run it: real server and client processes over TLS with the job's keys,
// kill -9 of clients mid-round, restarts that rejoin, a resumed server, refused peers (another
// job's certificate, a connect-and-close, garbage, a client id its certificate does not name),
// and a config whose fl.min_clients no round could reach.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"

extern char** environ;

namespace cohort::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A small, fast federation: 16-unit MLP, 15 local steps a round.
std::string sets(const std::filesystem::path& dir, const std::string& name) {
  return " --set run.dir=" + dir.string() + " --set run.name=" + name +
         " --set model.hidden=[16] --set fl.local_steps=15 --set fl.round_timeout_s=20"
         " --set fl.wait_clients_s=60";
}

std::vector<nlohmann::json> rounds_of(const std::filesystem::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run / "metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("event", "") == "fl_round") out.push_back(j);
  }
  return out;
}

// A process whose output goes to a file.
struct Proc {
  pid_t pid = -1;
  std::string log;
  Proc(const std::string& command, std::string log_file) : log(std::move(log_file)) {
    const std::string sh = "exec " + command + " > " + log + " 2>&1";  // kill hits cohort
    const char* argv[] = {"/bin/sh", "-c", sh.c_str(), nullptr};
    posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ);
  }
  int wait() {
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  void kill9() {
    if (pid > 0) ::kill(pid, SIGKILL);
    wait();
  }
  std::string output() const {
    std::ifstream f(log);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  ~Proc() {
    if (pid > 0) kill9();
  }
};

std::string wait_for_file(const std::filesystem::path& p, Clock::duration limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    std::ifstream f(p);
    std::string s;
    if (f >> s) return s;
    std::this_thread::sleep_for(50ms);
  }
  return {};
}

bool wait_for_text(const Proc& p, const std::string& text, Clock::duration limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (p.output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

TEST(FlE2e, LocalRunTrainsOverTlsAndRecordsEveryRound) {
  const auto dir = fresh_dir("cohort_fl_", "local");
  CliResult r =
      run_cli("fl run " + std::string(COHORT_SOURCE_DIR) +
              "/examples/fashion_mlp_fl.toml --clients 4 --set fl.rounds=3" + sets(dir, "run"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "(TLS)")) << r.output;
  EXPECT_TRUE(contains(r, "round 3/3")) << r.output;
  const auto rounds = rounds_of(dir / "run");
  ASSERT_EQ(rounds.size(), 3u);
  for (const auto& j : rounds) {
    EXPECT_EQ(j["sampled"].size(), 2u);  // C = 0.5 of 4
    EXPECT_EQ(j["participants"].size(), 2u);
    EXPECT_GT(j["bytes_out_per_client"].get<double>(), 4.0 * 784 * 16);
  }
  EXPECT_GT(rounds.back()["test_accuracy"].get<double>(), 0.6);
  EXPECT_TRUE(std::filesystem::exists(dir / "run" / "keys" / "ca.pem"));
}

TEST(FlE2e, ServerResumesAfterItsLastCheckpointedRound) {
  const auto dir = fresh_dir("cohort_fl_", "resume");
  ASSERT_EQ(
      run_cli("fl run " + std::string(COHORT_SOURCE_DIR) +
              "/examples/fashion_mlp_fl.toml --clients 2 --set fl.rounds=2" + sets(dir, "run"))
          .status,
      0);
  CliResult r = run_cli("fl run " + std::string(COHORT_SOURCE_DIR) +
                        "/examples/fashion_mlp_fl.toml --clients 2 --set fl.rounds=3"
                        " --set run.resume=auto" +
                        sets(dir, "run"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "resumed after round 2")) << r.output;
  EXPECT_FALSE(contains(r, "round 2/3")) << r.output;
  EXPECT_TRUE(contains(r, "round 3/3")) << r.output;
}

TEST(FlE2e, KilledClientsAreLeftOutTheRoundGoesOnAndRestartedOnesRejoin) {
  const auto dir = fresh_dir("cohort_fl_", "kill");
  const std::string keys = (dir / "keys").string();
  ASSERT_EQ(run_cli("fl keys " + keys + " --clients 10").status, 0);
  const std::string common = " " + std::string(COHORT_SOURCE_DIR) +
                             "/examples/fashion_mlp_fl.toml" + sets(dir, "run") +
                             " --set fl.keys=" + keys +
                             " --set fl.fraction=1 --set fl.min_clients=5 --set fl.rounds=6"
                             " --set fault.fl_train_delay_s=1.5";
  Proc server(std::string(COHORT_BIN) + " fl server" + common + " --address-file " +
                  (dir / "addr").string(),
              (dir / "server.log").string());
  const std::string addr = wait_for_file(dir / "addr", 60s);
  ASSERT_FALSE(addr.empty()) << server.output();
  auto client = [&](int i) {
    return std::make_unique<Proc>(std::string(COHORT_BIN) + " fl client" + common + " --server " +
                                      addr + " --client-id " + std::to_string(i),
                                  (dir / ("client" + std::to_string(i) + ".log")).string());
  };
  std::vector<std::unique_ptr<Proc>> clients;
  for (int i = 0; i < 10; ++i) clients.push_back(client(i));
  ASSERT_TRUE(wait_for_text(server, "round 1/6", 120s)) << server.output();
  // Round 2's tasks go out within milliseconds of the line; its clients then train and wait
  // fault.fl_train_delay_s (1.5 s): 0.5 s in, the three are mid-round.
  std::this_thread::sleep_for(500ms);
  const auto killed_at = Clock::now();
  for (int i : {7, 8, 9}) clients[size_t(i)]->kill9();  // mid round 2
  ASSERT_TRUE(wait_for_text(server, "round 2/6", 60s)) << server.output();
  EXPECT_LT(Clock::now() - killed_at, 25s);  // within the round's deadline
  for (int i : {7, 8, 9}) clients[size_t(i)] = client(i);
  ASSERT_EQ(server.wait(), 0) << server.output();
  const auto rounds = rounds_of(dir / "run");
  ASSERT_EQ(rounds.size(), 6u) << server.output();
  EXPECT_LE(rounds[1]["participants"].size(), 7u);
  EXPECT_GE(rounds[1]["dropped"].size(), 3u);
  std::set<int> rejoined;
  for (size_t r = 2; r < rounds.size(); ++r)
    for (int id : rounds[r]["participants"]) rejoined.insert(id);
  for (int i : {7, 8, 9}) EXPECT_TRUE(rejoined.contains(i)) << "client " << i << " never rejoined";
  for (auto& c : clients) EXPECT_EQ(c->wait(), 0) << c->output();
}

TEST(FlE2e, AClientWithAnotherJobsCertificateIsRefusedAndLogged) {
  const auto dir = fresh_dir("cohort_fl_", "certs");
  ASSERT_EQ(run_cli("fl keys " + (dir / "a").string() + " --clients 2").status, 0);
  ASSERT_EQ(run_cli("fl keys " + (dir / "b").string() + " --clients 2").status, 0);
  const std::string common = " " + std::string(COHORT_SOURCE_DIR) +
                             "/examples/fashion_mlp_fl.toml" + sets(dir, "run") +
                             " --set fl.rounds=1 --set fl.min_clients=1 --set fl.wait_clients_s=8";
  Proc server(std::string(COHORT_BIN) + " fl server" + common + " --set fl.keys=" +
                  (dir / "a").string() + " --address-file " + (dir / "addr").string(),
              (dir / "server.log").string());
  const std::string addr = wait_for_file(dir / "addr", 60s);
  ASSERT_FALSE(addr.empty()) << server.output();
  CliResult bad = run_cli("fl client" + common + " --set fl.keys=" + (dir / "b").string() +
                          " --server " + addr + " --client-id 0");
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_TRUE(contains(bad, "TLS")) << bad.output;
  EXPECT_TRUE(wait_for_text(server, "TLS", 10s)) << server.output();
  // A connect-and-close with no byte (it once wedged the TLS server for good), then garbage on
  // the port, do not stop the server: a good client still finishes the job.
  const std::string tcp =
      "/dev/tcp/" + addr.substr(0, addr.find(':')) + "/" + addr.substr(addr.find(':') + 1);
  run_shell("bash -c 'exec 3<>" + tcp + "; exec 3>&-'");
  run_shell("bash -c 'head -c 200000 /dev/urandom > " + tcp + "'");
  CliResult good = run_cli("fl client" + common + " --set fl.keys=" + (dir / "a").string() +
                           " --server " + addr + " --client-id 1");
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_EQ(server.wait(), 0) << server.output();
}

TEST(FlE2e, AClientWhoseIdIsNotItsCertificatesIsRefusedNamingBoth) {
  const auto dir = fresh_dir("cohort_fl_", "ids");
  const auto keys = dir / "keys", stolen = dir / "stolen";
  ASSERT_EQ(run_cli("fl keys " + keys.string() + " --clients 3").status, 0);
  // Client 2's key directory, holding client 1's certificate and key under client 2's names.
  std::filesystem::create_directories(stolen);
  for (const char* f : {"ca.pem", "secret"}) std::filesystem::copy_file(keys / f, stolen / f);
  std::filesystem::copy_file(keys / "client-1.pem", stolen / "client-2.pem");
  std::filesystem::copy_file(keys / "client-1.key", stolen / "client-2.key");
  const std::string common = " " + std::string(COHORT_SOURCE_DIR) +
                             "/examples/fashion_mlp_fl.toml" + sets(dir, "run") +
                             " --set fl.rounds=1 --set fl.min_clients=1 --set fl.wait_clients_s=8";
  Proc server(std::string(COHORT_BIN) + " fl server" + common + " --set fl.keys=" + keys.string() +
                  " --address-file " + (dir / "addr").string(),
              (dir / "server.log").string());
  const std::string addr = wait_for_file(dir / "addr", 60s);
  ASSERT_FALSE(addr.empty()) << server.output();
  CliResult bad = run_cli("fl client" + common + " --set fl.keys=" + stolen.string() +
                          " --server " + addr + " --client-id 2");
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_TRUE(contains(bad, "claims to be client 2 but its certificate names client 1"))
      << bad.output;
  EXPECT_TRUE(
      wait_for_text(server, "claims to be client 2 but its certificate names client 1", 10s))
      << server.output();
  CliResult good = run_cli("fl client" + common + " --set fl.keys=" + keys.string() + " --server " +
                           addr + " --client-id 1");
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_EQ(server.wait(), 0) << server.output();
  EXPECT_EQ(rounds_of(dir / "run").at(0)["participants"], nlohmann::json::array({1}));
}

TEST(FlE2e, MinClientsAboveTheClientsExitsAtOnceNamingTheKeys) {
  const auto dir = fresh_dir("cohort_fl_", "min");
  const auto start = Clock::now();
  CliResult r = run_cli("fl run " + std::string(COHORT_SOURCE_DIR) +
                        "/examples/fashion_mlp_fl.toml --clients 2 --set fl.min_clients=3" +
                        sets(dir, "run"));
  EXPECT_LT(Clock::now() - start, 5s) << r.output;  // it waited 31 s for clients
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r, "fl.min_clients = 3 is more than fl.clients = 2")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "run" / "keys")) << "nothing is made before the check";
}

TEST(FlE2e, AServerThatFailsAfterListeningTakesItsClientsDownAtOnce) {
  const auto dir = fresh_dir("cohort_fl_", "fail");
  const auto start = Clock::now();
  CliResult r = run_cli("fl run " + std::string(COHORT_SOURCE_DIR) +
                        "/examples/fashion_mlp_fl.toml --clients 2 --set run.resume=" +
                        (dir / "no-such-checkpoint").string() + sets(dir, "run"));
  EXPECT_LT(Clock::now() - start, 15s) << r.output;  // its clients were waited for 30 s
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r, "no-such-checkpoint")) << r.output;
}

}  // namespace
}  // namespace cohort::testing
