// `cohort ckpt inspect DIR` and `cohort ckpt reshard SRC DST --world M`: look into a checkpoint
// (sharded or not) and re-cut it for another number of ranks (ckpt/sharded.h).
// DIR and SRC are a step directory (step-<N>/, with a MANIFEST.json) or a checkpoint root, which
// means its newest checkpoint that verifies.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cohort/ckpt/checkpoint.h"
#include "cohort/ckpt/sharded.h"
#include "tools/cohort/commands.h"

namespace cohort::cli {
namespace {
namespace fs = std::filesystem;

struct Loaded {
  std::string path;  // the step directory read
  ckpt::CheckpointData data;
};

// Loads and verifies `dir`: a step directory, or a root's newest verified step.
// A step directory, even a damaged one (its manifest gone): loading it as one names what is
// wrong, where treating it as a root would only say that no step in it verifies.
bool looks_like_step_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::path(dir).filename().string().starts_with("step-")) return true;
  for (const char* name : {"MANIFEST.json", "state.json", "model.safetensors"})
    if (fs::exists(fs::path(dir) / name, ec)) return true;
  return false;
}

Loaded load_checkpoint(const std::string& dir) {
  std::error_code ec;
  COHORT_CHECK_ARG(fs::is_directory(dir, ec), "checkpoint ", dir, ": no such directory");
  if (looks_like_step_dir(dir)) return {dir, ckpt::CheckpointManager::load(dir)};
  ckpt::CheckpointManager root({.dir = dir, .keep = 0, .async = false});
  std::optional<ckpt::CheckpointData> d = root.load_latest();
  COHORT_CHECK_IO(d.has_value(), "checkpoint ", dir,
                  ": no step-<N> directory in it that verifies (expected a step directory or a "
                  "checkpoint root written by cohort train)");
  return {(fs::path(dir) / ckpt::step_dir_name(d->step)).string(), std::move(*d)};
}

std::string pieces_text(const ckpt::ShardedView& view, const std::string& section,
                        const std::string& name) {
  std::string out;
  for (const ckpt::TensorPiece& p : view.pieces(section, name)) {
    const int64_t end = p.begin + p.data.numel();
    out += p.shard < 0 ? detail::str(" whole")
                       : detail::str(" ", p.shard, ":[", p.begin, ",", end, ")");
  }
  return out;
}

// What state.json says about the run that wrote it (keys the trainer writes, when present).
void print_run_info(const nlohmann::json& state) {
  if (!state.is_object()) return;
  if (state.contains("strategy") && state["strategy"].is_object())
    std::printf("strategy: %s\n", state["strategy"].value("name", "?").c_str());
  if (state.contains("world_size"))
    std::printf("world_size: %s\n", state["world_size"].dump().c_str());
}

int inspect(const std::string& dir) {
  const Loaded c = load_checkpoint(dir);
  const ckpt::ShardedView view(c.data);
  std::printf("checkpoint: %s\nstep: %lld\n", c.path.c_str(), static_cast<long long>(c.data.step));
  print_run_info(c.data.state);
  if (c.data.state.is_object() && c.data.state.contains(ckpt::kShardsKey))
    std::printf("shards: %d (%s ...)\n", view.world(),
                ckpt::shard_file_name(0, view.world()).c_str());
  else
    std::printf("shards: none (whole tensors)\n");
  for (const char* section : {"model", "optimizer"}) {
    int64_t bytes = 0, count = 0;
    for (const std::string& name : view.names(section)) {
      const DType dt = view.dtype(section, name);
      const Shape& shape = view.shape(section, name);
      std::printf("%-9s %-32s %-12s %-4s%s\n", section, name.c_str(), shape_str(shape).c_str(),
                  ckpt::safetensors_dtype(dt), pieces_text(view, section, name).c_str());
      bytes += shape_numel(shape) * int64_t(dtype_size(dt));
      ++count;
    }
    std::printf("total %s: %lld tensors, %lld bytes\n", section, static_cast<long long>(count),
                static_cast<long long>(bytes));
  }
  return 0;
}

int reshard(const std::string& src, const std::string& dst, int world) {
  const Loaded c = load_checkpoint(src);
  const int from = ckpt::ShardedView(c.data).world();
  const ckpt::CheckpointData out = ckpt::reshard(c.data, world);
  // Never replace a checkpoint (the source itself, when DST is SRC's root).
  const fs::path target = fs::path(dst) / ckpt::step_dir_name(out.step);
  std::error_code ec;
  COHORT_CHECK_ARG(!fs::exists(target, ec), "reshard: ", target.string(),
                   " already exists; choose another destination");
  ckpt::CheckpointManager mgr({.dir = dst, .keep = 0, .async = false});
  mgr.save(out);
  std::printf("resharded %s (step %lld) from %d to %d shard%s\nwrote %s\n", c.path.c_str(),
              static_cast<long long>(out.step), from, world, world == 1 ? " (consolidated)" : "s",
              target.string().c_str());
  return 0;
}

}  // namespace

void add_ckpt_command(CLI::App& app, Handlers& h) {
  CLI::App* cmd = app.add_subcommand("ckpt", "Inspect checkpoints and reshard them");
  cmd->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  CLI::App* ins = cmd->add_subcommand(
      "inspect", "Print a checkpoint's step, shards and tensors (shape, dtype, pieces)");
  ins->add_option("dir", *dir, "Step directory, or checkpoint root (its newest verified step)")
      ->required();
  ins->callback([&h, dir] { h.run = [dir] { return inspect(*dir); }; });

  auto src = std::make_shared<std::string>(), dst = std::make_shared<std::string>();
  auto world = std::make_shared<int>(1);
  CLI::App* rs = cmd->add_subcommand(
      "reshard", "Re-cut a checkpoint for another number of ranks (--world 1: consolidate)");
  rs->add_option("src", *src, "Step directory, or checkpoint root (its newest verified step)")
      ->required();
  rs->add_option("dst", *dst, "Checkpoint root to write DST/step-<N>/ into")->required();
  rs->add_option("--world", *world, "Number of shards to write")
      ->required()
      ->check(CLI::Range(1, ckpt::kMaxShardWorld));
  rs->callback([&h, src, dst, world] { h.run = [=] { return reshard(*src, *dst, *world); }; });
}

}  // namespace cohort::cli
