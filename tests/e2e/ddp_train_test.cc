// `cohort train --workers N` end to end, with real processes: data-parallel training, exact
// resume after a crash, restarts after a killed worker, a clean failure without restarts, and
// a corrupt checkpoint skipped on resume.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using cohort::testing::CliResult;
using cohort::testing::contains;
using cohort::testing::read_bytes;
using cohort::testing::run_cli;

namespace {

// A small, fast job: synthetic 784-feature data, the default MLP, one thread per worker,
// metrics every step.
std::string job(const fs::path& dir, const std::string& name) {
  return "train /dev/null --set data.dataset=synthetic --set data.synthetic_samples=1024"
         " --set data.batch_size=32 --set run.threads=1 --set run.log_every=1"
         " --set run.progress=plain --set comm.timeout_s=30 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

fs::path fresh_dir(const std::string& name) {
  return cohort::testing::fresh_dir("cohort_ddp_e2e_", name);
}
using cohort::testing::newest_checkpoint;

// step -> loss of the metrics file; a resumed run appends, so the last record of a step wins.
std::map<int64_t, double> step_losses(const fs::path& metrics) {
  std::map<int64_t, double> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "step") out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

// Processes whose command line mentions `needle` (a test's unique directory).
int processes_mentioning(const std::string& needle) {
  int n = 0;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    if (std::atoi(e->d_name) == getpid()) continue;
    std::string cmd = read_bytes(fs::path("/proc") / e->d_name / "cmdline");
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  closedir(d);
  return n;
}

// Runs `full` to the end; runs `crash` with rank 0 killed (SIGKILL) after step `kill_at`, then
// again with `--resume auto`, whose result lands in *resumed.
void run_crash_and_resume(const std::string& full, const std::string& crash, int kill_at,
                          CliResult* resumed) {
  CliResult f = run_cli(full);
  ASSERT_EQ(f.status, 0) << f.output;
  CliResult c = run_cli(
      crash + " --set fault.kill_rank=0 --set fault.kill_at_step=" + std::to_string(kill_at));
  ASSERT_EQ(c.status, 128 + 9) << c.output;
  *resumed = run_cli(crash + " --resume auto");
  ASSERT_EQ(resumed->status, 0) << resumed->output;
}

}  // namespace

TEST(DdpTrain, TwoWorkersTrainAndReportCommunication) {
  fs::path d = fresh_dir("two");
  CliResult r = run_cli(job(d, "two") + " --workers 2");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "[rank 0]")) << r.output;
  EXPECT_TRUE(contains(r, "2 workers (native)")) << r.output;
  EXPECT_TRUE(contains(r, "hidden behind backward")) << r.output;
  // Every rank records its own step timings and traffic.
  auto last = [](const fs::path& p) {
    std::ifstream in(p);
    std::string line, prev;
    while (std::getline(in, line)) prev = line;
    return nlohmann::json::parse(prev);
  };
  for (const char* f : {"metrics.jsonl", "metrics.rank1.jsonl"}) {
    nlohmann::json s = last(d / "two" / f);
    EXPECT_EQ(s["event"], "summary") << f;
    EXPECT_EQ(s["steps"], 16) << f;  // 1024 samples / 2 workers / batch 32
    EXPECT_GT(s["bytes_sent"].get<double>(), 0) << f;
    EXPECT_GT(s["comm_ms"].get<double>(), 0) << f;
    EXPECT_TRUE(s.contains("exposed_comm_ms")) << f;
  }
}

// A crash (SIGKILL after step 45) and `--resume auto` give the same losses and the same final
// parameters, bit for bit, as an uninterrupted run.
TEST(DdpTrain, ResumeAfterCrashIsExact) {
  fs::path d = fresh_dir("resume");
  std::string common = " --set train.epochs=2 --set ckpt.every_steps=10";
  CliResult resumed;
  ASSERT_NO_FATAL_FAILURE(
      run_crash_and_resume(job(d, "full") + common, job(d, "crash") + common, 45, &resumed));
  EXPECT_TRUE(contains(resumed, "resumed from step")) << resumed.output;
  EXPECT_EQ(step_losses(d / "full" / "metrics.jsonl"), step_losses(d / "crash" / "metrics.jsonl"));
  fs::path a = newest_checkpoint(d / "full"), b = newest_checkpoint(d / "crash");
  EXPECT_EQ(a.filename(), "step-0000000064");
  EXPECT_EQ(b.filename(), a.filename());
  EXPECT_EQ(read_bytes(a / "model.safetensors"), read_bytes(b / "model.safetensors"));
  EXPECT_EQ(read_bytes(a / "optimizer.safetensors"), read_bytes(b / "optimizer.safetensors"));
}

// A GPT with dropout: each dropout site draws its masks from a call counter, which checkpoints
// carry as module state ("<site>.rng_counter" in model.safetensors). A crash and `--resume auto`
// give the same losses and the same final checkpoint, bit for bit, as an uninterrupted run.
TEST(DdpTrain, ResumeWithDropoutIsExact) {
  fs::path d = fresh_dir("dropout");
  fs::path text = d / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "In the beginning was the word, line " << i << ".\n";
  }
  auto gpt = [&](const std::string& name) {
    return "train /dev/null --set model.type=gpt --set model.n_layer=1 --set model.n_head=2"
           " --set model.n_embd=16 --set model.block_size=16 --set model.dropout=0.2"
           " --set data.dataset=text --set data.path=" +
           text.string() +
           " --set data.batch_size=8 --set train.max_steps=30 --set train.sample_bytes=0"
           " --set ckpt.every_steps=10 --set ckpt.async=false --set run.threads=1"
           " --set run.log_every=1"
           " --set run.progress=plain --set comm.timeout_s=30 --set run.dir=" +
           d.string() + " --set run.name=" + name;
  };
  CliResult resumed;
  ASSERT_NO_FATAL_FAILURE(run_crash_and_resume(gpt("full"), gpt("crash"), 25, &resumed));
  EXPECT_TRUE(contains(resumed, "resumed from step 20")) << resumed.output;
  EXPECT_EQ(step_losses(d / "full" / "metrics.jsonl"), step_losses(d / "crash" / "metrics.jsonl"));
  fs::path a = newest_checkpoint(d / "full"), b = newest_checkpoint(d / "crash");
  EXPECT_EQ(a.filename(), "step-0000000030");
  EXPECT_EQ(b.filename(), a.filename());
  std::string model = read_bytes(a / "model.safetensors");
  EXPECT_NE(model.find("drop.rng_counter"), std::string::npos);
  // (EXPECT_TRUE: a byte dump of the files would drown the report.)
  EXPECT_TRUE(model == read_bytes(b / "model.safetensors")) << "model.safetensors differ";
  EXPECT_TRUE(read_bytes(a / "optimizer.safetensors") == read_bytes(b / "optimizer.safetensors"))
      << "optimizer.safetensors differ";
}

// kill -9 of one worker mid-epoch; with --max-restarts 1 the job completes and ends with the
// parameters of the uninterrupted run.
TEST(DdpTrain, KilledWorkerIsRestartedAndResultIsExact) {
  fs::path d = fresh_dir("restart");
  std::string common = " --workers 2 --set train.epochs=2 --set ckpt.every_steps=5";
  CliResult full = run_cli(job(d, "full") + common);
  ASSERT_EQ(full.status, 0) << full.output;
  CliResult killed =
      run_cli(job(d, "killed") + common +
              " --max-restarts 1 --set fault.kill_rank=1 --set fault.kill_at_step=12");
  ASSERT_EQ(killed.status, 0) << killed.output;
  EXPECT_TRUE(contains(killed, "restarting")) << killed.output;
  EXPECT_TRUE(contains(killed, "resumed from step")) << killed.output;
  fs::path a = newest_checkpoint(d / "full"), b = newest_checkpoint(d / "killed");
  EXPECT_EQ(a.filename(), b.filename());
  EXPECT_EQ(read_bytes(a / "model.safetensors"), read_bytes(b / "model.safetensors"));
}

// Without restarts every process ends, non-zero, well within the deadline, and the launcher
// names the dead rank.
TEST(DdpTrain, KilledWorkerWithoutRestartsFailsCleanly) {
  fs::path d = fresh_dir("norestart");
  auto t0 = std::chrono::steady_clock::now();
  CliResult r =
      run_cli(job(d, "x") + " --workers 2 --set fault.kill_rank=1 --set fault.kill_at_step=5");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "rank 1")) << r.output;
  EXPECT_TRUE(contains(r, "signal 9")) << r.output;
  EXPECT_LT(secs, 30.0);
  EXPECT_EQ(processes_mentioning(d.string()), 0);
}

TEST(DdpTrain, CorruptNewestCheckpointIsSkippedOnResume) {
  fs::path d = fresh_dir("corrupt");
  CliResult first = run_cli(job(d, "c") + " --set ckpt.every_steps=10 --set ckpt.keep=3");
  ASSERT_EQ(first.status, 0) << first.output;
  fs::path newest = newest_checkpoint(d / "c");
  ASSERT_EQ(newest.filename(), "step-0000000032");
  {  // flip the bits of the last byte of the weights
    std::fstream f(newest / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = char(f.get());
    f.seekp(-1, std::ios::end);
    f.put(char(~c));
  }
  CliResult again = run_cli(job(d, "c") + " --set train.epochs=2 --resume auto");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again, "step-0000000032")) << again.output;  // the warning names it
  EXPECT_TRUE(contains(again, "resumed from step 30")) << again.output;
  EXPECT_TRUE(contains(again, "done: 64 steps")) << again.output;
}

TEST(DdpTrain, MaxRestartsWithoutWorkersIsAnError) {
  CliResult r = run_cli("train /dev/null --max-restarts 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r, "--max-restarts needs --workers")) << r.output;
}

// Programs started by mpirun join through Open MPI's variables; comm.backend = "mpi" averages
// gradients with MPI_Allreduce. Two ranks: the same parameters, bit for bit, as the native
// backend (a sum of two values does not depend on the order).
TEST(DdpTrain, MpirunWithTheMpiBackendMatchesTheNativeBackend) {
  if (access("/usr/bin/mpirun", X_OK) != 0) GTEST_SKIP() << "mpirun not installed (openmpi-bin)";
  fs::path d = fresh_dir("mpi");
  CliResult native = run_cli(job(d, "native") + " --workers 2");
  ASSERT_EQ(native.status, 0) << native.output;
  std::string cmd = "timeout -k 5 120 /usr/bin/mpirun --allow-run-as-root --oversubscribe -n 2 " +
                    std::string(COHORT_BIN) + " " + job(d, "mpi") + " --set comm.backend=mpi";
  CliResult mpi = cohort::testing::run_shell(cmd);
  if (contains(mpi, "built without MPI")) GTEST_SKIP() << "cohort was built without MPI";
  ASSERT_EQ(mpi.status, 0) << mpi.output;
  EXPECT_TRUE(contains(mpi, "2 workers (mpi)")) << mpi.output;
  fs::path a = newest_checkpoint(d / "native"), b = newest_checkpoint(d / "mpi");
  EXPECT_EQ(a.filename(), b.filename());
  EXPECT_EQ(read_bytes(a / "model.safetensors"), read_bytes(b / "model.safetensors"));
}

// Two launchers as two "nodes" (both on loopback), one worker each, joined through node 0's
// store with a shared secret: `cohort run --nnodes NNODES LAUNCHER_ARGS -n 1 -- cohort
// TRAIN_ARGS`.
std::array<CliResult, 2> run_two_nodes(const std::string& launcher_args,
                                       const std::string& train_args,
                                       const std::string& nnodes = "2") {
  std::string master = "127.0.0.1:" + std::to_string(cohort::testing::free_loopback_port());
  std::string secret(64, 'a');
  std::array<CliResult, 2> node;
  std::thread nodes[2];
  for (int i = 0; i < 2; ++i) {
    nodes[i] = std::thread([&, i] {
      node[size_t(i)] = cohort::testing::run_shell(
          "COHORT_JOB_SECRET=" + secret + " timeout -k 5 120 " + COHORT_BIN + " run --nnodes " +
          nnodes + " --node-rank " + std::to_string(i) + " --master " + master + " " +
          launcher_args + " -n 1 -- " + COHORT_BIN + " " + train_args);
    });
  }
  for (auto& t : nodes) t.join();
  return node;
}

// The final parameters of runs `a` and `b` of `d` are the same, byte for byte.
void expect_same_final_model(const fs::path& d, const std::string& a, const std::string& b) {
  fs::path x = newest_checkpoint(d / a), y = newest_checkpoint(d / b);
  EXPECT_EQ(x.filename(), y.filename());
  EXPECT_EQ(read_bytes(x / "model.safetensors"), read_bytes(y / "model.safetensors"));
}

// torchrun-style multi-node trains to the same parameters as `--workers 2`.
TEST(DdpTrain, TwoLaunchersAsTwoNodesMatchTwoLocalWorkers) {
  fs::path d = fresh_dir("nodes");
  CliResult local = run_cli(job(d, "local") + " --workers 2");
  ASSERT_EQ(local.status, 0) << local.output;
  std::array<CliResult, 2> node = run_two_nodes("", job(d, "nodes"));
  ASSERT_EQ(node[0].status, 0) << node[0].output;
  ASSERT_EQ(node[1].status, 0) << node[1].output;
  EXPECT_TRUE(contains(node[0], "2 workers (native)")) << node[0].output;
  expect_same_final_model(d, "local", "nodes");
}

// Two nodes (`--nnodes NNODES --max-restarts 1`) whose node 1 worker is killed after step 10:
// both launchers restart once, and the run ends with the parameters of 2 local workers without
// the failure. Returns the nodes' output for the caller's checks.
std::array<CliResult, 2> expect_both_nodes_restart(const fs::path& d, const std::string& nnodes) {
  const std::string ckpt = " --set ckpt.every_steps=5 --set ckpt.async=false";
  CliResult local = run_cli(job(d, "local") + ckpt + " --workers 2");
  EXPECT_EQ(local.status, 0) << local.output;
  std::array<CliResult, 2> node = run_two_nodes(
      "--max-restarts 1",
      job(d, "nodes") + ckpt + " --set fault.kill_rank=1 --set fault.kill_at_step=10", nnodes);
  for (const CliResult& n : node) {
    EXPECT_EQ(n.status, 0) << n.output;
    EXPECT_TRUE(contains(n, "restarting all workers (restart 1 of 1)")) << n.output;
  }
  EXPECT_TRUE(contains(node[0], "resumed from step 10")) << node[0].output;
  expect_same_final_model(d, "local", "nodes");
  return node;
}

// --max-restarts across nodes: the kill fails the attempt on both nodes; each launcher restarts
// its workers (node 1's once node 0 has published the next attempt in its new store), and they
// resume step 10's checkpoint.
TEST(DdpTrain, TwoNodesRestartTogetherFromTheLastCheckpoint) {
  expect_both_nodes_restart(fresh_dir("node_restart"), "2");
}

// An elastic job across nodes (--nnodes 2:2: both nodes' workers needed) that loses node 1's
// only worker cannot go on in place: node 1's launcher fails (its workers were all lost and the
// job did not finish), rank 0 refuses to go on alone, node 0's launcher fails with it, and
// --max-restarts restarts both from the last checkpoint.
TEST(DdpTrain, AnElasticJobThatCannotGoOnInPlaceRestartsEveryNodeFromDisk) {
  std::array<CliResult, 2> node = expect_both_nodes_restart(fresh_dir("elastic_restart"), "2:2");
  EXPECT_TRUE(contains(node[1], "node 1's workers were all lost (rank 1 was killed by signal 9"))
      << node[1].output;
  EXPECT_TRUE(contains(node[0], "elastic: only 1 of 2 workers are left")) << node[0].output;
}

// Every rank fails at once (no rank waits for the deadline) with rank 0's reason.
TEST(DdpTrain, ResumingFromAMissingCheckpointIsAClearErrorOnEveryRank) {
  fs::path d = fresh_dir("missing");
  auto t0 = std::chrono::steady_clock::now();
  CliResult r = run_cli(job(d, "m") + " --workers 2 --resume " + (d / "step-0000000007").string());
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r, "step-0000000007: no such directory")) << r.output;
  EXPECT_TRUE(contains(r, "rank 0 could not load the checkpoint")) << r.output;
  EXPECT_LT(secs, 20.0);
}

// Resuming from an older checkpoint drops the later ones of the abandoned continuation, and a
// restarted attempt continues from its own newest checkpoint, not from the path it started at.
TEST(DdpTrain, ExplicitResumeThenRestartContinuesFromTheNewestCheckpoint) {
  fs::path d = fresh_dir("explicit");
  // Synchronous writes: step 8's checkpoint is on disk before the kill at step 10.
  std::string common = " --workers 2 --set ckpt.every_steps=4 --set ckpt.async=false";
  CliResult first = run_cli(job(d, "e") + common + " --set train.max_steps=8");
  ASSERT_EQ(first.status, 0) << first.output;
  fs::path step4 = d / "e" / "checkpoints" / "step-0000000004";
  CliResult again =
      run_cli(job(d, "e") + common + " --set train.max_steps=14 --resume " + step4.string() +
              " --max-restarts 1 --set fault.kill_rank=1 --set fault.kill_at_step=10");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again, "step-0000000008, written after step 4")) << again.output;
  // Moved aside, not deleted: the user asked for neither.
  EXPECT_TRUE(
      fs::exists(d / "e" / "checkpoints.earlier" / "1" / "step-0000000008" / "MANIFEST.json"));
  EXPECT_TRUE(contains(again, "resumed from step 4")) << again.output;
  EXPECT_TRUE(contains(again, "resumed from step 8")) << again.output;  // after the restart
  EXPECT_EQ(newest_checkpoint(d / "e").filename(), "step-0000000014");
}

// What must match on resume is the global batch (data.batch_size x workers x grad_accum), or
// one that the samples consumed (160 after step 5 of 1 x 32) convert to; other keys must match.
TEST(DdpTrain, ResumingWithAGlobalBatchThatDoesNotConvertIsRefused) {
  fs::path d = fresh_dir("mismatch");
  CliResult first = run_cli(job(d, "m") + " --set ckpt.every_steps=5 --set train.max_steps=5");
  ASSERT_EQ(first.status, 0) << first.output;
  CliResult batch = run_cli(job(d, "m") + " --set data.batch_size=48 --resume auto");
  EXPECT_EQ(batch.status, 2) << batch.output;
  EXPECT_TRUE(contains(batch, "written after 160 samples of epoch 0 with a global batch of 32"))
      << batch.output;
  EXPECT_TRUE(contains(batch, "this run's global batch is 48")) << batch.output;
  CliResult workers = run_cli(job(d, "m") + " --workers 2 --resume auto");
  EXPECT_NE(workers.status, 0) << workers.output;
  EXPECT_TRUE(contains(workers, "set data.batch_size = 16 to keep the global batch of 32"))
      << workers.output;
  CliResult shuffle = run_cli(job(d, "m") + " --set data.shuffle=false --resume auto");
  EXPECT_EQ(shuffle.status, 2) << shuffle.output;
  EXPECT_TRUE(contains(shuffle, "data.shuffle = true, this run has data.shuffle = false"))
      << shuffle.output;
}

// A fresh run under the name of an earlier one writes its own directory (f.2: a restart must
// not resume the other run, and nothing of it is touched; tests/e2e/run_dir_test.cc has the
// rest); a checkpoint taken at the last step of an epoch records the next epoch, so a resume
// does not evaluate twice.
TEST(DdpTrain, FreshRunLeavesTheEarlierRunAloneAndEpochEndIsRecorded) {
  fs::path d = fresh_dir("fresh");
  std::string args = job(d, "f") + " --set ckpt.every_steps=32";
  ASSERT_EQ(run_cli(args).status, 0);
  CliResult again = run_cli(args);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again, "this run writes " + (d / "f.2").string())) << again.output;
  EXPECT_TRUE(fs::exists(d / "f" / "checkpoints" / "step-0000000032" / "MANIFEST.json"));
  auto state = nlohmann::json::parse(read_bytes(newest_checkpoint(d / "f.2") / "state.json"));
  EXPECT_EQ(state["epoch"], 1);
  EXPECT_EQ(state["batch_in_epoch"], 0);
}
