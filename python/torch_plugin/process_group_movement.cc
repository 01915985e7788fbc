// ProcessGroupCohort's operations that move bytes without reducing them: broadcast, the
// gathers and scatter, all-to-all, barrier and point-to-point (the reductions and the Work
// machinery are in process_group_cohort.cc).
#include "cohort/comm/collectives.h"
#include "process_group_cohort.h"
#include "tensor_buffers.h"

namespace cohort::torch_plugin {

using std::chrono::milliseconds;

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  NoGrad no_grad;
  check_single(tensors, "broadcast");
  const at::Tensor& t = tensors[0];
  AfterList after;
  const int root = int(opts.rootRank);
  at::Tensor buf = bytes_buffer(t, /*writes=*/rank_ != root, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::BROADCAST,
                 "broadcast",
                 {t},
                 {buf},
                 [=](comm::Communicator& c) {
                   return comm::broadcast_async(c, {.buffer = ptr(buf),
                                                    .count = bytes(buf),
                                                    .dtype = comm::DType::u8,
                                                    .root = root,
                                                    .timeout = timeout});
                 },
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  NoGrad no_grad;
  check_single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == size_t(size_),
              "cohort backend: all_gather takes one output list of ", size_,
              " tensors (one per rank)");
  const at::Tensor& t = inputs[0];
  check_same(outputs[0], t, "all_gather", "tensor_list");
  at::Tensor in = t.contiguous();
  at::Tensor out = at::empty({size_ * t.numel()}, t.options());
  AfterList after;
  copy_blocks_back(out, outputs[0], after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::ALLGATHER,
                 "all_gather",
                 outputs[0],
                 {in, out},
                 allgather_bytes(in, out, timeout),
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  NoGrad no_grad;
  check_tensor(output, "all_gather_into_tensor");
  check_tensor(input, "all_gather_into_tensor");
  TORCH_CHECK(
      input.scalar_type() == output.scalar_type() && output.numel() == input.numel() * size_,
      "cohort backend: all_gather_into_tensor needs an output of ", size_,
      " x the input's elements, of the input's dtype (got ", output.numel(), " ",
      output.scalar_type(), " for ", input.numel(), " ", input.scalar_type(), ")");
  AfterList after;
  at::Tensor in = input.contiguous();
  at::Tensor out = bytes_buffer(output, /*writes=*/true, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::_ALLGATHER_BASE,
                 "all_gather_into_tensor",
                 {output},
                 {in, out},
                 allgather_bytes(in, out, timeout),
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(false,
              "cohort backend: all_gather_coalesced is not supported (call all_gather once per "
              "tensor, or all_gather_into_tensor on one flattened tensor)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  NoGrad no_grad;
  check_single(inputs, "gather");
  const at::Tensor& t = inputs[0];
  const int root = int(opts.rootRank);
  std::vector<at::Tensor> outs;
  AfterList after;
  at::Tensor out;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == size_t(size_),
                "cohort backend: gather takes one output list of ", size_,
                " tensors on the root rank");
    outs = outputs[0];
    check_same(outs, t, "gather", "gather_list");
    out = at::empty({size_ * t.numel()}, t.options());
    copy_blocks_back(out, outs, after);
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "cohort backend: gather takes an output list on the root rank only");
  }
  at::Tensor in = t.contiguous();
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::GATHER,
                 "gather",
                 outs,
                 {in, out},
                 [=](comm::Communicator& c) {
                   return comm::gather_async(c, {.input = ptr(in),
                                                 .output = out.defined() ? ptr(out) : nullptr,
                                                 .count = bytes(in),
                                                 .dtype = comm::DType::u8,
                                                 .root = root,
                                                 .timeout = timeout});
                 },
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  NoGrad no_grad;
  check_single(outputs, "scatter");
  const at::Tensor& t = outputs[0];
  const int root = int(opts.rootRank);
  at::Tensor in;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == size_t(size_),
                "cohort backend: scatter takes one input list of ", size_,
                " tensors on the root rank");
    check_same(inputs[0], t, "scatter", "scatter_list");
    in = concat(inputs[0], t.scalar_type());
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "cohort backend: scatter takes an input list on the root rank only");
  }
  AfterList after;
  at::Tensor out = bytes_buffer(t, /*writes=*/true, after);
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch({c10d::OpType::SCATTER,
                 "scatter",
                 {t},
                 {in, out},
                 [=](comm::Communicator& c) {
                   return comm::scatter_async(c, {.input = in.defined() ? ptr(in) : nullptr,
                                                  .output = ptr(out),
                                                  .count = bytes(out),
                                                  .dtype = comm::DType::u8,
                                                  .root = root,
                                                  .timeout = timeout});
                 },
                 run_all(std::move(after))});
}

// All-to-all with per-peer blocks of any size: one batch of sends and receives (posted together,
// so peers that both send first cannot deadlock), this rank's own block copied once it is done.
c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::exchange(c10d::OpType type, const char* name,
                                                            std::vector<at::Tensor> outputs,
                                                            std::vector<at::Tensor> sends,
                                                            std::vector<at::Tensor> recvs,
                                                            AfterList after, milliseconds timeout) {
  std::vector<comm::P2POp> ops;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    // Empty blocks send nothing: both sides agree, the sender's input split being the
    // receiver's output split.
    if (bytes(sends[p]) > 0)
      ops.push_back(
          {comm::P2POp::kSend, ptr(sends[p]), bytes(sends[p]), comm::DType::u8, p, kAlltoallTag});
    if (bytes(recvs[p]) > 0)
      ops.push_back(
          {comm::P2POp::kRecv, ptr(recvs[p]), bytes(recvs[p]), comm::DType::u8, p, kAlltoallTag});
  }
  at::Tensor self_in = sends[rank_], self_out = recvs[rank_];
  after.insert(after.begin(), [self_in, self_out]() mutable { self_out.copy_(self_in); });
  std::vector<at::Tensor> buffers = sends;
  buffers.insert(buffers.end(), recvs.begin(), recvs.end());
  return launch({type, name, std::move(outputs), std::move(buffers),
                 [=](comm::Communicator& c) {
                   if (ops.empty()) return finished(name);
                   return comm::batch_send_recv_async(c, ops, timeout);
                 },
                 run_all(std::move(after))});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  NoGrad no_grad;
  check_tensor(output, "all_to_all_single");
  check_tensor(input, "all_to_all_single");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(),
              "cohort backend: all_to_all_single needs input and output of one dtype (got ",
              input.scalar_type(), " and ", output.scalar_type(), ")");
  const milliseconds timeout = op_timeout(opts.timeout);
  AfterList after;
  at::Tensor in = input.contiguous();
  at::Tensor out = bytes_buffer(output, /*writes=*/true, after);
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() % size_ == 0 && output.numel() == input.numel(),
                "cohort backend: all_to_all_single without splits needs input and output of "
                "equal size, divisible by the group size ",
                size_, " (got ", input.numel(), " and ", output.numel(), " elements)");
    return launch({c10d::OpType::ALLTOALL_BASE,
                   "all_to_all_single",
                   {output},
                   {in, out},
                   [=](comm::Communicator& c) {
                     return comm::alltoall_async(c, {.input = ptr(in),
                                                     .output = ptr(out),
                                                     .count = bytes(in) / size_t(c.size()),
                                                     .dtype = comm::DType::u8,
                                                     .timeout = timeout});
                   },
                   run_all(std::move(after))});
  }
  // Splits count rows of dim 0 (an empty list: equal blocks), as in torch.
  auto blocks = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    std::vector<at::Tensor> out;
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, "cohort backend: all_to_all_single: ", what, " has ", rows,
                  " rows, not divisible by the group size ", size_, " (pass split sizes)");
      for (int p = 0; p < size_; ++p) out.push_back(t.narrow(0, p * rows / size_, rows / size_));
      return out;
    }
    TORCH_CHECK(splits.size() == size_t(size_), "cohort backend: all_to_all_single: ", what,
                " split sizes have ", splits.size(), " entries for a group of ", size_);
    int64_t offset = 0;
    for (int64_t s : splits) {
      TORCH_CHECK(s >= 0 && offset + s <= rows, "cohort backend: all_to_all_single: ", what,
                  " split sizes add up to more than its ", rows, " rows");
      out.push_back(t.narrow(0, offset, s));
      offset += s;
    }
    return out;
  };
  return exchange(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output},
                  blocks(in, input_splits, "input"), blocks(out, output_splits, "output"),
                  std::move(after), timeout);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  NoGrad no_grad;
  TORCH_CHECK(outputs.size() == size_t(size_) && inputs.size() == size_t(size_),
              "cohort backend: all_to_all takes lists of ", size_, " tensors (one per rank; got ",
              inputs.size(), " inputs and ", outputs.size(), " outputs)");
  AfterList after;
  std::vector<at::Tensor> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    check_tensor(inputs[p], "all_to_all");
    check_tensor(outputs[p], "all_to_all");
    sends.push_back(inputs[p].contiguous());
    recvs.push_back(bytes_buffer(outputs[p], /*writes=*/true, after));
  }
  return exchange(c10d::OpType::ALLTOALL, "all_to_all", outputs, std::move(sends), std::move(recvs),
                  std::move(after), op_timeout(opts.timeout));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::barrier(const c10d::BarrierOptions& opts) {
  const milliseconds timeout = op_timeout(opts.timeout);
  return launch(
      {c10d::OpType::BARRIER,
       "barrier",
       {},
       {},
       [=](comm::Communicator& c) { return comm::barrier_async(c, {.timeout = timeout}); },
       {}});
}

// gloo's debugging barrier; cohort's barrier already names the ranks that did not arrive when
// it times out, so this is a barrier waited for here.
void ProcessGroupCohort::monitoredBarrier(const c10d::BarrierOptions& opts, bool) {
  barrier(opts)->wait();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  return point_to_point(comm::P2POp::kSend, tensors, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  return point_to_point(comm::P2POp::kRecv, tensors, src, tag);
}

// One tensor's bytes to or from `peer`, held back until the group posts them (hold_p2p).
c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::point_to_point(comm::P2POp::Kind kind,
                                                                  std::vector<at::Tensor>& tensors,
                                                                  int peer, int tag) {
  const bool sends = kind == comm::P2POp::kSend;
  const char* name = sends ? "send" : "recv";
  NoGrad no_grad;
  check_single(tensors, name);
  TORCH_CHECK(tag >= 0, "cohort backend: ", name, " needs a non-negative tag (got ", tag, ")");
  AfterList after;  // a receive into a staged copy copies back when done
  at::Tensor buf = bytes_buffer(tensors[0], /*writes=*/!sends, after);
  return hold_p2p({sends ? c10d::OpType::SEND : c10d::OpType::RECV,
                   name,
                   {tensors[0]},
                   {buf},
                   {},
                   run_all(std::move(after))},
                  {kind, ptr(buf), bytes(buf), comm::DType::u8, peer, uint32_t(tag)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "cohort backend: recv without a source rank is not supported (cohort matches "
              "messages per pair of ranks: pass src=)");
}

}  // namespace cohort::torch_plugin
