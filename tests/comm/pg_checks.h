#pragma once
// Checks of a ProcessGroup that hold on any backend and any world size: every rank calls the
// same check on its group; each compares what it received with a reference computed locally
// (collective_util.h's values, exact in every dtype). tests/comm runs them over the native
// backend with ranks as threads, tests/mpi over MPI under mpirun.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/comm/pg_test_util.h"

namespace cohort::comm::testing {

// reduce_scatter for every dtype, op and odd size: rank r gets block r of the reduction. The
// async variant issues everything before the first wait.
inline void check_reduce_scatter(ProcessGroup& pg, bool async) {
  const int n = pg.size();
  struct Case {
    DType t;
    ReduceOp op;
    size_t count;
    std::vector<char> in, out;
  };
  std::vector<Case> cases;
  for (DType t : kAllDTypes)
    for (ReduceOp op : kAllOps)
      for (size_t count : kOddSizes)
        cases.push_back({t, op, count, make_input(t, op, pg.rank(), size_t(n) * count),
                         std::vector<char>(count * dtype_size(t) + 1)});
  std::vector<Work> works;
  for (Case& k : cases) {
    ReduceScatterOptions o{
        .input = k.in.data(), .output = k.out.data(), .count = k.count, .dtype = k.t, .op = k.op};
    if (async)
      works.push_back(pg.reduce_scatter_async(o));
    else
      pg.reduce_scatter(o);
  }
  for (Work& w : works) w.wait();
  for (Case& k : cases) {
    auto want = reference(k.t, k.op, n, k.count, size_t(pg.rank()) * k.count);
    EXPECT_EQ(compare(k.t, k.out.data(), want.data(), k.count), "")
        << "reduce_scatter " << dtype_name(k.t) << " " << reduce_op_name(k.op) << " count "
        << k.count << " on rank " << pg.rank() << " of " << n;
  }
}

// allgatherv with uneven counts (one rank contributes nothing), every dtype and odd size.
inline void check_allgatherv(ProcessGroup& pg, bool async) {
  struct Case {
    DType t;
    std::vector<size_t> counts;
    std::vector<char> in, out;
  };
  std::vector<Case> cases;
  for (DType t : kAllDTypes) {
    for (size_t base : kOddSizes) {
      auto counts = uneven_counts(pg.size(), base);
      size_t total = 0;
      for (size_t c : counts) total += c;
      cases.push_back({t, counts,
                       make_input(t, ReduceOp::sum, pg.rank(), counts[size_t(pg.rank())]),
                       std::vector<char>(total * dtype_size(t) + 1)});
    }
  }
  std::vector<Work> works;
  for (Case& k : cases) {
    AllgathervOptions o{
        .input = k.in.data(), .output = k.out.data(), .counts = k.counts, .dtype = k.t};
    if (async)
      works.push_back(pg.allgatherv_async(o));
    else
      pg.allgatherv(o);
  }
  for (Work& w : works) w.wait();
  for (Case& k : cases) {
    auto want = allgatherv_reference(k.t, k.counts);
    EXPECT_EQ(compare(k.t, k.out.data(), want.data(), want.size() / dtype_size(k.t)), "")
        << "allgatherv " << dtype_name(k.t) << " counts[0] " << k.counts[0] << " on rank "
        << pg.rank() << " of " << pg.size();
  }
}

// broadcast_async from every root and allgather_async, all issued before the first wait.
inline void check_async_broadcast_allgather(ProcessGroup& pg) {
  struct Case {
    DType t;
    size_t count;
    int root;  // -1: allgather
    std::vector<char> in, out;
  };
  std::vector<Case> cases;
  for (DType t : kAllDTypes) {
    for (size_t count : kOddSizes) {
      for (int root = -1; root < pg.size(); ++root) {
        auto in = make_input(t, ReduceOp::sum, pg.rank(), count);
        size_t out = root < 0 ? size_t(pg.size()) * count : count;
        // Broadcast starts from this rank's own values: only the root's may survive.
        cases.push_back(
            {t, count, root, in, root < 0 ? std::vector<char>(out * dtype_size(t) + 1) : in});
      }
    }
  }
  std::vector<Work> works;
  for (Case& k : cases) {
    if (k.root < 0) {
      works.push_back(pg.allgather_async(
          {.input = k.in.data(), .output = k.out.data(), .count = k.count, .dtype = k.t}));
    } else {
      works.push_back(pg.broadcast_async(
          {.buffer = k.out.data(), .count = k.count, .dtype = k.t, .root = k.root}));
    }
  }
  for (Work& w : works) w.wait();
  for (Case& k : cases) {
    auto want = k.root >= 0
                    ? make_input(k.t, ReduceOp::sum, k.root, k.count)
                    : allgatherv_reference(k.t, std::vector<size_t>(size_t(pg.size()), k.count));
    EXPECT_EQ(compare(k.t, k.out.data(), want.data(), want.size() / dtype_size(k.t)), "")
        << (k.root < 0 ? "allgather_async " : "broadcast_async ") << dtype_name(k.t) << " count "
        << k.count << " root " << k.root << " on rank " << pg.rank();
  }
}

// send/recv around a ring (size >= 2), blocking (even ranks send first, odd ranks receive
// first) and async, with a tag per dtype; each rank checks its predecessor's values.
inline void check_send_recv_ring(ProcessGroup& pg) {
  const int me = pg.rank(), next = (me + 1) % pg.size(), prev = (me + pg.size() - 1) % pg.size();
  for (DType t : kAllDTypes) {
    for (size_t count : kOddSizes) {
      auto out = make_input(t, ReduceOp::sum, me, count);
      std::vector<char> in(out.size()), in_async(out.size());
      uint32_t tag = uint32_t(t) * 10 + 3;
      SendOptions s{.buffer = out.data(), .count = count, .dtype = t, .peer = next, .tag = tag};
      RecvOptions r{.buffer = in.data(), .count = count, .dtype = t, .peer = prev, .tag = tag};
      if (me % 2 == 0) {
        pg.send(s);
        pg.recv(r);
      } else {
        pg.recv(r);
        pg.send(s);
      }
      // Async operations also run in issue order, so the same order as above.
      r.buffer = in_async.data();
      Work first = me % 2 == 0 ? pg.send_async(s) : pg.recv_async(r);
      Work second = me % 2 == 0 ? pg.recv_async(r) : pg.send_async(s);
      second.wait();
      first.wait();
      auto want = make_input(t, ReduceOp::sum, prev, count);
      EXPECT_EQ(compare(t, in.data(), want.data(), count), "")
          << "recv " << dtype_name(t) << " count " << count << " on rank " << me;
      EXPECT_EQ(compare(t, in_async.data(), want.data(), count), "")
          << "recv_async " << dtype_name(t) << " count " << count << " on rank " << me;
    }
  }
}

// batch_send_recv around a ring where every rank lists its send first, with messages far
// larger than the transports' buffers (512 KiB; test_options' shm rings are 64 KiB): posted
// together, the batch cannot deadlock.
inline void check_batch_ring(ProcessGroup& pg) {
  const int me = pg.rank(), next = (me + 1) % pg.size(), prev = (me + pg.size() - 1) % pg.size();
  std::vector<size_t> sizes = kOddSizes;
  sizes.push_back(size_t{1} << 17);
  for (DType t : kAllDTypes) {
    for (size_t count : sizes) {
      if (count > 1009 && t != DType::f32) continue;  // the large size once is enough
      auto out = make_input(t, ReduceOp::sum, me, count);
      std::vector<char> in(out.size()), in_async(out.size());
      pg.batch_send_recv({{P2POp::kSend, out.data(), count, t, next, 7},
                          {P2POp::kRecv, in.data(), count, t, prev, 7}});
      pg.batch_send_recv_async({{P2POp::kSend, out.data(), count, t, next, 8},
                                {P2POp::kRecv, in_async.data(), count, t, prev, 8}})
          .wait();
      auto want = make_input(t, ReduceOp::sum, prev, count);
      EXPECT_EQ(compare(t, in.data(), want.data(), count), "")
          << "batch " << dtype_name(t) << " count " << count << " on rank " << me;
      EXPECT_EQ(compare(t, in_async.data(), want.data(), count), "")
          << "batch async " << dtype_name(t) << " count " << count << " on rank " << me;
    }
  }
}

// The parent ranks of a group's members, in group order (an allgather inside the group).
inline std::vector<int32_t> members(ProcessGroup& g, int parent_rank) {
  std::vector<int32_t> all(size_t(g.size()));
  int32_t mine = parent_rank;
  g.allgather({.input = &mine, .output = all.data(), .count = 1, .dtype = DType::i32});
  return all;
}

// split by parity; inside, a reduce_scatter and a message; then a split of the split that
// reverses the order, and a split that leaves sub-rank 0 out. The parent works afterwards.
inline void check_split(ProcessGroup& pg) {
  const int me = pg.rank(), n = pg.size();
  std::vector<int32_t> mates;
  for (int r = me % 2; r < n; r += 2) mates.push_back(r);
  auto half = pg.split(me % 2, me);
  ASSERT_NE(half, nullptr);
  const int sub = half->rank(), m = half->size();
  EXPECT_EQ(m, int(mates.size()));
  EXPECT_EQ(sub, me / 2);
  EXPECT_EQ(members(*half, me), mates);
  // Rank r of the pair contributes r * 10 + k to block k.
  std::vector<int64_t> in, out(1);
  for (int k = 0; k < m; ++k) in.push_back(me * 10 + k);
  half->reduce_scatter({.input = in.data(), .output = out.data(), .count = 1, .dtype = DType::i64});
  int64_t want = 0;
  for (int32_t r : mates) want += r * 10 + sub;
  EXPECT_EQ(out[0], want) << "reduce_scatter in the split, rank " << me;
  if (m >= 2 && sub < 2) {  // sub-rank 0 sends its parent rank to sub-rank 1
    int32_t v = me;
    if (sub == 0) {
      half->send({.buffer = &v, .count = 1, .dtype = DType::i32, .peer = 1, .tag = 5});
    } else {
      half->recv({.buffer = &v, .count = 1, .dtype = DType::i32, .peer = 0, .tag = 5});
      EXPECT_EQ(v, mates[0]);
    }
  }
  auto flipped = half->split(0, -sub);
  ASSERT_NE(flipped, nullptr);
  EXPECT_EQ(flipped->rank(), m - 1 - sub);
  EXPECT_EQ(members(*flipped, me), std::vector<int32_t>(mates.rbegin(), mates.rend()));
  auto rest = half->split(sub == 0 ? -1 : 3, 0);
  EXPECT_EQ(rest == nullptr, sub == 0);
  if (rest) EXPECT_EQ(rest->size(), m - 1);
  float x = 1.0f;
  pg.allreduce({.output = &x, .count = 1});
  EXPECT_EQ(x, float(n));
}

// new_group of the ranks in descending order, without rank 1 when there are 3 or more; an
// allreduce inside; then a new_group of that group's last and first members.
inline void check_new_group(ProcessGroup& pg) {
  const int me = pg.rank(), n = pg.size();
  std::vector<int> list;
  for (int r = n - 1; r >= 0; --r)
    if (!(n >= 3 && r == 1)) list.push_back(r);
  auto g = pg.new_group(list);
  auto at = std::find(list.begin(), list.end(), me);
  if (at == list.end()) {
    EXPECT_EQ(g, nullptr) << "rank " << me;
  } else {
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->size(), int(list.size()));
    EXPECT_EQ(g->rank(), int(at - list.begin()));
    EXPECT_EQ(members(*g, me), std::vector<int32_t>(list.begin(), list.end()));
    std::vector<double> x{double(me), 1.5};
    g->allreduce({.output = x.data(), .count = 2, .dtype = DType::f64});
    double sum = 0;
    for (int r : list) sum += r;
    EXPECT_EQ(x, (std::vector<double>{sum, 1.5 * double(list.size())}));
    int last = g->size() - 1;
    if (last > 0) {  // the same on every member: the size is the group's
      auto ends = g->new_group({last, 0});
      EXPECT_EQ(ends == nullptr, g->rank() != 0 && g->rank() != last);
      if (ends) EXPECT_EQ(members(*ends, me), (std::vector<int32_t>{list.back(), list[0]}));
    }
  }
  pg.barrier();
}

// Lists that differ between ranks, repeat a rank, name one out of range or nothing: every rank
// throws the same kind of error, and the group still works afterwards. Needs size >= 2.
inline void check_new_group_errors(ProcessGroup& pg) {
  const int me = pg.rank(), n = pg.size();
  std::vector<int> list = me == n - 1 ? std::vector<int>{0, n - 1} : std::vector<int>{0, 1};
  if (n == 2) list = me == 1 ? std::vector<int>{1, 0} : std::vector<int>{0, 1};
  std::string msg = error_of<CollectiveMismatch>([&] { pg.new_group(list); });
  EXPECT_NE(msg.find(detail::str("new_group on rank ", me, ": rank ")), std::string::npos) << msg;
  EXPECT_NE(msg.find("every rank must pass the same list"), std::string::npos) << msg;
  if (me == n - 1) {  // names the other rank's list and its own
    EXPECT_NE(msg.find("rank 0 passed [0, 1], this rank passed"), std::string::npos) << msg;
  }
  msg = error_of<CollectiveMismatch>([&] { pg.new_group(me == 0 ? std::vector<int>{0} : list); });
  EXPECT_NE(msg.find("ranks, this rank passed"), std::string::npos) << msg;
  msg = error_of<InvalidArgument>([&] { pg.new_group({1, 0, 1}); });
  EXPECT_NE(
      msg.find(detail::str("new_group on rank ", me, ": rank 1 is listed twice in [1, 0, 1]")),
      std::string::npos)
      << msg;
  msg = error_of<InvalidArgument>([&] { pg.new_group({0, n}); });
  EXPECT_NE(msg.find(detail::str("rank ", n, " in [0, ", n, "] is not in [0, ", n, ")")),
            std::string::npos)
      << msg;
  error_of<InvalidArgument>([&] { pg.new_group({}); });
  int32_t v = 1;
  pg.allreduce({.output = &v, .count = 1, .dtype = DType::i32});
  EXPECT_EQ(v, n);
}

// Peers out of range or this rank itself, an empty batch, and allgatherv without one count per
// rank are refused before anything is sent: the group still works afterwards.
inline void check_argument_errors(ProcessGroup& pg) {
  const int me = pg.rank(), n = pg.size();
  int32_t v = 0;
  std::string msg = error_of<InvalidArgument>(
      [&] { pg.send({.buffer = &v, .count = 1, .dtype = DType::i32, .peer = n + 3}); });
  EXPECT_NE(msg.find(detail::str("send on rank ", me, ": peer ", n + 3,
                                 " must be another rank in [0, ", n, ")")),
            std::string::npos)
      << msg;
  msg = error_of<InvalidArgument>(
      [&] { pg.recv_async({.buffer = &v, .count = 1, .dtype = DType::i32, .peer = -1}); });
  EXPECT_NE(msg.find("peer -1"), std::string::npos) << msg;
  msg = error_of<InvalidArgument>([&] {
    pg.batch_send_recv({{P2POp::kSend, &v, 1, DType::i32, me, 0}});
  });
  EXPECT_NE(msg.find(detail::str("peer ", me, " must be another rank")), std::string::npos) << msg;
  error_of<InvalidArgument>([&] { pg.batch_send_recv({}); });
  std::vector<float> out(size_t(n) + 1);
  msg = error_of<InvalidArgument>([&] {
    pg.allgatherv({.input = out.data(),
                   .output = out.data(),
                   .counts = std::vector<size_t>(size_t(n) + 1, 1)});
  });
  EXPECT_NE(msg.find(detail::str(n + 1, " counts for ", n, " ranks")), std::string::npos) << msg;
  pg.barrier();
}

}  // namespace cohort::comm::testing
