// The device mesh: rank <-> coordinate arithmetic, group rank lists, the errors a bad shape
// gets, and (ranks as threads) that make_device_mesh's groups reduce over exactly their ranks.
#include "cohort/parallel/mesh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>

#include "tests/parallel/ddp_test_util.h"

namespace cohort::parallel {
namespace {

using testing::PG;
using testing::run_world;

int world_of(const MeshShape& s) {
  return s.dp * s.pp * s.tp;
}

const std::vector<MeshShape> kShapes = {{.dp = 1, .pp = 1, .tp = 1}, {.dp = 2, .pp = 2, .tp = 1},
                                        {.dp = 1, .pp = 2, .tp = 2}, {.dp = 2, .pp = 1, .tp = 2},
                                        {.dp = 2, .pp = 2, .tp = 2}, {.dp = 3, .pp = 2, .tp = 2}};

// The message of the InvalidArgument that fn throws ("" when it throws none).
std::string arg_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Mesh, CoordinatesFollowMegatronOrder) {
  MeshShape s{.dp = 2, .pp = 2, .tp = 2};
  // tp fastest, then dp, then pp.
  MeshCoord c = mesh_coord(s, 5);  // 5 = 1*4 + 0*2 + 1
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(mesh_rank(s, {.dp = 1, .pp = 0, .tp = 1}), 3);
  EXPECT_EQ(mesh_rank(s, {.dp = 1, .pp = 1, .tp = 0}), 6);
  EXPECT_EQ(tp_group_ranks(s, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(dp_group_ranks(s, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(pp_group_ranks(s, 5), (std::vector<int>{1, 5}));
  MeshShape dp_pp{.dp = 2, .pp = 2, .tp = 1};
  EXPECT_EQ(dp_group_ranks(dp_pp, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(pp_group_ranks(dp_pp, 2), (std::vector<int>{0, 2}));
}

TEST(Mesh, CoordinatesRoundTripForEveryShape) {
  for (const MeshShape& s : kShapes) {
    for (int r = 0; r < world_of(s); ++r) {
      MeshCoord c = mesh_coord(s, r);
      EXPECT_EQ(mesh_rank(s, c), r);
      EXPECT_EQ(r, c.pp * s.dp * s.tp + c.dp * s.tp + c.tp);
    }
  }
}

// For one kind of group: every rank is in exactly one group, each group has `size` ranks, the
// rank's own list contains it at its coordinate, and all members see the same list.
void check_partition(const MeshShape& s, int size,
                     std::vector<int> (*ranks_of)(const MeshShape&, int), int MeshCoord::*axis) {
  std::vector<int> seen(size_t(world_of(s)), 0);
  for (int r = 0; r < world_of(s); ++r) {
    std::vector<int> g = ranks_of(s, r);
    ASSERT_EQ(int(g.size()), size);
    EXPECT_EQ(g[size_t(mesh_coord(s, r).*axis)], r);
    for (int member : g) EXPECT_EQ(ranks_of(s, member), g);
    if (g.front() == r) {
      for (int member : g) ++seen[size_t(member)];
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(Mesh, GroupsAreDisjointAndCoverTheWorld) {
  for (const MeshShape& s : kShapes) {
    SCOPED_TRACE(detail::str("dp ", s.dp, " pp ", s.pp, " tp ", s.tp));
    check_partition(s, s.tp, tp_group_ranks, &MeshCoord::tp);
    check_partition(s, s.dp, dp_group_ranks, &MeshCoord::dp);
    check_partition(s, s.pp, pp_group_ranks, &MeshCoord::pp);
  }
}

TEST(Mesh, ResolveFillsDpWithTheRest) {
  MeshShape s = resolve_mesh({.dp = 0, .pp = 2, .tp = 2}, 8);
  EXPECT_EQ(s.dp, 2);
  EXPECT_EQ(s.pp, 2);
  EXPECT_EQ(s.tp, 2);
  EXPECT_EQ(resolve_mesh({.dp = 0}, 5).dp, 5);
  EXPECT_EQ(resolve_mesh({.dp = 1, .pp = 4}, 4).pp, 4);
}

TEST(Mesh, ErrorsNameTheKeysAndValues) {
  EXPECT_EQ(arg_error([] { check_mesh({.dp = 2, .pp = 2, .tp = 3}, 4); }),
            "config: parallel.dp (2) * parallel.pp (2) * parallel.tp (3) = 12, but the job has 4 "
            "workers");
  EXPECT_EQ(arg_error([] { check_mesh({.dp = 4, .pp = 0, .tp = 1}, 4); }),
            "config: parallel.pp = 0, but it must be at least 1");
  EXPECT_EQ(arg_error([] { resolve_mesh({.dp = 0, .pp = 1, .tp = -2}, 4); }),
            "config: parallel.tp = -2, but it must be at least 1");
  EXPECT_EQ(arg_error([] { resolve_mesh({.dp = -1}, 4); }),
            "config: parallel.dp = -1, but it must be at least 1, or 0 for the workers left by "
            "pp and tp");
  EXPECT_EQ(arg_error([] { resolve_mesh({.dp = 0, .pp = 3, .tp = 1}, 4); }),
            "config: parallel.dp = 0 asks for the job's 4 workers divided by parallel.pp (3) * "
            "parallel.tp (1) = 3, which does not divide 4");
  EXPECT_NE(arg_error([] { mesh_coord({.dp = 2}, 2); }).find("rank 2 is outside the mesh"),
            std::string::npos);
  EXPECT_NE(arg_error([] { mesh_rank({.dp = 2}, {.dp = 0, .pp = 1}); }).find("(dp 0, pp 1, tp 0)"),
            std::string::npos);
}

TEST(Mesh, GptFitErrors) {
  MeshShape ok{.dp = 1, .pp = 4, .tp = 4};
  EXPECT_EQ(arg_error([&] { check_mesh_fits_gpt(ok, 4, 4, 128, 256); }), "");
  EXPECT_EQ(arg_error([] { check_mesh_fits_gpt({.pp = 8}, 4, 4, 128, 256); }),
            "config: parallel.pp (8) is larger than model.n_layer (4): each pipeline stage needs "
            "at least one layer");
  EXPECT_EQ(arg_error([] { check_mesh_fits_gpt({.tp = 3}, 4, 6, 128, 256); }),
            "config: parallel.tp (3) does not divide model.n_embd (128): each tensor-parallel "
            "rank holds an equal slice of every layer's width");
  EXPECT_NE(arg_error([] {
              check_mesh_fits_gpt({.tp = 8}, 4, 4, 128, 256);
            }).find("parallel.tp (8) does not divide model.n_head (4)"),
            std::string::npos);
  EXPECT_NE(arg_error([] {
              check_mesh_fits_gpt({.tp = 3}, 4, 3, 96, 256);
            }).find("parallel.tp (3) does not divide the vocabulary size (256)"),
            std::string::npos);
}

// Each rank contributes its global rank; every group's sum must be the sum of its ranks, its
// size and rank must match the pure rank lists.
void check_group(const PG& g, const std::vector<int>& ranks, int global) {
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->size(), int(ranks.size()));
  EXPECT_EQ(ranks[size_t(g->rank())], global);
  int64_t v = global;
  g->allreduce({.output = &v, .count = 1, .dtype = comm::DType::i64});
  int64_t want = 0;
  for (int r : ranks) want += r;
  EXPECT_EQ(v, want);
}

void check_world(int n, MeshShape requested) {
  run_world(n, [&](int r, PG world) {
    DeviceMesh m = make_device_mesh(world, requested);
    EXPECT_EQ(world_of(m.shape), n);
    EXPECT_EQ(mesh_rank(m.shape, m.coord), r);
    EXPECT_EQ(m.world->rank(), r);
    check_group(m.tp, tp_group_ranks(m.shape, r), r);
    check_group(m.dp, dp_group_ranks(m.shape, r), r);
    check_group(m.pp, pp_group_ranks(m.shape, r), r);
  });
}

TEST(Mesh, DeviceMeshGroupsReduceOverTheirRanks4) {
  check_world(4, {.dp = 0, .pp = 2, .tp = 1});
  check_world(4, {.dp = 1, .pp = 2, .tp = 2});
  check_world(4, {.dp = 0});  // pp and tp groups of one rank
}

TEST(Mesh, DeviceMeshGroupsReduceOverTheirRanks8) {
  check_world(8, {.dp = 2, .pp = 2, .tp = 2});
}

TEST(Mesh, DeviceMeshRejectsAShapeThatDoesNotFit) {
  run_world(2, [&](int, PG world) {
    EXPECT_NE(arg_error([&] {
                make_device_mesh(world, {.dp = 1, .pp = 3});
              }).find("= 3, but the job has 2 workers"),
              std::string::npos);
  });
}

}  // namespace
}  // namespace cohort::parallel
