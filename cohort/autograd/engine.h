#pragma once
// The backward engine: runs the graph behind `root` in reverse, single-threaded and in a fixed
// order (deterministic).
//
// Steps: (1) count, for every node reachable from root, how many edges point at it;
// (2) start from root with grad_output; (3) repeatedly run the ready node with the highest
// sequence number, summing the gradients it returns into the input buffers of the nodes its
// edges point at; a node is ready when all its incoming edges have delivered.
#include <functional>

#include "cohort/autograd/node.h"

namespace cohort::autograd {

// grad_output undefined: root must hold one element and its gradient is 1.
void backward(const Tensor& root, const Tensor& grad_output = Tensor());

// Queues `fn` to run once the backward pass running on this thread has finished its graph and
// before backward() returns (torch's Variable._execution_engine.queue_callback). Meant for
// grad-ready hooks: DDP queues "wait for every bucket and write the averaged grads back".
//   - Callbacks run in the order queued; one may queue further callbacks (they run after).
//   - The queue belongs to the innermost backward() running on the calling thread; a nested
//     backward (called from a hook) has its own.
//   - If a callback throws, the rest are dropped and backward() rethrows. If the graph itself
//     throws, queued callbacks are dropped without running.
// InvalidArgument when no backward is running on this thread.
void queue_callback(std::function<void()> fn);

// Raw (graph-free) helpers used by the engine and by backward functions.
Tensor add_raw(const Tensor& a, const Tensor& b);  // same shape, f32
void add_into(Tensor& acc, const Tensor& g);       // acc += g, same shape, f32

}  // namespace cohort::autograd
