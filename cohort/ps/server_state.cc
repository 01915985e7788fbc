#include "cohort/ps/server_state.h"

#include "cohort/core/error.h"

namespace cohort::ps {

using detail::str;

ckpt::CheckpointData to_checkpoint(const ServerSnapshot& s, int64_t sequence) {
  ckpt::CheckpointData d;
  d.step = sequence;
  d.model = {{"shard", s.shard}};
  d.optimizer = NamedTensors(s.optimizer.tensors.begin(), s.optimizer.tensors.end());
  d.state = nlohmann::json{{"kind", "parameter-server"},
                           {"index", s.index},
                           {"num_servers", s.num_servers},
                           {"num_workers", s.num_workers},
                           {"range", {s.range.begin, s.range.end}},
                           {"step", s.step},
                           {"version", s.version},
                           {"clocks", s.clocks},
                           {"sent_version", s.sent_version},
                           {"said_bye", s.said_bye},
                           {"optimizer_scalars", s.optimizer.scalars}};
  return d;
}

namespace {

template <typename T>
void check_same(const char* field, const T& saved, const T& expected, int64_t step) {
  COHORT_CHECK_ARG(saved == expected, "parameter-server checkpoint ", step, ": ", field, " is ",
                   saved, ", this server has ", expected,
                   " (a checkpoint of another job or server)");
}

ServerSnapshot parse(const ckpt::CheckpointData& d) {
  const nlohmann::json& j = d.state;
  ServerSnapshot s;
  COHORT_CHECK_ARG(j.value("kind", "") == "parameter-server", "checkpoint of step ", d.step,
                   " is not a parameter server's (state.json kind '", j.value("kind", ""), "')");
  s.index = j.at("index").get<int>();
  s.num_servers = j.at("num_servers").get<int>();
  s.num_workers = j.at("num_workers").get<int>();
  s.range = {j.at("range").at(0).get<int64_t>(), j.at("range").at(1).get<int64_t>()};
  s.step = j.at("step").get<int64_t>();
  s.version = j.at("version").get<int64_t>();
  s.clocks = j.at("clocks").get<std::vector<int64_t>>();
  s.sent_version = j.at("sent_version").get<std::vector<int64_t>>();
  s.said_bye = j.at("said_bye").get<std::vector<int>>();
  s.optimizer.scalars = j.at("optimizer_scalars").get<std::map<std::string, double>>();
  s.optimizer.tensors = std::map<std::string, Tensor>(d.optimizer.begin(), d.optimizer.end());
  for (const auto& [name, t] : d.model)
    if (name == "shard") s.shard = t;
  return s;
}

}  // namespace

ServerSnapshot from_checkpoint(const ckpt::CheckpointData& d, const ServerSnapshot& expect) {
  ServerSnapshot s;
  try {
    s = parse(d);
  } catch (const nlohmann::json::exception& e) {
    COHORT_CHECK_IO(false, "parameter-server checkpoint ", d.step,
                    ": state.json is missing or has a bad field: ", e.what());
  }
  check_same("the server index", s.index, expect.index, d.step);
  check_same("the number of servers", s.num_servers, expect.num_servers, d.step);
  check_same("the number of workers", s.num_workers, expect.num_workers, d.step);
  check_same("the key range's begin", s.range.begin, expect.range.begin, d.step);
  check_same("the key range's end", s.range.end, expect.range.end, d.step);
  check_same("the number of worker clocks", s.clocks.size(), size_t(s.num_workers), d.step);
  check_same("the number of sent versions", s.sent_version.size(), size_t(s.num_workers), d.step);
  COHORT_CHECK_ARG(s.shard.defined() && s.shard.dtype() == DType::f32 && s.shard.dim() == 1 &&
                       s.shard.numel() == s.range.size(),
                   "parameter-server checkpoint ", d.step,
                   ": model.safetensors needs "
                   "a 1-D f32 tensor 'shard' of ",
                   s.range.size(), " values");
  for (int r : s.said_bye)
    COHORT_CHECK_ARG(r >= 0 && r < s.num_workers, "parameter-server checkpoint ", d.step,
                     ": said_bye names worker ", r, " of ", s.num_workers);
  return s;
}

}  // namespace cohort::ps
