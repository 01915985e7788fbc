#pragma once
// The backward engine: runs the graph behind `root` in reverse, single-threaded and in a fixed
// order (deterministic).
//
// Steps: (1) count, for every node reachable from root, how many edges point at it;
// (2) start from root with grad_output; (3) repeatedly run the ready node with the highest
// sequence number, summing the gradients it returns into the input buffers of the nodes its
// edges point at; a node is ready when all its incoming edges have delivered.
#include "cohort/autograd/node.h"

namespace cohort::autograd {

// grad_output undefined: root must hold one element and its gradient is 1.
void backward(const Tensor& root, const Tensor& grad_output = Tensor());

// Raw (graph-free) helpers used by the engine and by backward functions.
Tensor add_raw(const Tensor& a, const Tensor& b);  // same shape, f32
void add_into(Tensor& acc, const Tensor& g);       // acc += g, same shape, f32

}  // namespace cohort::autograd
