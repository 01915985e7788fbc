// Every collective of the MPI backend, for every dtype (and op, where it reduces) and the
// sizes 0, 1, a prime and a count not divisible by the world size, against a reference
// computed locally from every rank's values. Runs under mpirun (see mpi_launch_test.cc).
#include <gtest/gtest.h>

#include "mpi_test_util.h"

namespace cohort::comm::mpi_test {
namespace {

TEST_F(MpiBackend, AllreduceEveryDtypeOpAndSizeInAndOutOfPlace) {
  for (MpiCommunicator* comm : both_modes()) {
    MpiCommunicator& c = *comm;
    SCOPED_TRACE(c.options().blocking_collectives ? "blocking" : "non-blocking");
    for (DType t : kDTypes) {
      for (ReduceOp op : kOps) {
        for (size_t n : kSizes) {
          Buffer want = reference(t, op, c.size(), 0, n);
          Buffer in(t, n), out(t, n);
          fill(in, c.rank(), op, 0, n);
          allreduce(c, {.input = n ? in.data() : nullptr,
                        .output = n ? out.data() : nullptr,
                        .count = n,
                        .dtype = t,
                        .op = op});
          EXPECT_TRUE(same(out.data(), want.data(), t, n)) << label(t, op, n) << " out of place";
          allreduce(c, {.output = in.data(), .count = n, .dtype = t, .op = op});  // in place
          EXPECT_TRUE(same(in.data(), want.data(), t, n)) << label(t, op, n) << " in place";
        }
      }
    }
  }
}

TEST_F(MpiBackend, ReduceEveryDtypeOpAndSizeToEachRoot) {
  for (MpiCommunicator* comm : both_modes()) {
    MpiCommunicator& c = *comm;
    SCOPED_TRACE(c.options().blocking_collectives ? "blocking" : "non-blocking");
    for (DType t : kDTypes) {
      for (ReduceOp op : kOps) {
        for (size_t n : kSizes) {
          int root = int(n % size_t(c.size()));
          Buffer want = reference(t, op, c.size(), 0, n);
          Buffer in(t, n), out(t, n);
          fill(in, c.rank(), op, 0, n);
          reduce(c, {.input = in.data(),
                     .output = out.data(),
                     .count = n,
                     .dtype = t,
                     .op = op,
                     .root = root});
          if (c.rank() == root) {
            EXPECT_TRUE(same(out.data(), want.data(), t, n)) << label(t, op, n);
          }
        }
      }
    }
  }
}

TEST_F(MpiBackend, ReduceScatterEveryDtypeOpAndSize) {
  for (MpiCommunicator* comm : both_modes()) {
    MpiCommunicator& c = *comm;
    SCOPED_TRACE(c.options().blocking_collectives ? "blocking" : "non-blocking");
    for (DType t : kDTypes) {
      for (ReduceOp op : kOps) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{1001}}) {
          size_t total = n * size_t(c.size());
          Buffer in(t, total), out(t, n);
          fill(in, c.rank(), op, 0, total);
          reduce_scatter(
              c, {.input = in.data(), .output = out.data(), .count = n, .dtype = t, .op = op});
          Buffer want = reference(t, op, c.size(), size_t(c.rank()) * n, n);
          EXPECT_TRUE(same(out.data(), want.data(), t, n)) << label(t, op, n);
        }
      }
    }
  }
}

// Rank r's block of the data-moving collectives: value(r, offset + i) with sum-style values.
void fill_block(Buffer& b, int rank, size_t offset, size_t n, size_t at) {
  fill(b, rank, ReduceOp::sum, offset, n, at);
}

TEST_F(MpiBackend, BroadcastAllgatherAndAllgathervEveryDtypeAndSize) {
  for (MpiCommunicator* comm : both_modes()) {
    MpiCommunicator& c = *comm;
    SCOPED_TRACE(c.options().blocking_collectives ? "blocking" : "non-blocking");
    const size_t p = size_t(c.size());
    for (DType t : kDTypes) {
      for (size_t n : kSizes) {
        int root = int((n + 1) % p);
        Buffer buf(t, n), want(t, n);
        fill_block(want, root, 0, n, 0);
        if (c.rank() == root) fill_block(buf, root, 0, n, 0);
        broadcast(c, {.buffer = buf.data(), .count = n, .dtype = t, .root = root});
        EXPECT_TRUE(same(buf.data(), want.data(), t, n)) << "broadcast " << label(t, n);

        Buffer mine(t, n), all(t, p * n), all_want(t, p * n);
        fill_block(mine, c.rank(), 0, n, 0);
        for (size_t r = 0; r < p; ++r) fill_block(all_want, int(r), 0, n, r * n);
        allgather(c, {.input = mine.data(), .output = all.data(), .count = n, .dtype = t});
        EXPECT_TRUE(same(all.data(), all_want.data(), t, p * n)) << "allgather " << label(t, n);

        // allgatherv: rank r contributes n + r elements (rank 0 none when n == 0).
        std::vector<size_t> counts;
        size_t total = 0;
        for (size_t r = 0; r < p; ++r) counts.push_back(n + r), total += n + r;
        Buffer v_in(t, counts[size_t(c.rank())]), v_out(t, total), v_want(t, total);
        fill_block(v_in, c.rank(), 0, counts[size_t(c.rank())], 0);
        for (size_t r = 0, at = 0; r < p; at += counts[r], ++r)
          fill_block(v_want, int(r), 0, counts[r], at);
        allgatherv(c, {.input = v_in.data(), .output = v_out.data(), .counts = counts, .dtype = t});
        EXPECT_TRUE(same(v_out.data(), v_want.data(), t, total)) << "allgatherv " << label(t, n);
      }
    }
  }
}

TEST_F(MpiBackend, GatherScatterAndAlltoallEveryDtypeAndSize) {
  for (MpiCommunicator* comm : both_modes()) {
    MpiCommunicator& c = *comm;
    SCOPED_TRACE(c.options().blocking_collectives ? "blocking" : "non-blocking");
    const size_t p = size_t(c.size());
    const size_t me = size_t(c.rank());
    for (DType t : kDTypes) {
      for (size_t n : kSizes) {
        int root = int(n % p);
        Buffer mine(t, n), all(t, p * n), all_want(t, p * n);
        fill_block(mine, c.rank(), 0, n, 0);
        for (size_t r = 0; r < p; ++r) fill_block(all_want, int(r), 0, n, r * n);
        gather(c,
               {.input = mine.data(), .output = all.data(), .count = n, .dtype = t, .root = root});
        if (c.rank() == root) {
          EXPECT_TRUE(same(all.data(), all_want.data(), t, p * n)) << "gather " << label(t, n);
        }

        // scatter: the root's block k is value(root, k * n + i).
        Buffer src(t, p * n), got(t, n), got_want(t, n);
        if (c.rank() == root) fill_block(src, root, 0, p * n, 0);
        fill_block(got_want, root, me * n, n, 0);
        scatter(c,
                {.input = src.data(), .output = got.data(), .count = n, .dtype = t, .root = root});
        EXPECT_TRUE(same(got.data(), got_want.data(), t, n)) << "scatter " << label(t, n);

        // alltoall: rank r's block k is value(r, k * n + i); rank me receives block me of each.
        Buffer a_in(t, p * n), a_out(t, p * n), a_want(t, p * n);
        fill_block(a_in, c.rank(), 0, p * n, 0);
        for (size_t r = 0; r < p; ++r) fill_block(a_want, int(r), me * n, n, r * n);
        alltoall(c, {.input = a_in.data(), .output = a_out.data(), .count = n, .dtype = t});
        EXPECT_TRUE(same(a_out.data(), a_want.data(), t, p * n)) << "alltoall " << label(t, n);
      }
    }
  }
}

TEST_F(MpiBackend, SendRecvAndBatchedRingEveryDtype) {
  for (MpiCommunicator* comm : both_modes()) {
    MpiCommunicator& c = *comm;
    SCOPED_TRACE(c.options().blocking_collectives ? "blocking" : "non-blocking");
    const int p = c.size(), me = c.rank();
    const int next = (me + 1) % p, prev = (me + p - 1) % p;
    for (DType t : kDTypes) {
      for (size_t n : kSizes) {
        // A ring posted as one batch: every rank sends and receives at once.
        Buffer out(t, n), in(t, n), want(t, n);
        fill_block(out, me, 0, n, 0);
        fill_block(want, prev, 0, n, 0);
        batch_send_recv(c, {{P2POp::kSend, out.data(), n, t, next, 5},
                            {P2POp::kRecv, in.data(), n, t, prev, 5}});
        EXPECT_TRUE(same(in.data(), want.data(), t, n)) << "batch ring " << label(t, n);
        // Plain send/recv: rank 0 to rank 1, then back.
        if (me == 0) {
          send(c, {.buffer = out.data(), .count = n, .dtype = t, .peer = 1, .tag = 9});
          Buffer back(t, n), back_want(t, n);
          fill_block(back_want, 1, 0, n, 0);
          recv(c, {.buffer = back.data(), .count = n, .dtype = t, .peer = 1, .tag = 10});
          EXPECT_TRUE(same(back.data(), back_want.data(), t, n)) << "recv " << label(t, n);
        } else if (me == 1) {
          Buffer got(t, n), got_want(t, n);
          fill_block(got_want, 0, 0, n, 0);
          recv(c, {.buffer = got.data(), .count = n, .dtype = t, .peer = 0, .tag = 9});
          EXPECT_TRUE(same(got.data(), got_want.data(), t, n)) << "recv " << label(t, n);
          send(c, {.buffer = out.data(), .count = n, .dtype = t, .peer = 0, .tag = 10});
        }
      }
    }
    barrier(c);
  }
}

}  // namespace
}  // namespace cohort::comm::mpi_test
