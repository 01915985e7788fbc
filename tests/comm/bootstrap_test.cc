// World discovery from the four launcher conventions, and the errors a misconfigured job gets.
#include <gtest/gtest.h>

#include "cohort/core/error.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::rendezvous {
namespace {

const std::string kHex = "00112233445566778899aabbccddeeff";

EnvMap with_secret(EnvMap env) {
  env["COHORT_JOB_SECRET"] = kHex;
  return env;
}

std::string error_of(const EnvMap& env, BootstrapOptions o = {}) {
  try {
    world_from_env(env, o);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Bootstrap, CohortConvention) {
  WorldInfo w = world_from_env(with_secret({{"COHORT_RANK", "3"},
                                            {"COHORT_WORLD_SIZE", "8"},
                                            {"COHORT_LOCAL_RANK", "1"},
                                            {"COHORT_LOCAL_WORLD_SIZE", "2"},
                                            {"COHORT_MASTER_ADDR", "10.0.0.1"},
                                            {"COHORT_MASTER_PORT", "29500"},
                                            {"RANK", "7"}}));  // cohort's own wins
  EXPECT_EQ(w.source, EnvConvention::kCohort);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.world_size, 8);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 2);
  EXPECT_EQ(w.master_addr, "10.0.0.1");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(w.secret.to_hex(), kHex);
}

TEST(Bootstrap, TorchrunConvention) {
  WorldInfo w = world_from_env(with_secret({{"RANK", "5"},
                                            {"WORLD_SIZE", "6"},
                                            {"LOCAL_RANK", "2"},
                                            {"LOCAL_WORLD_SIZE", "3"},
                                            {"MASTER_ADDR", "node0"},
                                            {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(w.source, EnvConvention::kTorchrun);
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.world_size, 6);
  EXPECT_EQ(w.local_rank, 2);
  EXPECT_EQ(w.local_world_size, 3);
  EXPECT_EQ(w.master_addr, "node0");
  EXPECT_EQ(w.master_port, 1234);
}

TEST(Bootstrap, OpenMpiConventionTakesTheStoreFromMasterVariables) {
  EnvMap env = with_secret({{"OMPI_COMM_WORLD_RANK", "1"},
                            {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"MASTER_ADDR", "h0"},
                            {"MASTER_PORT", "4000"}});
  WorldInfo w = world_from_env(env);
  EXPECT_EQ(w.source, EnvConvention::kOpenMpi);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_world_size, 2);
  EXPECT_EQ(w.master_addr, "h0");
  env["COHORT_MASTER_ADDR"] = "h1";  // cohort's pair is preferred
  env["COHORT_MASTER_PORT"] = "4001";
  w = world_from_env(env);
  EXPECT_EQ(w.master_addr, "h1");
  EXPECT_EQ(w.master_port, 4001);
  env.erase("COHORT_MASTER_ADDR"), env.erase("COHORT_MASTER_PORT"), env.erase("MASTER_ADDR");
  EXPECT_EQ(error_of(env),
            "Open MPI environment is incomplete: missing COHORT_MASTER_ADDR and "
            "COHORT_MASTER_PORT (or MASTER_ADDR and MASTER_PORT)");
}

TEST(Bootstrap, SlurmConventionAndItsTasksPerNodeSyntax) {
  EnvMap env = with_secret({{"SLURM_PROCID", "5"},
                            {"SLURM_NTASKS", "7"},
                            {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "2"},
                            {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                            {"COHORT_MASTER_ADDR", "n0"},
                            {"COHORT_MASTER_PORT", "5000"}});
  WorldInfo w = world_from_env(env);
  EXPECT_EQ(w.source, EnvConvention::kSlurm);
  EXPECT_EQ(w.rank, 5);
  EXPECT_EQ(w.world_size, 7);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_world_size, 2);
  env["SLURM_NTASKS_PER_NODE"] = "3";
  EXPECT_EQ(world_from_env(env).local_world_size, 3);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_THROW(slurm_tasks_on_node("2(x3),1", 4), InvalidArgument);
  EXPECT_THROW(slurm_tasks_on_node("2(3)", 0), InvalidArgument);
  EXPECT_THROW(slurm_tasks_on_node("", 0), InvalidArgument);
  env.erase("SLURM_NTASKS_PER_NODE"), env.erase("SLURM_TASKS_PER_NODE");
  EXPECT_NE(error_of(env).find("SLURM environment is incomplete: missing SLURM_NTASKS_PER_NODE"),
            std::string::npos);
}

TEST(Bootstrap, MissingAndInconsistentValuesNameTheVariables) {
  EXPECT_NE(error_of({}).find("no launcher environment found"), std::string::npos);
  EXPECT_EQ(error_of(with_secret({{"RANK", "0"}, {"MASTER_ADDR", "x"}})),
            "torchrun environment is incomplete: missing WORLD_SIZE, LOCAL_RANK, "
            "LOCAL_WORLD_SIZE, MASTER_PORT");
  EnvMap env = with_secret({{"COHORT_RANK", "4"},
                            {"COHORT_WORLD_SIZE", "4"},
                            {"COHORT_LOCAL_RANK", "0"},
                            {"COHORT_LOCAL_WORLD_SIZE", "1"},
                            {"COHORT_MASTER_ADDR", "127.0.0.1"},
                            {"COHORT_MASTER_PORT", "29500"}});
  EXPECT_EQ(error_of(env), "cohort environment: COHORT_RANK=4 is not below COHORT_WORLD_SIZE=4");
  env["COHORT_RANK"] = "three";
  EXPECT_EQ(error_of(env), "cohort environment: COHORT_RANK='three' is not an integer");
  env["COHORT_RANK"] = "1";
  env["COHORT_LOCAL_RANK"] = "1";
  EXPECT_EQ(error_of(env),
            "cohort environment: COHORT_LOCAL_RANK=1 is not below COHORT_LOCAL_WORLD_SIZE=1");
  env["COHORT_LOCAL_RANK"] = "0";
  env["COHORT_LOCAL_WORLD_SIZE"] = "5";
  EXPECT_EQ(error_of(env),
            "cohort environment: COHORT_LOCAL_WORLD_SIZE=5 exceeds COHORT_WORLD_SIZE=4");
  env["COHORT_LOCAL_WORLD_SIZE"] = "1";
  env["COHORT_MASTER_PORT"] = "70000";
  EXPECT_EQ(error_of(env), "cohort environment: COHORT_MASTER_PORT=70000 is outside 1..65535");
  env["COHORT_MASTER_PORT"] = "29500";
  EXPECT_EQ(world_from_env(env).rank, 1);
}

TEST(Bootstrap, AJobWithoutASecretIsRefusedUnlessInsecureOnLoopback) {
  EnvMap env = {{"RANK", "0"},
                {"WORLD_SIZE", "1"},
                {"LOCAL_RANK", "0"},
                {"LOCAL_WORLD_SIZE", "1"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", "1"}};
  EXPECT_NE(error_of(env).find("no job secret. Set COHORT_JOB_SECRET"), std::string::npos);
  BootstrapOptions insecure{net::SecretPolicy::kAllowInsecure};
  EXPECT_TRUE(world_from_env(env, insecure).secret.empty());
  env["COHORT_ALLOW_INSECURE"] = "1";
  EXPECT_TRUE(world_from_env(env).secret.empty());
  env["MASTER_ADDR"] = "10.1.2.3";
  EXPECT_NE(error_of(env).find("10.1.2.3 is not loopback"), std::string::npos) << error_of(env);
  env["COHORT_JOB_SECRET"] = kHex;
  env["COHORT_JOB_SECRET_FILE"] = "/nonexistent";
  EXPECT_NE(error_of(env).find("set only one"), std::string::npos);
  env.erase("COHORT_JOB_SECRET");
  EXPECT_THROW(world_from_env(env), IoError);  // the file is unreadable
}

}  // namespace
}  // namespace cohort::rendezvous
