#include "cohort/train/fixed_batch.h"

#include <chrono>
#include <cstring>

#include "cohort/nn/layers.h"
#include "cohort/nn/loss.h"
#include "cohort/parallel/ordered_mean.h"
#include "cohort/rendezvous/bootstrap.h"

namespace cohort::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

size_t total_numel(const optim::NamedParams& params) {
  size_t n = 0;
  for (const auto& [name, p] : params) n += size_t(p.numel());
  return n;
}

// Every parameter's .grad, flattened in the optimizer's order (none: zeros).
void copy_grads(const optim::NamedParams& params, float* out) {
  for (const auto& [name, p] : params) {
    const size_t n = size_t(p.numel());
    Tensor g = p.grad();
    if (!g.defined()) {
      std::memset(out, 0, n * sizeof(float));
    } else {
      if (!g.is_contiguous()) g = g.contiguous_raw();
      std::memcpy(out, g.data<float>(), n * sizeof(float));
    }
    out += n;
  }
}

// The reverse: `flat` into every parameter's .grad (made where a parameter has none).
void set_grads(const optim::NamedParams& params, const float* flat) {
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined() || !g.is_contiguous()) {
      g = zeros(p.shape());
      Tensor(p).set_grad(g);
    }
    const size_t n = size_t(p.numel());
    std::memcpy(g.data<float>(), flat, n * sizeof(float));
    flat += n;
  }
}

}  // namespace

int64_t fixed_batch_slots(const Trainer::State& s) {
  if (s.cfg.get_int("elastic.min_workers") <= 0 || !s.cfg.get_bool("elastic.fixed_batch")) return 0;
  if (s.data.sharded) return 0;
  // The launcher's count, which a worker joining the running job sees too (its world is not
  // formed yet when this is asked).
  const int64_t launched = rendezvous::int_from_env(s.env, "COHORT_WORLD_SIZE", s.world->size);
  return launched > 1 ? launched : 0;
}

std::vector<int64_t> own_slots(const Trainer::State& s) {
  return parallel::slots_of_rank(s.batch_slots, s.world->data_size, s.world->data_rank);
}

double slot_weight(const Trainer::State& s) {
  const std::string& strategy = s.cfg.get_string("parallel.strategy");
  if (strategy == "local_sgd" || strategy == "gossip")  // each worker steps alone
    return 1.0 / double(own_slots(s).size());
  return double(s.world->data_size) / double(s.batch_slots);
}

int64_t lockstep_passes(const Trainer::State& s) {
  if (s.batch_slots == 0 || s.cfg.get_string("parallel.strategy") != "zero" ||
      s.cfg.get_int("zero.stage") != 3)
    return 0;
  return (s.batch_slots + s.world->data_size - 1) / s.world->data_size;
}

int64_t slot_samples_share(const Trainer::State& s, int64_t slot_samples) {
  const int64_t global = slot_samples * s.batch_slots, w = s.world->data_size;
  const int64_t r = s.world->data_rank;
  return global * (r + 1) / w - global * r / w;
}

int64_t samples_scale(const Trainer::State& s) {
  return s.batch_slots > 0 ? 1 : s.world->data_size;
}

int64_t data_split_workers(const Trainer::State& s) {
  return s.batch_slots > 0 ? s.batch_slots : s.world->data_size;
}

parallel::ForwardBackwardResult exact_forward_backward(Trainer::State& s,
                                                       const std::vector<parallel::MicroBatch>& mb,
                                                       parallel::StrategyStats& comm) {
  const optim::NamedParams& params = s.opt->params();
  const size_t n = total_numel(params);
  std::vector<float> grads(mb.size() * n);
  parallel::ForwardBackwardResult r;
  for (size_t j = 0; j < mb.size(); ++j) {
    const auto t0 = Clock::now();
    s.strategy->zero_grad();
    Tensor loss = nn::cross_entropy(s.strategy->forward(mb[j].x), mb[j].y);
    const auto t1 = Clock::now();
    r.loss += double(loss.item<float>()) / double(mb.size());
    s.strategy->backward(loss, /*sync=*/false);  // DDP: no allreduce, the gradient in .grad
    copy_grads(params, grads.data() + j * n);
    const auto t2 = Clock::now();
    r.forward_s += seconds(t0, t1);
    r.backward_s += seconds(t1, t2);
    r.phases.push_back({"forward", t0, t1});
    r.phases.push_back({"backward", t1, t2});
  }
  const auto t3 = Clock::now();
  std::vector<float> mean(n);
  parallel::OrderedMeanStats st =
      parallel::ordered_slot_mean(*s.world->group, s.batch_slots, grads.data(), n, mean.data());
  set_grads(params, mean.data());
  const auto t4 = Clock::now();
  r.phases.push_back({"ordered_mean", t3, t4});
  comm.comm_s += seconds(t3, t4);
  comm.exposed_s += seconds(t3, t4);  // nothing overlaps it: it runs after the last backward
  comm.bytes_sent += st.bytes_sent;
  comm.bytes_received += st.bytes_received;
  return r;
}

void check_exact_model(const Trainer::State& s) {
  for (const auto& [name, m] : s.model->named_modules()) {
    const auto* drop = dynamic_cast<const nn::Dropout*>(m);
    COHORT_CHECK_ARG(drop == nullptr || drop->p() == 0, "config: elastic.exact needs a model ",
                     "without dropout: '", name, "' drops with p = ", drop ? drop->p() : 0,
                     ", and its masks would follow which worker computed a micro-batch");
  }
  const std::string counter = nn::kDropoutCounterBuffer;
  for (const auto& [name, t] : s.model->named_buffers()) {
    const bool is_counter =
        name.size() >= counter.size() &&
        name.compare(name.size() - counter.size(), counter.size(), counter) == 0;
    COHORT_CHECK_ARG(is_counter, "config: elastic.exact needs a model without running ",
                     "statistics: its buffer '", name, "' (batch norm) would follow the ",
                     "micro-batches each worker computed; leave elastic.exact off or drop the ",
                     "layer");
  }
}

}  // namespace cohort::train
