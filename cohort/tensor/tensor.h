#pragma once
// Tensor: a shared handle to (storage, offset, shape, strides, dtype, device) plus the autograd
// fields. Copying a Tensor copies the handle, like torch.Tensor. Views share storage.
//
// Layering: this header belongs to tensor/, below autograd/ and ops/. The methods marked
// [ops] are declared here for a familiar API (x.reshape(...), x.backward()) but defined in
// ops/tensor_methods.cc and autograd/engine.cc; tensor/ itself never calls them.
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cohort/core/error.h"
#include "cohort/tensor/dtype.h"
#include "cohort/tensor/memory_kind.h"

namespace cohort {

namespace autograd {
class Node;
}

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[64, 784]"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

// Owns one block of device memory. Returns it to the caching allocator when the last
// Tensor that views it goes away. Remembers the MemoryKind its bytes are counted as
// (allocator.h): the allocating thread's MemoryKindScope, until tag_memory moves them.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory owned elsewhere (e.g. a communicator's shared arena), kept alive by `owner` (may
  // be null: the caller keeps it alive). Not counted until tagged.
  Storage(void* data, size_t nbytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  // Gives the memory back to the allocator while every Tensor viewing this storage lives on
  // (ZeRO-3 frees a gathered module's parameters between uses, as FSDP resizes its storage to
  // 0). Until reacquire(), data() is null: reading through a view is the caller's bug.
  // Allocator-owned storage only (InvalidArgument otherwise).
  void release();
  // Takes a fresh block of the same size (contents undefined); a no-op when held.
  void reacquire();
  bool released() const { return data_ == nullptr && nbytes_ > 0; }
  Device device() const { return device_; }
  // kCount: external memory not counted (never tagged).
  MemoryKind memory_kind() const { return kind_.load(std::memory_order_relaxed); }
  // Counts this block's bytes as `kind` from now on; nothing to do when it already is.
  void set_memory_kind(MemoryKind kind);

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  size_t rounded_ = 0;  // as counted: the allocator's block size, or nbytes_ when external
  Device device_;
  bool external_ = false;        // not the allocator's: never returned to it
  std::shared_ptr<void> owner_;  // external memory: released with it, not by the allocator
  // Atomic: tag_memory may race with another tagging of the same storage (exchange decides
  // who moves the bytes); the destructor reads it after every other user is gone.
  std::atomic<MemoryKind> kind_;
};

class Tensor;
using GradReadyHook = std::function<void(Tensor& param)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::f32;

  // Autograd. A leaf with requires_grad gets its gradient accumulated into `grad`; a non-leaf
  // records the node that produced it (grad_fn) and which of that node's outputs it is.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaf only, made on first use
  std::vector<GradReadyHook> grad_ready_hooks;     // leaf only
  // Leaf only: where its next fresh gradient may be written in place instead of into a new
  // tensor (DDP's gradient_as_bucket_view: the parameter's bucket slot, so backward's kernel
  // writes straight into the bucket). Handed out once per arming, and only while the leaf has
  // no .grad (autograd::AccumulateGrad::take_destination).
  std::shared_ptr<TensorImpl> grad_destination;
  bool grad_destination_armed = false;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  int64_t offset() const { return impl().offset; }
  bool is_contiguous() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype()); }

  // Typed pointer to element 0 of this view. Throws if T does not match dtype().
  template <typename T>
  T* data() const {
    check_dtype(dtype_of<T>(), "data<T>()");
    if (impl().storage->released()) throw_released();
    return static_cast<T*>(impl().storage->data()) + impl().offset;
  }
  void* raw_data() const;  // untyped pointer to element 0 of this view
  template <typename T>
  T item() const;  // the one element of a 1-element tensor
  template <typename T>
  std::vector<T> to_vector() const;  // a copy, in logical (row-major) order

  // Views without autograd: same storage, new shape/strides. Used by kernels and by ops.
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  // This tensor on `device`: itself when already there, else a contiguous copy (no autograd).
  // A copy between devices keeps the dtype and needs a contiguous source; a device without a
  // backend (tensor/device_memory.h) is an InvalidArgument saying why.
  Tensor to(Device device) const;
  // A contiguous copy when not already contiguous (no autograd; see ops for the graph version).
  Tensor contiguous_raw() const;
  Tensor clone_raw() const;
  // Shares storage; no grad_fn, requires_grad false.
  Tensor detach() const;

  // In-place, outside the graph (optimizer steps, initialisation, gradient buffers).
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // same numel; converts dtype

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool r);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& g) { impl().grad = g.impl_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  // Fires once per backward() as soon as this leaf's gradient is final (all contributions
  // summed), before the rest of backward finishes. DDP launches bucket allreduces from it.
  void register_grad_ready_hook(GradReadyHook hook);
  void backward(const Tensor& grad_output = Tensor()) const;  // [autograd] engine.cc

  // Differentiable views and shape ops. [ops]
  Tensor reshape(const Shape& shape) const;  // -1 infers one dimension
  Tensor view(const Shape& shape) const { return reshape(shape); }
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  Tensor contiguous() const;
  Tensor t() const { return transpose(0, 1); }

  std::string str() const;  // "Tensor[float32 [2, 3]]" plus up to a few values

  TensorImpl& impl() const;
  // InvalidArgument: the storage's memory was given back (Storage::release).
  [[noreturn]] static void throw_released();
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  void check_dtype(DType want, const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

// Factories. All allocate through the caching allocator.
Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor from_vector(const std::vector<float>& values, const Shape& shape);
// A contiguous CPU tensor over memory owned elsewhere; `owner` keeps it alive as long as any
// tensor views it (torch.from_blob with a deleter). No copy.
Tensor from_external(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner);
// Counts the bytes of t's storage (all of it, not just t's view) as `kind` until it is freed
// (allocator.h): for memory whose allocation site did not know what it is for, like gradients
// made by autograd. Cheap when it already is (one atomic load). External memory (from_external)
// enters the count here. No-op on an undefined tensor.
void tag_memory(const Tensor& t, MemoryKind kind);
Tensor from_vector_i64(const std::vector<int64_t>& values, const Shape& shape);
Tensor arange(int64_t n, DType dtype = DType::f32);
// Counter-based random fills (Philox): element i depends only on (seed, i).
Tensor rand(const Shape& shape, uint64_t seed);   // U[0, 1)
Tensor randn(const Shape& shape, uint64_t seed);  // N(0, 1)
Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed);

// Shape helpers shared by ops: normalise a possibly negative dim, check it is in range.
int64_t normalize_dim(int64_t d, int64_t ndim, const char* op);

// Tensors under names, in a meaningful order: a module's parameters or buffers, an optimizer's
// parameters, a safetensors file's contents. The one definition nn/, optim/ and ckpt/ share.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// How zero_grad clears gradients (nn::Module and optim::Optimizer alike): drop the buffer
// (PyTorch's default; the next backward writes a fresh one without an extra pass) or fill it
// with zeros (keeps the buffer and its identity, e.g. a DDP bucket view).
enum class ZeroGrad : uint8_t { kSetToNone, kFillZero };
// Clears the .grad of every tensor in `tensors` that has one, as `mode` says.
void zero_grads(const NamedTensors& tensors, ZeroGrad mode);

}  // namespace cohort
