// In-place recovery end to end (elastic.min_workers, docs/elastic.md), with real processes: a
// worker killed with SIGKILL or stopped with SIGSTOP is left behind and the others train on
// from the last completed step, the rest of the epoch dealt to them, without a restart; the
// stopped process is killed at the end and the job succeeds; a lost rank 0, too few workers or
// an unsupported strategy stop the job with an error saying why.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/e2e/run_cli.h"
#include "tests/e2e/run_dirs.h"
#include "tests/support/files.h"

namespace cohort {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::contains;
using testing::run_cli;

// 4,096 synthetic samples, batch 64, 2 epochs, one thread per worker, a record every step.
std::string job(const fs::path& dir, const std::string& name, int workers) {
  return "train /dev/null --workers " + std::to_string(workers) +
         " --set data.dataset=synthetic --set data.synthetic_samples=4096 --set model.hidden=[64]"
         " --set train.epochs=2 --set run.threads=1 --set run.log_every=1 --set "
         "run.progress=plain --set elastic.min_workers=2 --set run.dir=" +
         dir.string() + " --set run.name=" + name;
}

// The run's step records are steps 1 .. n, each once (no step lost or trained twice).
void expect_steps_once(const fs::path& metrics, size_t n) {
  auto steps = testing::records_of(metrics, "step");
  ASSERT_EQ(steps.size(), n);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i]["step"], int64_t(i + 1));
}

int processes_mentioning(const std::string& needle) {
  int n = 0;
  for (auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    n += cmd.find(needle) != std::string::npos && std::stoi(pid) != getpid();
  }
  return n;
}

// elastic.fixed_batch = false: each worker keeps its batch, the rest of the epoch is dealt to
// the workers left and the global batch shrinks with them.
TEST(ElasticTrain, AKilledWorkerIsLeftBehindAndTheOthersTrainOnInPlace) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "kill");
  CliResult r = run_cli(job(d, "kill", 3) +
                        " --set elastic.fixed_batch=false --set fault.kill_rank=2 --set "
                        "fault.kill_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r,
                       "cohort run: rank 2 was killed by signal 9 (SIGKILL); elastic: 2 "
                       "worker(s) go on without it (elastic.min_workers = 2)"))
      << r.output;
  EXPECT_TRUE(
      contains(r, "generation 1: 2 workers (3 before) go on from step 10 (launcher ranks 0,1)"))
      << r.output;
  // Epoch 0: 10 steps of 3 x 64, then the other 2,176 samples over 2 workers (17 steps);
  // epoch 1: 4,096 over 2 (32 steps). No restart: one attempt, every step once.
  EXPECT_TRUE(contains(r, "done: 59 steps")) << r.output;
  EXPECT_FALSE(contains(r, "restarting")) << r.output;
  const fs::path metrics = d / "kill" / "metrics.jsonl";
  expect_steps_once(metrics, 59);
  auto changes = testing::records_of(metrics, "membership");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0]["workers"], 2);
  EXPECT_EQ(changes[0]["previous_workers"], 3);
  EXPECT_EQ(changes[0]["step"], 10);
  // The launcher marks the dead rank in the store: the round does not wait for its beat.
  EXPECT_LT(changes[0]["recover_s"].get<double>(), 1.0);
  auto evals = testing::records_of(metrics, "eval");
  ASSERT_FALSE(evals.empty());
  EXPECT_GT(evals.back()["accuracy"].get<double>(), 0.9);
  auto summary = testing::records_of(metrics, "summary");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0]["workers"], 2);
  EXPECT_EQ(summary[0]["membership_changes"], 1);
  EXPECT_TRUE(contains(r, "elastic: 1 membership change(s)")) << r.output;
  // Seen in the dashboard of past runs and in the report.
  CliResult state = run_cli("dashboard --print-state " + (d / "kill").string());
  EXPECT_TRUE(contains(state, "generation 1: 2 of 3 workers go on from step 10")) << state.output;
  CliResult report =
      run_cli("report " + (d / "kill").string() + " --output " + (d / "report.html").string());
  ASSERT_EQ(report.status, 0) << report.output;
  std::ifstream html(d / "report.html");
  std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("\"membership_changes\":1"), std::string::npos);
  EXPECT_NE(page.find("\"workers_at_end\":2"), std::string::npos);
}

// The default: the global batch stays 3 slots of 64; the two workers left compute the lost
// worker's slot between them (rank 0 computes slots 0 and 2), so the run has the steps of a run
// without failures, every one logged once.
TEST(ElasticTrain, TheGlobalBatchStaysFixedWhenAWorkerIsLost) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "fixed");
  CliResult r =
      run_cli(job(d, "fixed", 3) + " --set fault.kill_rank=2 --set fault.kill_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r,
                       "generation 1: 2 workers (3 before) go on from step 10 (launcher ranks "
                       "0,1), recovered in"))
      << r.output;
  EXPECT_TRUE(contains(r, "the global batch stays 192 samples (3 slots of 64 over 2 workers)"))
      << r.output;
  // 4,096 samples in 3 slots: 1,366 per slot (padded), 22 batches of each, 2 epochs.
  EXPECT_TRUE(contains(r, "done: 44 steps")) << r.output;
  expect_steps_once(d / "fixed" / "metrics.jsonl", 44);
  EXPECT_GT(testing::records_of(d / "fixed" / "metrics.jsonl", "eval").back()["accuracy"], 0.9);
}

// elastic.exact: the slots' gradients are summed in slot order whoever computed them, so a run
// that lost rank 0, one that lost a worker and admitted its respawned replacement, and one
// resumed by all its workers from a checkpoint the survivors wrote, end with the model and
// optimizer state of the run without failures, byte for byte. fault.slow_rank keeps the run
// going long enough for the replacement to join (a sleep: it changes no number).
TEST(ElasticTrain, TheExactModeEndsBitIdenticalToARunWithoutFailures) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "exact");
  const std::string exact =
      " --set elastic.exact=true --set model.hidden=[256] --set "
      "data.synthetic_samples=8192 --set fault.slow_rank=0 --set "
      "fault.slow_factor=8";
  const std::string kill = " --set fault.kill_rank=2 --set fault.kill_at_step=10";
  CliResult quiet = run_cli(job(d, "quiet", 4) + exact);
  ASSERT_EQ(quiet.status, 0) << quiet.output;
  // Rank 0 itself: its successor computes slots 0 and 3 and writes the final checkpoint.
  CliResult lost =
      run_cli(job(d, "lost", 4) + exact + " --set fault.kill_rank=0 --set fault.kill_at_step=10");
  ASSERT_EQ(lost.status, 0) << lost.output;
  EXPECT_TRUE(contains(lost, "generation 1: 3 workers (4 before) go on from step 10"))
      << lost.output;
  CliResult back = run_cli(job(d, "back", 4) + exact + kill + " --respawn");
  ASSERT_EQ(back.status, 0) << back.output;
  EXPECT_TRUE(contains(back, "joined generation 2 as rank 3 of 4 at step")) << back.output;
  // Stopped at step 15 after the kill (its checkpoint written by 3 workers: the split is still
  // 4 slots), then resumed by 4 workers.
  CliResult part = run_cli(job(d, "resumed", 4) + exact + kill +
                           " --set ckpt.every_steps=5 --set train.max_steps=15");
  ASSERT_EQ(part.status, 0) << part.output;
  CliResult rest = run_cli(job(d, "resumed", 4) + exact + " --resume auto");
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_TRUE(contains(rest, "resumed from step 15")) << rest.output;
  for (const char* run : {"lost", "back", "resumed"}) {
    for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
      EXPECT_EQ(testing::read_bytes(testing::newest_checkpoint(d / "quiet") / f),
                testing::read_bytes(testing::newest_checkpoint(d / run) / f))
          << run << ": " << f;
    }
  }
}

// What the exact mode cannot keep exact is refused before training, naming the key or layer.
TEST(ElasticTrain, TheExactModeRefusesWhatItCannotKeepExact) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "exact_refused");
  CliResult r =
      run_cli(job(d, "alone", 2) + " --set elastic.min_workers=0 --set elastic.exact=true");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r,
                       "elastic.exact is a mode of in-place recovery: set "
                       "elastic.min_workers too"))
      << r.output;
  r = run_cli(job(d, "bn", 2) +
              " --set elastic.exact=true --set model.type=sequential --set "
              "'model.layers=flatten; linear 32; batchnorm; relu; linear'");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r,
                       "elastic.exact needs a model without running statistics: its buffer "
                       "'2.running_mean'"))
      << r.output;
}

// --workers MIN:MAX launches MAX workers that go on in place while MIN remain: 2:3 is
// --workers 3 with elastic.min_workers = 2, and the global batch is 3 slots.
TEST(ElasticTrain, WorkersMinMaxLaunchesMaxThatGoOnWhileMinRemain) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "range");
  std::string range = job(d, "range", 3);
  range.replace(range.find("--workers 3"), 11, "--workers 2:3");
  range.replace(range.find(" --set elastic.min_workers=2"), 28, "");
  CliResult r = run_cli(range + " --set fault.kill_rank=2 --set fault.kill_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "elastic: 2 worker(s) go on without it (elastic.min_workers = 2)"))
      << r.output;
  EXPECT_TRUE(contains(r, "done: 44 steps")) << r.output;
  r = run_cli(range + " --set elastic.min_workers=1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r,
                       "cohort train: --workers 2:3 asks for at least 2 workers, but "
                       "elastic.min_workers = 1: give one of them"))
      << r.output;
}

// local_sgd: the members average their replicas over the new world and go on with the step
// count (and period) where it was, the respawned worker joins them; every slot of the fixed
// global batch is still trained. fault.slow_rank keeps the run going long enough for the join.
TEST(ElasticTrain, LocalSgdWorkersAverageTheirReplicasAndGoOn) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "local");
  CliResult r = run_cli(job(d, "local", 3) +
                        " --respawn --set parallel.strategy=local_sgd --set local_sgd.period=4 "
                        "--set local_sgd.report_params_hash=true --set fault.kill_rank=2 --set "
                        "fault.kill_at_step=10 --set fault.slow_rank=0 --set fault.slow_factor=8 "
                        "--set train.epochs=8");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "generation 1: 2 workers (3 before) go on from step 1")) << r.output;
  // The respawned worker joins: it averages its replica (rank 0's) with the others' too.
  EXPECT_TRUE(contains(r, "joined generation 2 as rank 2 of 3 at step")) << r.output;
  EXPECT_TRUE(contains(r, "done: 176 steps")) << r.output;  // 8 epochs of 22
  const fs::path run = d / "local";
  EXPECT_GT(testing::records_of(run / "metrics.jsonl", "eval").back()["accuracy"], 0.9);
  // After the change the two replicas agree at every average (the hash of rank 1's parameters
  // is rank 0's at the last step both logged one).
  auto hashes = [](const fs::path& f) {
    std::map<int64_t, std::string> out;
    for (auto& j : testing::records_of(f, "step"))
      if (j.contains("local_sgd_params_hash")) out[j["step"]] = j["local_sgd_params_hash"];
    return out;
  };
  auto h0 = hashes(run / "metrics.jsonl"), h1 = hashes(run / "metrics.rank1.jsonl");
  ASSERT_FALSE(h0.empty());
  ASSERT_TRUE(h1.count(h0.rbegin()->first))
      << "rank 1 logged no hash at step " << h0.rbegin()->first;
  EXPECT_EQ(h1[h0.rbegin()->first], h0.rbegin()->second);
}

// gossip: the same as local_sgd (the members average their replicas, the neighbour estimates
// start afresh on the new ring), with CHOCO's compressed exchange. On a ring of 4, rank 0 is
// not a neighbour of rank 2: its exchange may succeed where rank 1's and 3's fail, a step ahead
// of them, and the members go on from the furthest step.
TEST(ElasticTrain, GossipWorkersGoOnOnTheNewRing) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "gossip");
  CliResult r = run_cli(job(d, "gossip", 4) +
                        " --set parallel.strategy=gossip --set gossip.compression=topk --set "
                        "fault.kill_rank=2 --set fault.kill_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "generation 1: 3 workers (4 before) go on from step 1")) << r.output;
  EXPECT_TRUE(contains(r, "done: 32 steps")) << r.output;
  EXPECT_GT(testing::records_of(d / "gossip" / "metrics.jsonl", "eval").back()["accuracy"], 0.9);
}

// The same launcher rank killed twice: its first replacement joined, was killed in turn, and the
// second replacement joins too (the launcher clears the first one's join and admission).
TEST(ElasticTrain, AWorkerKilledAgainAfterItRejoinedIsReplacedAgain) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "twice");
  const fs::path metrics = d / "twice" / "metrics.jsonl";
  // Kills launcher rank 2 when rank 0's file holds `n` membership records, then waits for more.
  auto kill_rank_2_at = [&](int n) {
    return "until [ \"$(grep -cs membership " + metrics.string() + ")\" -ge " + std::to_string(n) +
           " ]; do sleep 0.05; done; for p in $(pgrep -f " + d.string() +
           "); do tr '\\0' '\\n' </proc/$p/environ 2>/dev/null | grep -qx COHORT_RANK=2 && "
           "kill -9 $p; done; ";
  };
  // In a script of its own, output elsewhere, giving up after 120 s: a job that ended before
  // the second join fails the assertions below instead of leaving run_shell waiting for it.
  const fs::path script = d / "killer.sh";
  std::ofstream(script) << "until grep -qs '\"event\":\"step\"' " << metrics.string()
                        << "; do sleep 0.05; done; " << kill_rank_2_at(0) << kill_rank_2_at(2)
                        << "\n";
  const std::string killer = "(timeout 120 sh " + script.string() + " >/dev/null 2>&1) & ";
  const std::string train = job(d, "twice", 3) +
                            " --respawn --set train.epochs=60 --set run.log_every=50 --set "
                            "fault.slow_rank=0 --set fault.slow_factor=4";
  CliResult r = testing::run_shell(killer + COHORT_BIN + " " + train);
  ASSERT_EQ(r.status, 0) << r.output;
  auto changes = testing::records_of(metrics, "membership");
  ASSERT_EQ(changes.size(), 4u) << r.output;  // lost, joined, lost again, joined again
  EXPECT_EQ(changes[3]["workers"], 3);
  EXPECT_EQ(testing::records_of(metrics, "summary").at(0)["workers"], 3);
}

TEST(ElasticTrain, AStoppedWorkerIsDroppedAndKilledAtTheEnd) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "stop");
  CliResult r = run_cli(job(d, "stop", 4) + " --set fault.stop_rank=2 --set fault.stop_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "rank 2 sent no heartbeat for 2.")) << r.output;
  EXPECT_TRUE(
      contains(r, "generation 1: 3 workers (4 before) go on from step 10 (launcher ranks 0,1,3)"))
      << r.output;
  EXPECT_TRUE(contains(r, "done: 32 steps")) << r.output;  // the global batch stays 4 x 64
  EXPECT_EQ(processes_mentioning(d.string()), 0) << "the stopped worker was left running";
}

// The stopped worker is continued (SIGCONT) while the others train on without it: it finds its
// collective broken, sees the membership it was left out of, says so and exits; the job succeeds.
TEST(ElasticTrain, AStoppedWorkerThatIsContinuedLearnsItWasDroppedAndExits) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "cont");
  // Long enough that the others still train when it wakes: 24 epochs of 16,384 samples.
  const std::string train = job(d, "cont", 4) +
                            " --set data.synthetic_samples=16384 --set run.log_every=100"
                            " --set train.epochs=24"
                            " --set fault.stop_rank=2 --set fault.stop_at_step=10";
  // Once the others have formed generation 1 (rank 0's membership record), wake whichever
  // worker of this job is stopped.
  const std::string wake =
      "(for i in $(seq 600); do if grep -qs membership " + (d / "cont" / "metrics.jsonl").string() +
      "; then for p in $(pgrep -f " + d.string() +
      "); do grep -q 'State:.*stopped' /proc/$p/status && kill -CONT $p; done; exit; fi; "
      "sleep 0.05; done) &";
  CliResult r = testing::run_shell(wake + " " + COHORT_BIN + " " + train);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "generation 1: 3 workers (4 before) go on from step 10")) << r.output;
  EXPECT_TRUE(contains(r,
                       "[rank 2] cohort: error: elastic: rank 2 was dropped: the others formed "
                       "generation 1 without it (0,1,3); it stops"))
      << r.output;
  EXPECT_EQ(processes_mentioning(d.string()), 0) << "left running";
}

// --respawn: the launcher starts the killed worker again; it asks to join, the others admit it at
// their next step boundary and rank 0 sends it the training state (no disk); the replicas stay
// equal (ddp.check_every compares them every 5 steps) and the job ends with 3 workers.
TEST(ElasticTrain, ARespawnedWorkerJoinsTheRunningJobWithRankZerosState) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "join");
  CliResult r = run_cli(job(d, "join", 3) +
                        " --respawn --set train.epochs=40 --set run.log_every=50 --set "
                        "ddp.check_every=5 --set optim.name=adamw --set optim.lr=0.001 --set "
                        "fault.kill_rank=2 --set fault.kill_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r, "respawning it to join them")) << r.output;
  EXPECT_TRUE(contains(r, "launcher rank 2 asks to join the running job")) << r.output;
  EXPECT_TRUE(contains(r, "joined generation 2 as rank 2 of 3 at step")) << r.output;
  EXPECT_TRUE(contains(r, "generation 2: 3 workers (2 before) go on from step")) << r.output;
  EXPECT_FALSE(contains(r, "diverged")) << r.output;
  const fs::path run = d / "join";
  auto changes = testing::records_of(run / "metrics.jsonl", "membership");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[1]["workers"], 3);
  EXPECT_EQ(changes[1]["members"], nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(testing::records_of(run / "metrics.jsonl", "summary")[0]["workers"], 3);
  // The joiner writes the file of the worker it replaces, and continues its step count.
  auto joined_steps = testing::records_of(run / "metrics.rank2.jsonl", "step");
  ASSERT_FALSE(joined_steps.empty());
  EXPECT_GT(joined_steps.back()["step"].get<int64_t>(), changes[1]["step"].get<int64_t>());
}

// Rank 0 lost: the lowest member takes over as rank 0 (the launcher hosts the store) and
// writes the checkpoints and the job's metrics.jsonl from then on; the job succeeds.
TEST(ElasticTrain, WhenRankZeroIsLostTheLowestMemberTakesOver) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "zero");
  CliResult r = run_cli(job(d, "zero", 3) + " --set fault.kill_rank=0 --set fault.kill_at_step=10");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r,
                       "cohort run: rank 0 was killed by signal 9 (SIGKILL); elastic: 2 worker(s) "
                       "go on without it (elastic.min_workers = 2); the lowest of them takes over "
                       "as rank 0"))
      << r.output;
  EXPECT_TRUE(contains(r, "rank 1 takes over as rank 0 (rank 0 was lost)")) << r.output;
  EXPECT_TRUE(contains(r, "[rank 1] done: 44 steps")) << r.output;
  EXPECT_TRUE(contains(r, "[rank 1] epoch 1 step 44/44")) << r.output;  // its progress lines
  const fs::path metrics = d / "zero" / "metrics.jsonl";
  expect_steps_once(metrics, 44);  // 1-10 from the first rank 0, 11-44 from its successor
  EXPECT_EQ(testing::records_of(metrics, "membership").at(0)["members"],
            nlohmann::json::array({1, 2}));
  EXPECT_EQ(testing::records_of(metrics, "summary").at(0)["workers"], 2);
  EXPECT_EQ(testing::newest_checkpoint(d / "zero").filename(), "step-0000000044");
}

TEST(ElasticTrain, TooFewWorkersOrAnotherStrategyStopsTheJob) {
  fs::path d = testing::fresh_dir("cohort_elastic_e2e_", "refuse");
  CliResult r;
  r = run_cli(job(d, "two", 2) + " --set fault.kill_rank=1 --set fault.kill_at_step=5");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r,
                       "elastic: only 1 worker(s) would be left, fewer than "
                       "elastic.min_workers = 2: the job stops"))
      << r.output;
  r = run_cli(job(d, "ps", 2) + " --set parallel.strategy=ps");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_TRUE(contains(r,
                       "works with parallel.strategy = \"ddp\", \"zero\", \"local_sgd\" or "
                       "\"gossip\" so far, not \"ps\""))
      << r.output;
}

}  // namespace
}  // namespace cohort
