#include "cohort/parallel/pipeline/pipeline_engine.h"
#include "cohort/core/clock.h"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "cohort/autograd/node.h"
#include "cohort/core/error.h"
#include "cohort/nn/layers.h"
#include "cohort/ops/ops.h"
#include "cohort/tensor/allocator.h"

namespace cohort::parallel {

namespace {

using Clock = std::chrono::steady_clock;
// Ranks run as threads of one process in tests and benches, and the allocator's figures are
// the process's. Holding this lock (PipelineOptions::exclusive_compute) around every tensor
// allocation and free of a step makes the bytes a forward leaves allocated this rank's alone.
std::mutex& compute_mutex() {
  static std::mutex mu;
  return mu;
}
// The lock when options.exclusive_compute asks for it, none otherwise.
std::unique_lock<std::mutex> compute_lock(const PipelineOptions& o) {
  return o.exclusive_compute ? std::unique_lock<std::mutex>(compute_mutex())
                             : std::unique_lock<std::mutex>();
}

int64_t bytes_in_use() {
  return int64_t(CpuAllocator::instance().usage().total);
}

std::string describe(const PipelineTransfer& t) {
  return detail::str(t.kind == PipelineTransfer::kRecv ? "waiting for " : "sending ",
                     t.gradient ? "the gradient" : "the activation", " of micro-batch ", t.micro,
                     t.kind == PipelineTransfer::kRecv ? " from stage " : " to stage ", t.peer);
}

}  // namespace

// What micro-batch `micro` keeps on one chunk between its forward and its backward.
struct InFlight {
  Tensor input;   // the received activation (a leaf requiring grad) or the micro input
  Tensor output;  // the chunk's output with its graph, or the weighted loss on the last stage
  std::map<std::string, uint64_t> dropout;  // counters before the forward (recompute)
  int64_t bytes = 0;                        // what the forward left allocated
};

struct PipelineEngine::Step {
  using Key = std::tuple<bool, int, int>;  // (gradient, micro, chunk)
  const std::vector<PipelineMicroBatch>* micro = nullptr;
  const PipelineLossFn* loss = nullptr;
  std::map<std::pair<int, int>, InFlight> in_flight;  // (micro, chunk)
  std::map<Key, Tensor> inbox, outbox;
  double loss_sum = 0, compute_s = 0, send_wait_s = 0, recv_wait_s = 0;
  int64_t live = 0, peak = 0;
};

PipelineEngine::PipelineEngine(std::vector<std::shared_ptr<nn::Module>> chunks,
                               std::shared_ptr<comm::ProcessGroup> group, PipelineOptions options,
                               ActivationShapeFn activation_shape)
    : chunks_(std::move(chunks)),
      group_(std::move(group)),
      opt_(options),
      shape_(std::move(activation_shape)) {
  COHORT_CHECK_ARG(group_ != nullptr, "PipelineEngine: the pipeline group is null");
  COHORT_CHECK_ARG(!chunks_.empty(), "PipelineEngine: no chunks");
  COHORT_CHECK_ARG(chunks_.size() == 1 || opt_.schedule == PipelineSchedule::kInterleaved1F1B,
                   "PipelineEngine: schedule ", pipeline_schedule_name(opt_.schedule),
                   " runs one chunk per stage, got ", chunks_.size(),
                   " (pipeline.schedule = interleaved runs several)");
  for (const auto& c : chunks_) COHORT_CHECK_ARG(c != nullptr, "PipelineEngine: a chunk is null");
  COHORT_CHECK_ARG(bool(shape_), "PipelineEngine: activation_shape is empty");
  COHORT_CHECK_ARG(opt_.timeout.count() > 0, "PipelineEngine: timeout must be > 0 ms, got ",
                   opt_.timeout.count());
  COHORT_CHECK_ARG(opt_.stage_delay_s >= 0, "PipelineEngine: stage_delay_s must be >= 0, got ",
                   opt_.stage_delay_s);
  stage_ = group_->rank();
  stages_ = group_->size();
}

// Unique per (micro-batch, boundary, direction): a message taken out of turn is a
// CollectiveMismatch. Boundary b lies between virtual stages b and b + 1.
uint32_t PipelineEngine::tag(bool gradient, int micro, int boundary) const {
  const uint32_t boundaries = uint32_t(stages_ * int(chunks_.size()));
  return (uint32_t(micro) * boundaries + uint32_t(boundary)) * 2u + (gradient ? 1u : 0u);
}

void PipelineEngine::delay(double seconds, Step& st) const {
  if (seconds <= 0) return;
  auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  st.compute_s += seconds_since(t0);
}

void PipelineEngine::exchange(const std::vector<PipelineTransfer>& ops, Step& st) {
  if (ops.empty()) return;
  std::vector<comm::P2POp> p2p;
  bool receives = false;
  {
    auto lock = compute_lock(opt_);
    // One stage with several chunks (p = 1, interleaved): messages to itself move from the
    // outbox to the inbox without the group. An activation of chunk c is the input of chunk
    // c + 1, a gradient of chunk c the output gradient of chunk c - 1.
    for (const auto& t : ops) {
      if (t.peer != stage_ || t.kind != PipelineTransfer::kSend) continue;
      auto it = st.outbox.find({t.gradient, t.micro, t.chunk});
      st.inbox[{t.gradient, t.micro, t.chunk + (t.gradient ? -1 : 1)}] = it->second;
      st.outbox.erase(it);
    }
    for (const auto& t : ops) {
      if (t.peer == stage_) {
        COHORT_INTERNAL(
            t.kind == PipelineTransfer::kSend || st.inbox.count({t.gradient, t.micro, t.chunk}),
            "pipeline stage ", stage_, ": ", describe(t), " (to itself) not sent");
        continue;
      }
      const int vs = t.chunk * stages_ + stage_;
      // The boundary below a received activation or a sent gradient, above the others.
      const bool below = (t.kind == PipelineTransfer::kRecv) != t.gradient;
      const uint32_t tg = tag(t.gradient, t.micro, below ? vs - 1 : vs);
      Step::Key key{t.gradient, t.micro, t.chunk};
      Tensor buf;
      if (t.kind == PipelineTransfer::kRecv) {
        buf = empty(shape_((*st.micro)[size_t(t.micro)].input));
        st.inbox[key] = buf;
        receives = true;
      } else {
        buf = st.outbox.at(key);
      }
      p2p.push_back({t.kind == PipelineTransfer::kSend ? comm::P2POp::kSend : comm::P2POp::kRecv,
                     buf.raw_data(), size_t(buf.numel()), DType::f32, t.peer, tg});
    }
  }
  if (p2p.empty()) return;
  auto t0 = Clock::now();
  try {
    group_->batch_send_recv(p2p, opt_.timeout);
  } catch (...) {
    std::string what = detail::str("pipeline stage ", stage_, ": ");
    for (size_t i = 0; i < ops.size(); ++i) what += (i ? " and " : "") + describe(ops[i]);
    rethrow_with_context(std::current_exception(), what + ": ");
  }
  (receives ? st.recv_wait_s : st.send_wait_s) += seconds_since(t0);
  auto lock = compute_lock(opt_);
  for (const auto& t : ops)
    if (t.kind == PipelineTransfer::kSend && t.peer != stage_)
      st.outbox.erase({t.gradient, t.micro, t.chunk});
}

void PipelineEngine::run_forward(const PipelineAction& a, Step& st) {
  const auto& mb = (*st.micro)[size_t(a.micro)];
  const int vs = a.chunk * stages_ + stage_, last = stages_ * int(chunks_.size()) - 1;
  nn::Module& chunk = *chunks_[size_t(a.chunk)];
  {
    auto lock = compute_lock(opt_);
    auto t0 = Clock::now();
    const int64_t before = bytes_in_use();
    InFlight fl;
    if (vs == 0) {
      fl.input = mb.input;
    } else {
      auto it = st.inbox.find({false, a.micro, a.chunk});
      fl.input = it->second;
      st.inbox.erase(it);
      fl.input.set_requires_grad(true);
      fl.bytes += int64_t(CpuAllocator::round_size(fl.input.nbytes()));
    }
    if (opt_.recompute) fl.dropout = nn::dropout_counters(chunk);
    {
      std::unique_ptr<autograd::NoGradGuard> no_grad;
      if (opt_.recompute) no_grad = std::make_unique<autograd::NoGradGuard>();
      Tensor out = chunk(fl.input);
      if (vs == last) {
        Tensor loss = (*st.loss)(out, mb.target);
        st.loss_sum += mb.weight * double(loss.detach().contiguous_raw().item<float>());
        if (!opt_.recompute) fl.output = loss * mb.weight;
      } else {
        COHORT_CHECK_ARG(out.dtype() == DType::f32 && out.shape() == shape_(mb.input),
                         "pipeline stage ", stage_, ": chunk ", a.chunk, " returned ", out.str(),
                         ", expected float32 ", shape_str(shape_(mb.input)), " (activation_shape)");
        // The copy being sent is freed by the next exchange: not kept for backward, unless it
        // is the output itself (already contiguous) and the graph keeps that.
        Tensor send = out.detach().contiguous_raw();
        if (opt_.recompute || send.raw_data() != out.raw_data()) {
          fl.bytes -= int64_t(CpuAllocator::round_size(send.nbytes()));
        }
        st.outbox[{false, a.micro, a.chunk}] = send;
        if (!opt_.recompute) fl.output = out;
      }
    }
    fl.bytes += bytes_in_use() - before;
    st.live += fl.bytes;
    st.peak = std::max(st.peak, st.live);
    st.in_flight[{a.micro, a.chunk}] = std::move(fl);
    st.compute_s += seconds_since(t0);
  }
  delay(opt_.stage_delay_s, st);
}

void PipelineEngine::run_backward(const PipelineAction& a, Step& st) {
  const auto& mb = (*st.micro)[size_t(a.micro)];
  const int vs = a.chunk * stages_ + stage_, last = stages_ * int(chunks_.size()) - 1;
  nn::Module& chunk = *chunks_[size_t(a.chunk)];
  {
    auto lock = compute_lock(opt_);
    auto t0 = Clock::now();
    auto it = st.in_flight.find({a.micro, a.chunk});
    InFlight& fl = it->second;
    if (opt_.recompute) {
      // Replay the forward's dropout masks, then put the counters back where later forwards
      // expect them.
      auto now = nn::dropout_counters(chunk);
      nn::set_dropout_counters(chunk, fl.dropout);
      Tensor out = chunk(fl.input);
      nn::set_dropout_counters(chunk, now);
      fl.output = vs == last ? (*st.loss)(out, mb.target) * mb.weight : out;
    }
    if (vs == last) {
      fl.output.backward();
    } else {
      auto g = st.inbox.find({true, a.micro, a.chunk});
      fl.output.backward(g->second);
      st.inbox.erase(g);
    }
    if (vs > 0) {
      Tensor grad = fl.input.grad();
      COHORT_INTERNAL(grad.defined(), "pipeline stage ", stage_, ": micro-batch ", a.micro,
                      " has no input gradient (the chunk's output does not depend on its input)");
      st.outbox[{true, a.micro, a.chunk}] = grad.contiguous_raw();
    }
    st.live -= fl.bytes;
    st.in_flight.erase(it);  // frees the graph and the input now, not at the end of the step
    st.compute_s += seconds_since(t0);
  }
  delay(2 * opt_.stage_delay_s, st);
}

double PipelineEngine::broadcast_loss(double loss) {
  if (stages_ == 1) return loss;
  try {
    group_->broadcast({.buffer = &loss,
                       .count = 1,
                       .dtype = DType::f64,
                       .root = stages_ - 1,
                       .timeout = opt_.timeout});
  } catch (...) {
    rethrow_with_context(
        std::current_exception(),
        detail::str("pipeline stage ", stage_, ": waiting for the loss from the last stage ",
                    stages_ - 1, ": "));
  }
  return loss;
}

double PipelineEngine::forward_backward(const std::vector<PipelineMicroBatch>& micro,
                                        const PipelineLossFn& loss) {
  COHORT_CHECK_ARG(!micro.empty(), "PipelineEngine::forward_backward: no micro-batches");
  COHORT_CHECK_ARG(bool(loss), "PipelineEngine::forward_backward: the loss function is empty");
  const int m = int(micro.size()), v = int(chunks_.size());
  if (opt_.schedule == PipelineSchedule::kInterleaved1F1B) {
    COHORT_CHECK_ARG(m % stages_ == 0, "PipelineEngine: pipeline.schedule = interleaved needs ",
                     "pipeline.micro_batches (", m, ") to be a multiple of parallel.pp (", stages_,
                     "), as Megatron-LM's virtual pipeline does");
  }
  auto actions = make_pipeline_schedule(opt_.schedule, stages_, stage_, m, v);
  auto plan = make_pipeline_comm_plan(actions, stages_, stage_, v);
  const uint64_t sent0 = group_->bytes_sent(), recv0 = group_->bytes_received();
  auto t0 = Clock::now();
  Step st;
  st.micro = &micro;
  st.loss = &loss;
  for (size_t i = 0; i < actions.size(); ++i) {
    exchange(plan[i], st);
    if (actions[i].kind == PipelineAction::kForward) {
      run_forward(actions[i], st);
    } else {
      run_backward(actions[i], st);
    }
  }
  exchange(plan.back(), st);
  double total = broadcast_loss(st.loss_sum);
  stats_ = {};
  stats_.total_s = seconds_since(t0);
  stats_.compute_s = st.compute_s;
  stats_.send_wait_s = st.send_wait_s;
  stats_.recv_wait_s = st.recv_wait_s;
  stats_.bubble_s = std::max(0.0, stats_.total_s - stats_.compute_s);
  stats_.bubble_fraction = stats_.total_s > 0 ? stats_.bubble_s / stats_.total_s : 0;
  stats_.formula = pipeline_bubble_formula(opt_.schedule, stages_, m, v);
  stats_.peak_activation_bytes = st.peak;
  stats_.bytes_sent = group_->bytes_sent() - sent0;
  stats_.bytes_received = group_->bytes_received() - recv0;
  return total;
}

Tensor PipelineEngine::forward_only(const Tensor& input) {
  autograd::NoGradGuard no_grad;
  const int v = int(chunks_.size()), last = stages_ * v - 1;
  const Shape shape = shape_(input);
  Tensor x = input;
  for (int c = 0; c < v; ++c) {
    const int vs = c * stages_ + stage_;
    const int prev = (stage_ + stages_ - 1) % stages_, next = (stage_ + 1) % stages_;
    if (vs > 0 && stages_ > 1) {  // with one stage, x is already the previous chunk's output
      x = empty(shape);
      try {
        group_->recv({.buffer = x.raw_data(),
                      .count = size_t(x.numel()),
                      .peer = prev,
                      .tag = tag(false, 0, vs - 1),
                      .timeout = opt_.timeout});
      } catch (...) {
        rethrow_with_context(
            std::current_exception(),
            detail::str("pipeline stage ", stage_,
                        ": forward_only: waiting for the activation from stage ", prev, ": "));
      }
    }
    x = (*chunks_[size_t(c)])(x);
    if (vs == last) return x;
    if (stages_ == 1) continue;
    Tensor send = x.contiguous_raw();
    try {
      group_->send({.buffer = send.raw_data(),
                    .count = size_t(send.numel()),
                    .peer = next,
                    .tag = tag(false, 0, vs),
                    .timeout = opt_.timeout});
    } catch (...) {
      rethrow_with_context(
          std::current_exception(),
          detail::str("pipeline stage ", stage_, ": forward_only: sending the activation to stage ",
                      next, ": "));
    }
  }
  return Tensor();
}

}  // namespace cohort::parallel
