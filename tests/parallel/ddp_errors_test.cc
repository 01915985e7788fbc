// DDP construction, validation and failures: what a user sees when ranks disagree.
#include <gtest/gtest.h>

#include "cohort/autograd/node.h"
#include "cohort/nn/loss.h"
#include "cohort/nn/models/mlp.h"
#include "cohort/parallel/ddp/ddp.h"
#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using namespace testing;
using comm::testing::error_of;

const std::vector<int64_t> kSizes = {6, 8, 4};

void train_step(DDP& ddp, int rank) {
  auto [x, y] = make_batch(4, 6, 4, 10 + uint64_t(rank));
  nn::cross_entropy(ddp(x), y).backward();
}

TEST(DdpConstruction, EveryRankGetsRankZerosParametersAndBuffers) {
  nn::MLP want(kSizes, {.seed = 0});
  run_world(3, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = uint64_t(r)});  // different init on every rank
    if (r > 0) {
      ASSERT_NE(flat_params(model), flat_params(want));
    }
    DDP ddp(model, pg);
    EXPECT_EQ(flat_params(model), flat_params(want)) << "rank " << r;
  });
}

TEST(DdpConstruction, DifferentLayerSizeOnOneRankNamesTheParameterAndTheRank) {
  run_world(3, [&](int r, PG pg) {
    nn::MLP model({6, r == 1 ? 9 : 8, 4}, {.seed = 1});
    std::string msg = error_of<InvalidArgument>([&] { DDP ddp(model, pg); });
    EXPECT_NE(msg.find("'layers.0.weight' [8, 6]"), std::string::npos) << msg;  // rank 0's
    EXPECT_NE(msg.find("rank(s) 1 differ"), std::string::npos) << msg;
    if (r == 1) {
      EXPECT_NE(msg.find("this rank, 1, has 'layers.0.weight' [9, 6]"), std::string::npos) << msg;
    }
  });
}

TEST(DdpConstruction, MissingLayerOnOneRankIsNamed) {
  run_world(2, [&](int r, PG pg) {
    nn::MLP model(r == 0 ? std::vector<int64_t>{6, 8, 4} : std::vector<int64_t>{6, 8, 8, 4});
    std::string msg = error_of<InvalidArgument>([&] { DDP ddp(model, pg); });
    EXPECT_NE(msg.find("layers.1.weight"), std::string::npos) << msg;
  });
}

// Two Linear layers; the forward uses only "used", so "unused" never gets a gradient.
class PartlyUsed : public nn::Module {
 public:
  PartlyUsed() {
    used_ =
        register_module("used", std::make_shared<nn::Linear>(6, 4, nn::LinearOptions{.seed = 1}));
    register_module("unused", std::make_shared<nn::Linear>(6, 4, nn::LinearOptions{.seed = 2}));
  }
  Tensor forward(const Tensor& x) override { return (*used_)(x); }
  std::string type_name() const override { return "PartlyUsed"; }

 private:
  std::shared_ptr<nn::Linear> used_;
};

TEST(DdpUnusedParameters, AreAnErrorNamingThemByDefault) {
  run_world(2, [&](int r, PG pg) {
    PartlyUsed model;
    DDP ddp(model, pg);
    std::string msg = error_of<InvalidArgument>([&] { train_step(ddp, r); });
    EXPECT_NE(msg.find("'unused.weight', 'unused.bias'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("find_unused_parameters"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("'used.weight'"), std::string::npos) << msg;
  });
}

TEST(DdpUnusedParameters, CountAsZeroWithFindUnusedParameters) {
  std::vector<std::vector<float>> used_grads(2);
  run_world(2, [&](int r, PG pg) {
    PartlyUsed model;
    DDP ddp(model, pg, {.find_unused_parameters = true});
    for (int step = 0; step < 2; ++step) {  // the second runs on the rebuilt buckets
      model.zero_grad();
      train_step(ddp, r);
      Tensor g = model.named_parameters()[2].second.grad();  // unused.weight
      ASSERT_TRUE(g.defined());
      for (float v : g.to_vector<float>()) ASSERT_EQ(v, 0.0f);
    }
    used_grads[size_t(r)] = model.named_parameters()[0].second.grad().to_vector<float>();
  });
  EXPECT_EQ(used_grads[0], used_grads[1]);  // averaged: the same on both ranks
}

TEST(DdpCheckParameters, NamesTheRankAndParameterThatDiverged) {
  run_world(3, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 1});
    DDP ddp(model, pg);
    ddp.check_parameters_in_sync();                             // in sync right after construction
    if (r == 1) model.named_parameters()[3].second.fill_(0.5);  // layers.1.bias
    std::string msg = error_of<InvalidArgument>([&] { ddp.check_parameters_in_sync(); });
    EXPECT_NE(msg.find("rank(s) 1 differ from rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'layers.1.bias' (rank 1)"), std::string::npos) << msg;
  });
}

TEST(DdpCheckParameters, RunsEveryCheckEverySyncedSteps) {
  run_world(2, [&](int r, PG pg) {
    nn::MLP model(kSizes, {.seed = 1});
    DDP ddp(model, pg, {.check_every = 2});
    train_step(ddp, r);  // step 1: no check
    if (r == 1) model.named_parameters()[0].second.fill_(0.25);
    std::string msg = error_of<InvalidArgument>([&] { train_step(ddp, r); });  // step 2
    EXPECT_NE(msg.find("'layers.0.weight' (rank 1)"), std::string::npos) << msg;
  });
}

// A peer that goes away mid-training: the surviving rank's backward() fails with the
// transport's error type, naming the bucket, within the collective's deadline.
TEST(DdpFailures, DeadPeerSurfacesFromBackwardNamingTheBucket) {
  comm::CommOptions o = ddp_comm_options();
  o.timeout = std::chrono::seconds(5);
  set_num_threads(1);
  auto store = std::make_shared<rendezvous::HashStore>();
  comm::testing::run_ranks(2, [&](int r) {
    auto c = comm::Communicator::create(store, r, 2, o);
    nn::MLP model(kSizes, {.seed = 1});
    DDP ddp(model, comm::make_process_group(c));
    train_step(ddp, r);  // one good step
    // Rank 1 leaves only once rank 0 has finished that step (the store, not the communicator,
    // orders it), so the failure always hits the second step.
    if (r == 0) store->set_string("ddp_test/step1_done", "1");
    if (r == 1) {
      store->wait({"ddp_test/step1_done"}, std::chrono::seconds(20));
      c->close();
      return;
    }
    try {
      train_step(ddp, r);
      ADD_FAILURE() << "backward succeeded without its peer";
    } catch (const Error& e) {
      bool peer_error = dynamic_cast<const IoError*>(&e) || dynamic_cast<const Timeout*>(&e);
      EXPECT_TRUE(peer_error) << e.what();
      EXPECT_NE(std::string(e.what()).find("DDP bucket 0 of"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace cohort::parallel
