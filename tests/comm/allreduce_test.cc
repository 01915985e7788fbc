// Allreduce: every algorithm, dtype, op and awkward size against a straightforward reference,
// on world sizes 1-8 and both transports; results bit-identical across ranks and runs.
#include <gtest/gtest.h>

#include <random>

#include "tests/comm/collective_util.h"

namespace cohort::comm {
namespace {

using namespace cohort::comm::testing;
using transport::TransportKind;

struct Matrix {
  std::vector<Algorithm> algos;
  std::vector<DType> dtypes;
  std::vector<ReduceOp> ops;
  std::vector<size_t> counts;
};

// Each rank runs every combination on one communicator and checks its own result.
void run_matrix(int n, TransportKind kind, const Matrix& m, CommOptions options) {
  with_comms(n, options, [&](Communicator& c) {
    for (Algorithm algo : m.algos) {
      for (DType t : m.dtypes) {
        for (ReduceOp op : m.ops) {
          for (size_t count : m.counts) {
            auto in = make_input(t, op, c.rank(), count);
            auto want = reference(t, op, n, count);
            std::vector<char> out(in.size(), 0);
            // Alternate in place and out of place.
            bool in_place = count % 2 == 1;
            if (in_place) out = in;
            allreduce(c, {.input = in_place ? nullptr : in.data(),
                          .output = out.data(),
                          .count = count,
                          .dtype = t,
                          .op = op,
                          .algorithm = algo});
            std::string diff = compare(t, out.data(), want.data(), count);
            if (!diff.empty()) {
              ADD_FAILURE() << "n=" << n << " rank " << c.rank() << " " << algorithm_name(algo)
                            << " " << dtype_name(t) << " " << reduce_op_name(op) << " count "
                            << count << ": " << diff;
              return;
            }
          }
        }
      }
    }
  });
}

void run_matrix(int n, TransportKind kind, const Matrix& m) {
  run_matrix(n, kind, m, test_options(kind));
}

const std::vector<Algorithm> kAlgos = {Algorithm::kRing, Algorithm::kRecursiveDoubling,
                                       Algorithm::kHalvingDoubling, Algorithm::kAuto};

// 0, 1, a prime, more than one 1 KiB chunk per segment, and a count not divisible by n.
TEST(Allreduce, EveryDtypeAndOpOnThreeRanksShm) {
  run_matrix(3, TransportKind::kShm, {kAlgos, kAllDTypes, kAllOps, {0, 1, 1009, 2 * 1024 + 7}});
}

// Every shm message read straight from the sender's memory (process_vm_readv; ranks as
// threads read their own process, which the kernel allows), and the same with the kernel's
// permission "denied" (the ring fallback): both must match the reference exactly.
TEST(Allreduce, EveryDtypeAndOpOnThreeRanksSingleCopyAndItsFallback) {
  for (bool deny : {false, true}) {
    CommOptions o = test_options(TransportKind::kShm);
    o.device.shm_single_copy_bytes = 1;
    o.device.faults.deny_single_copy = deny;
    run_matrix(3, TransportKind::kShm, {kAlgos, kAllDTypes, kAllOps, {0, 1, 1009, 2 * 1024 + 7}},
               o);
  }
}

TEST(Allreduce, EveryDtypeAndOpOnFourRanksTcp) {
  run_matrix(4, TransportKind::kTcp, {kAlgos, kAllDTypes, kAllOps, {1, 1009}});
}

class AllreduceWorldSize : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceWorldSize, SizesAndAlgorithmsShm) {
  int n = GetParam();
  std::vector<size_t> counts = {0, 1, 2, 5, 1009};
  if (n <= 4) counts.push_back(4099);  // many chunks per segment
  run_matrix(n, TransportKind::kShm,
             {kAlgos, {DType::f32, DType::bf16}, {ReduceOp::sum, ReduceOp::avg}, counts});
}

TEST_P(AllreduceWorldSize, SmallSizesTcp) {
  int n = GetParam();
  if (n > 6) GTEST_SKIP() << "shm covers 7-8 ranks; tcp stays quick";
  run_matrix(n, TransportKind::kTcp,
             {kAlgos, {DType::f32, DType::i64}, {ReduceOp::sum, ReduceOp::max}, {0, 3, 1009}});
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllreduceWorldSize, ::testing::Range(1, 9));

// Inexact floats: every rank must still hold the same bits, and a rerun the same bits again.
TEST(Allreduce, BitIdenticalAcrossRanksAndRuns) {
  const int n = 5;
  const size_t count = 3001;
  for (Algorithm algo : kAlgos) {
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      std::vector<std::vector<char>> first(n), second(n);
      for (auto* results : {&first, &second}) {
        with_comms(n, test_options(TransportKind::kShm), [&](Communicator& c) {
          std::mt19937 rng(1234 + c.rank());
          std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
          std::vector<char> buf(count * dtype_size(t));
          for (size_t i = 0; i < count; ++i) put(t, buf.data(), i, dist(rng) * 1e3f);
          allreduce(c, {.output = buf.data(), .count = count, .dtype = t, .algorithm = algo});
          (*results)[size_t(c.rank())] = buf;
        });
      }
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(first[size_t(r)], first[0]) << algorithm_name(algo) << " " << dtype_name(t)
                                              << ": rank " << r << " differs from rank 0";
        EXPECT_EQ(second[size_t(r)], first[size_t(r)])
            << algorithm_name(algo) << " " << dtype_name(t) << ": rerun differs on rank " << r;
      }
    }
  }
}

TEST(Allreduce, AutoPicksRecursiveDoublingForSmallAndRingForLarge) {
  with_comms(2, test_options(TransportKind::kShm), [&](Communicator& c) {
    EXPECT_EQ(choose_allreduce_algorithm(c, 4096), Algorithm::kRecursiveDoubling);
    EXPECT_EQ(choose_allreduce_algorithm(c, 16 << 20), Algorithm::kRing);
  });
}

TEST(CostModel, FormulasAndChoices) {
  CostModel m{10.0, 1.0 / 1e3, 0.0};  // 10 us per step, 1 GB/s, free reduction
  // Ring on 4 ranks, 1 MB: 6 steps + 1.5 MB at 1 GB/s.
  EXPECT_NEAR(m.allreduce_us(Algorithm::kRing, 4, 1000000), 60 + 1500, 1e-6);
  EXPECT_NEAR(m.allreduce_us(Algorithm::kRecursiveDoubling, 4, 1000), 2 * (10 + 1), 1e-6);
  // 3 ranks: one fold (2 steps, 2 N) around a 2-rank halving-doubling.
  EXPECT_NEAR(m.allreduce_us(Algorithm::kHalvingDoubling, 3, 1000), 20 + 1 + 20 + 2, 1e-6);
  EXPECT_EQ(m.best_allreduce(8, 64), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(m.best_allreduce(3, 64 << 20), Algorithm::kRing);  // the fold costs 2 N
  EXPECT_EQ(m.best_allreduce(2, 64 << 20), Algorithm::kRing);  // tie with halving-doubling
  EXPECT_EQ(m.best_allreduce(1, 100), Algorithm::kRing);
}

TEST(CostModel, MeasuredModelIsInstalledIdenticallyOnEveryRank) {
  std::vector<CostModel> got(3);
  with_comms(3, test_options(TransportKind::kShm), [&](Communicator& c) {
    CostModel m = measure_cost_model(c);
    got[size_t(c.rank())] = c.cost_model();
    EXPECT_EQ(m.alpha_us, c.cost_model().alpha_us);
    // The choice it drives must still be a working, agreed algorithm.
    std::vector<float> x(777, 1.0f);
    allreduce(c, {.output = x.data(), .count = x.size()});
    EXPECT_EQ(x[776], 3.0f);
  });
  for (const CostModel& m : got) {
    EXPECT_GT(m.alpha_us, 0);
    EXPECT_GT(m.beta_us_per_byte, 0);
    EXPECT_EQ(m.alpha_us, got[0].alpha_us);
    EXPECT_EQ(m.beta_us_per_byte, got[0].beta_us_per_byte);
    EXPECT_EQ(m.gamma_us_per_byte, got[0].gamma_us_per_byte);
  }
}

TEST(Allreduce, BadArgumentsAreRejectedBeforeSending) {
  with_comms(1, test_options(TransportKind::kShm), [&](Communicator& c) {
    float x = 0;
    EXPECT_THROW(allreduce(c, {.output = nullptr, .count = 4}), InvalidArgument);
    EXPECT_THROW(allreduce(c, {.output = &x, .count = 1, .dtype = DType(42)}), InvalidArgument);
    EXPECT_THROW(allreduce(c, {.output = &x, .count = 1, .op = ReduceOp(9)}), InvalidArgument);
    std::string msg = error_of<InvalidArgument>(
        [&] { allreduce(c, {.output = &x, .count = 1, .algorithm = Algorithm::kTree}); });
    EXPECT_NE(msg.find("algorithm tree"), std::string::npos) << msg;
    // Still usable afterwards.
    allreduce(c, {.output = &x, .count = 1});
  });
}

}  // namespace
}  // namespace cohort::comm
