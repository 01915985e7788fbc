// The device mesh (mesh.h): pure rank arithmetic, plus the one collective that splits groups.
#include "cohort/parallel/mesh.h"

#include <utility>

#include "cohort/core/error.h"

namespace cohort::parallel {
namespace {

// The product in 64 bits: three config values can overflow an int.
int64_t product(const MeshShape& s) {
  return int64_t(s.dp) * int64_t(s.pp) * int64_t(s.tp);
}

void check_positive(const char* key, int value) {
  COHORT_CHECK_ARG(value >= 1, "config: ", key, " = ", value, ", but it must be at least 1");
}

void check_rank(const MeshShape& shape, int rank) {
  COHORT_CHECK_ARG(rank >= 0 && rank < product(shape), "device mesh: rank ", rank,
                   " is outside the mesh dp ", shape.dp, " x pp ", shape.pp, " x tp ", shape.tp,
                   " (", product(shape), " ranks)");
}

}  // namespace

void check_mesh(const MeshShape& shape, int world) {
  check_positive("parallel.dp", shape.dp);
  check_positive("parallel.pp", shape.pp);
  check_positive("parallel.tp", shape.tp);
  COHORT_CHECK_ARG(product(shape) == world, "config: parallel.dp (", shape.dp, ") * parallel.pp (",
                   shape.pp, ") * parallel.tp (", shape.tp, ") = ", product(shape),
                   ", but the job has ", world, " workers");
}

MeshShape resolve_mesh(MeshShape requested, int world) {
  COHORT_CHECK_ARG(world >= 1, "device mesh: world size ", world, ", expected at least 1");
  COHORT_CHECK_ARG(requested.dp >= 0, "config: parallel.dp = ", requested.dp,
                   ", but it must be at least 1, or 0 for the workers left by pp and tp");
  if (requested.dp == 0) {
    check_positive("parallel.pp", requested.pp);
    check_positive("parallel.tp", requested.tp);
    int64_t model = int64_t(requested.pp) * requested.tp;
    COHORT_CHECK_ARG(world % model == 0, "config: parallel.dp = 0 asks for the job's ", world,
                     " workers divided by parallel.pp (", requested.pp, ") * parallel.tp (",
                     requested.tp, ") = ", model, ", which does not divide ", world);
    requested.dp = int(world / model);
  }
  check_mesh(requested, world);
  return requested;
}

MeshCoord mesh_coord(const MeshShape& shape, int rank) {
  check_rank(shape, rank);
  MeshCoord c;
  c.tp = rank % shape.tp;
  c.dp = (rank / shape.tp) % shape.dp;
  c.pp = rank / (shape.tp * shape.dp);
  return c;
}

int mesh_rank(const MeshShape& shape, MeshCoord c) {
  COHORT_CHECK_ARG(
      c.dp >= 0 && c.dp < shape.dp && c.pp >= 0 && c.pp < shape.pp && c.tp >= 0 && c.tp < shape.tp,
      "device mesh: coordinate (dp ", c.dp, ", pp ", c.pp, ", tp ", c.tp,
      ") is outside the mesh dp ", shape.dp, " x pp ", shape.pp, " x tp ", shape.tp);
  return (c.pp * shape.dp + c.dp) * shape.tp + c.tp;
}

std::vector<int> tp_group_ranks(const MeshShape& shape, int rank) {
  MeshCoord c = mesh_coord(shape, rank);
  std::vector<int> out;
  for (c.tp = 0; c.tp < shape.tp; ++c.tp) out.push_back(mesh_rank(shape, c));
  return out;
}

std::vector<int> dp_group_ranks(const MeshShape& shape, int rank) {
  MeshCoord c = mesh_coord(shape, rank);
  std::vector<int> out;
  for (c.dp = 0; c.dp < shape.dp; ++c.dp) out.push_back(mesh_rank(shape, c));
  return out;
}

std::vector<int> pp_group_ranks(const MeshShape& shape, int rank) {
  MeshCoord c = mesh_coord(shape, rank);
  std::vector<int> out;
  for (c.pp = 0; c.pp < shape.pp; ++c.pp) out.push_back(mesh_rank(shape, c));
  return out;
}

void check_mesh_fits_gpt(const MeshShape& shape, int64_t n_layer, int64_t n_head, int64_t n_embd,
                         int64_t vocab) {
  COHORT_CHECK_ARG(shape.pp <= n_layer, "config: parallel.pp (", shape.pp,
                   ") is larger than model.n_layer (", n_layer,
                   "): each pipeline stage needs at least one layer");
  // Megatron's cuts: attention heads split whole across tp ranks, the MLP's hidden width
  // (4 * n_embd) and the embedding's vocabulary rows split evenly.
  COHORT_CHECK_ARG(n_head % shape.tp == 0, "config: parallel.tp (", shape.tp,
                   ") does not divide model.n_head (", n_head,
                   "): each tensor-parallel rank holds whole attention heads");
  COHORT_CHECK_ARG(n_embd % shape.tp == 0, "config: parallel.tp (", shape.tp,
                   ") does not divide model.n_embd (", n_embd,
                   "): each tensor-parallel rank holds an equal slice of every layer's width");
  COHORT_CHECK_ARG(vocab % shape.tp == 0, "config: parallel.tp (", shape.tp,
                   ") does not divide the vocabulary size (", vocab,
                   "): each tensor-parallel rank holds an equal slice of the embedding's rows");
}

DeviceMesh make_device_mesh(std::shared_ptr<comm::ProcessGroup> world, MeshShape requested) {
  COHORT_CHECK_ARG(world != nullptr, "make_device_mesh: null world group");
  DeviceMesh m;
  m.shape = resolve_mesh(requested, world->size());
  m.coord = mesh_coord(m.shape, world->rank());
  const MeshShape& s = m.shape;
  const MeshCoord& c = m.coord;
  // One colour per group: the coordinates the group's members share; the key is the rank's
  // coordinate along the group, so group rank i is element i of *_group_ranks.
  m.tp = world->split(c.pp * s.dp + c.dp, c.tp);
  m.dp = world->split(c.pp * s.tp + c.tp, c.dp);
  m.pp = world->split(c.dp * s.tp + c.tp, c.pp);
  m.world = std::move(world);
  return m;
}

}  // namespace cohort::parallel
