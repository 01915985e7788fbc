// comm::ProcessGroup over MPI (make_mpi_process_group) against the native ProcessGroup as the
// reference: inside every MPI rank, the same collective runs over the native backend with the
// job's world size as ranks-as-threads (over shared memory), and the MPI result of this rank
// must be bit-identical to what the native rank of the same number produced. Runs under
// mpirun with 3 ranks (MpiLaunch.EveryCollective...) and with 2 (MpiLaunch.ProcessGroup...).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cohort/comm/backends/mpi/mpi_process_group.h"
#include "mpi_test_util.h"
#include "tests/comm/collective_util.h"

namespace cohort::comm::mpi_test {
namespace {

// The job-wide MPI process group (collective to create: every rank runs the same tests in the
// same order). Destroyed before MPI_Finalize, like world().
ProcessGroup& mpi_pg() {
  static std::shared_ptr<ProcessGroup> pg =
      make_mpi_process_group({.timeout = std::chrono::seconds(30)});
  return *pg;
}

// Runs fn on `size` native ranks-as-threads and returns what each rank pushed into its results.
std::vector<std::vector<Buffer>> native_results(
    int size, const std::function<void(ProcessGroup&, std::vector<Buffer>&)>& fn) {
  std::vector<std::vector<Buffer>> out(size_t(size), std::vector<Buffer>{});
  auto store = std::make_shared<rendezvous::HashStore>();
  auto options = testing::test_options(transport::TransportKind::kShm);
  testing::run_ranks(size, [&](int r) {
    auto pg = make_process_group(Communicator::create(store, r, size, options));
    fn(*pg, out[size_t(r)]);
  });
  return out;
}

struct ReduceCase {
  DType dtype;
  ReduceOp op;
  size_t count;
};

std::vector<ReduceCase> reduce_cases() {
  std::vector<ReduceCase> cases;
  for (DType t : kDTypes)
    for (ReduceOp op : kOps)
      for (size_t n : kSizes) cases.push_back({t, op, n});
  return cases;
}

// Every case through pg.allreduce (or allreduce_async, all issued before the first wait).
void allreduce_all(ProcessGroup& pg, bool async, std::vector<Buffer>& results) {
  std::vector<Work> works;
  for (const ReduceCase& k : reduce_cases()) {
    results.emplace_back(k.dtype, k.count);
    Buffer& b = results.back();
    fill(b, pg.rank(), k.op, 0, k.count);
    AllreduceOptions o{.output = b.data(), .count = k.count, .dtype = k.dtype, .op = k.op};
    if (async)
      works.push_back(pg.allreduce_async(o));
    else
      pg.allreduce(o);
  }
  for (Work& w : works) w.wait();
}

void expect_same_as_native(const std::vector<Buffer>& got, const std::vector<Buffer>& want,
                           const std::vector<std::string>& labels) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(same(got[i].data(), want[i].data(), got[i].dtype, got[i].count()))
        << labels[i] << " (mpi vs native)";
  }
}

std::vector<std::string> reduce_labels() {
  std::vector<std::string> labels;
  for (const ReduceCase& k : reduce_cases()) labels.push_back(label(k.dtype, k.op, k.count));
  return labels;
}

TEST_F(MpiBackend, ProcessGroupAllreduceMatchesNative) {
  ProcessGroup& pg = mpi_pg();
  EXPECT_STREQ(pg.backend_name(), "mpi");
  auto native = native_results(
      pg.size(), [](ProcessGroup& p, std::vector<Buffer>& r) { allreduce_all(p, false, r); });
  std::vector<Buffer> mine;
  allreduce_all(pg, false, mine);
  expect_same_as_native(mine, native[size_t(pg.rank())], reduce_labels());
}

TEST_F(MpiBackend, ProcessGroupAllreduceAsyncMatchesNative) {
  ProcessGroup& pg = mpi_pg();
  auto native = native_results(
      pg.size(), [](ProcessGroup& p, std::vector<Buffer>& r) { allreduce_all(p, true, r); });
  std::vector<Buffer> mine;
  allreduce_all(pg, true, mine);
  expect_same_as_native(mine, native[size_t(pg.rank())], reduce_labels());
}

// Broadcast from every root, then allgather, for every dtype and size.
void broadcast_allgather_all(ProcessGroup& pg, std::vector<Buffer>& results) {
  for (DType t : kDTypes) {
    for (size_t n : kSizes) {
      for (int root = 0; root < pg.size(); ++root) {
        results.emplace_back(t, n);
        Buffer& b = results.back();
        fill(b, pg.rank(), ReduceOp::sum, 0, n);  // non-roots' values must be overwritten
        pg.broadcast({.buffer = b.data(), .count = n, .dtype = t, .root = root});
      }
      Buffer mine(t, n);
      fill(mine, pg.rank(), ReduceOp::sum, 0, n);
      results.emplace_back(t, n * size_t(pg.size()));
      pg.allgather({.input = mine.data(), .output = results.back().data(), .count = n, .dtype = t});
    }
  }
}

TEST_F(MpiBackend, ProcessGroupBroadcastAndAllgatherMatchNative) {
  ProcessGroup& pg = mpi_pg();
  auto native = native_results(pg.size(), broadcast_allgather_all);
  std::vector<Buffer> mine;
  broadcast_allgather_all(pg, mine);
  std::vector<std::string> labels;
  for (DType t : kDTypes) {
    for (size_t n : kSizes) {
      for (int root = 0; root < pg.size(); ++root)
        labels.push_back("broadcast from " + std::to_string(root) + " " + label(t, n));
      labels.push_back("allgather " + label(t, n));
    }
  }
  expect_same_as_native(mine, native[size_t(pg.rank())], labels);
}

// A barrier orders side effects across processes: every rank creates its file, then after the
// barrier every rank sees all of them. The directory name comes from rank 0 by broadcast.
TEST_F(MpiBackend, ProcessGroupBarrierOrdersEveryRanksSideEffects) {
  ProcessGroup& pg = mpi_pg();
  char dir[256] = {};
  if (pg.rank() == 0) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cohort_pg_XXXXXX").string();
    ASSERT_LT(tmpl.size(), sizeof dir);
    std::copy(tmpl.begin(), tmpl.end(), dir);
    ASSERT_NE(mkdtemp(dir), nullptr) << dir;
  }
  pg.broadcast({.buffer = dir, .count = sizeof dir, .dtype = DType::u8, .root = 0});
  std::filesystem::path d(dir);
  for (int round = 0; round < 3; ++round) {
    std::filesystem::path mine = d / (std::to_string(round) + "_" + std::to_string(pg.rank()));
    std::FILE* f = std::fopen(mine.c_str(), "w");
    ASSERT_NE(f, nullptr) << mine;
    std::fclose(f);
    pg.barrier(std::chrono::seconds(20));
    for (int r = 0; r < pg.size(); ++r) {
      EXPECT_TRUE(std::filesystem::exists(d / (std::to_string(round) + "_" + std::to_string(r))))
          << "round " << round << ": rank " << r << "'s file missing after the barrier";
    }
  }
  pg.barrier(std::chrono::seconds(20));  // nobody still looks when rank 0 removes the files
  if (pg.rank() == 0) std::filesystem::remove_all(d);
}

// The byte counters are the documented ring estimates, identical on every rank's formula.
TEST_F(MpiBackend, ProcessGroupCountsRingEstimateOfBytes) {
  ProcessGroup& pg = mpi_pg();
  const uint64_t n = uint64_t(pg.size());
  uint64_t sent0 = pg.bytes_sent(), recv0 = pg.bytes_received();
  std::vector<float> x(1000, 1.0f);
  pg.allreduce({.output = x.data(), .count = 1000});  // 4000 bytes
  EXPECT_EQ(pg.bytes_sent() - sent0, 2 * (n - 1) * 4000 / n);
  EXPECT_EQ(pg.bytes_received() - recv0, 2 * (n - 1) * 4000 / n);
  pg.allreduce_async({.output = x.data(), .count = 1000}).wait();
  EXPECT_EQ(pg.bytes_sent() - sent0, 4 * (n - 1) * 4000 / n);

  sent0 = pg.bytes_sent(), recv0 = pg.bytes_received();
  pg.broadcast({.buffer = x.data(), .count = 100, .root = 1});  // 400 bytes, chain 1 -> ... -> 0
  EXPECT_EQ(pg.bytes_sent() - sent0, pg.rank() == 0 ? 0u : 400u);
  EXPECT_EQ(pg.bytes_received() - recv0, pg.rank() == 1 ? 0u : 400u);

  sent0 = pg.bytes_sent(), recv0 = pg.bytes_received();
  std::vector<double> all(size_t(n) * 10);
  std::vector<double> one(10, double(pg.rank()));
  pg.allgather({.input = one.data(), .output = all.data(), .count = 10, .dtype = DType::f64});
  EXPECT_EQ(pg.bytes_sent() - sent0, (n - 1) * 80);
  EXPECT_EQ(pg.bytes_received() - recv0, (n - 1) * 80);
  pg.barrier();
  EXPECT_EQ(pg.bytes_sent() - sent0, (n - 1) * 80);
}

}  // namespace
}  // namespace cohort::comm::mpi_test
