#include "cohort/tensor/tensor.h"

#include <cstring>
#include <sstream>

#include "cohort/core/rng.h"
#include "cohort/core/thread_pool.h"
#include "cohort/tensor/allocator.h"
#include "cohort/tensor/device_memory.h"
#include "cohort/tensor/strided.h"

namespace cohort {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

int64_t normalize_dim(int64_t d, int64_t ndim, const char* op) {
  int64_t n = d < 0 ? d + ndim : d;
  COHORT_CHECK_ARG(n >= 0 && n < ndim, op, ": dim ", d, " out of range for a tensor with ", ndim,
                   " dimensions");
  return n;
}

namespace {

// A block for a Storage: the CPU's caching allocator, counted as `kind`, or the device's
// backend (device_memory.h), which keeps its own accounting.
void* allocate_block(Device device, size_t nbytes, size_t* rounded, MemoryKind kind) {
  if (device.is_cpu()) return CpuAllocator::instance().allocate(nbytes, rounded, kind);
  return device_memory(device).allocate(device.index, nbytes, rounded);
}

void free_block(Device device, void* p, size_t rounded, MemoryKind kind) {
  if (device.is_cpu()) return CpuAllocator::instance().deallocate(p, rounded, kind);
  device_memory(device).deallocate(device.index, p, rounded);
}

}  // namespace

Storage::Storage(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), kind_(current_memory_kind()) {
  data_ = allocate_block(device, nbytes, &rounded_, kind_);
}
Storage::Storage(void* data, size_t nbytes, std::shared_ptr<void> owner)
    : data_(data),
      nbytes_(nbytes),
      rounded_(nbytes),
      device_(Device::cpu()),
      external_(true),
      owner_(std::move(owner)),
      kind_(MemoryKind::kCount) {}

Storage::~Storage() {
  MemoryKind k = kind_.load(std::memory_order_relaxed);
  if (!external_) {
    if (data_) free_block(device_, data_, rounded_, k);
  } else if (k != MemoryKind::kCount) {
    CpuAllocator::instance().move_bytes(rounded_, k, MemoryKind::kCount);
  }
}

void Storage::set_memory_kind(MemoryKind kind) {
  if (kind_.load(std::memory_order_relaxed) == kind) return;
  MemoryKind old = kind_.exchange(kind);
  if (released()) return;         // holds no bytes now; reacquire() counts them as `kind`
  if (!device_.is_cpu()) return;  // counted by the device's backend, not by kind
  CpuAllocator::instance().move_bytes(rounded_, old, kind);
}

void tag_memory(const Tensor& t, MemoryKind kind) {
  COHORT_CHECK_ARG(kind != MemoryKind::kCount, "tag_memory: kCount is not a kind");
  if (t.defined() && t.impl().storage) t.impl().storage->set_memory_kind(kind);
}

void Storage::release() {
  COHORT_CHECK_ARG(!external_, "Storage::release: the memory is owned elsewhere");
  if (data_ == nullptr) return;
  free_block(device_, data_, rounded_, kind_.load(std::memory_order_relaxed));
  data_ = nullptr;
}

void Storage::reacquire() {
  if (data_ != nullptr || nbytes_ == 0) return;
  data_ = allocate_block(device_, nbytes_, &rounded_, kind_.load(std::memory_order_relaxed));
}

TensorImpl& Tensor::impl() const {
  COHORT_CHECK_ARG(impl_ != nullptr, "use of an undefined Tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const {
  return shape()[normalize_dim(d, dim(), "size")];
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expect) return false;
    expect *= shape()[i];
  }
  return true;
}

void Tensor::check_dtype(DType want, const char* what) const {
  COHORT_CHECK_ARG(dtype() == want, what, ": tensor has dtype ", dtype_name(dtype()), " but ",
                   dtype_name(want), " was requested");
}

void* Tensor::raw_data() const {
  if (impl().storage->released()) throw_released();
  return static_cast<char*>(impl().storage->data()) + impl().offset * dtype_size(dtype());
}

void Tensor::throw_released() {
  throw InvalidArgument(
      "a tensor's memory was released (a ZeRO-3 parameter read outside its module's forward "
      "or backward?)");
}

template <typename T>
T Tensor::item() const {
  COHORT_CHECK_ARG(numel() == 1, "item(): tensor of shape ", shape_str(shape()), " has ", numel(),
                   " elements, expected 1");
  return to_vector<T>()[0];
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = empty(shape(), dtype_of<T>());
  c.copy_(*this);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

template float Tensor::item<float>() const;
template int64_t Tensor::item<int64_t>() const;
template double Tensor::item<double>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  COHORT_INTERNAL(shape.size() == strides.size(), "as_strided rank mismatch");
  auto t = std::make_shared<TensorImpl>();
  t->storage = impl().storage;
  t->offset = offset;
  t->shape = shape;
  t->strides = strides;
  t->dtype = dtype();
  return Tensor(std::move(t));
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  Tensor out = empty(shape(), dtype(), device);
  out.copy_(contiguous_raw());  // a view is gathered on its own device first
  return out;
}

Tensor Tensor::contiguous_raw() const {
  return is_contiguous() ? detach() : clone_raw();
}

Tensor Tensor::clone_raw() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::detach() const {
  return as_strided(shape(), strides(), offset());
}

Tensor& Tensor::set_requires_grad(bool r) {
  COHORT_CHECK_ARG(!r || dtype() == DType::f32 || dtype() == DType::f64,
                   "requires_grad needs a floating-point tensor, got ", dtype_name(dtype()));
  COHORT_CHECK_ARG(is_leaf(), "set_requires_grad: only leaf tensors can change requires_grad");
  impl().requires_grad = r;
  return *this;
}

void Tensor::register_grad_ready_hook(GradReadyHook hook) {
  COHORT_CHECK_ARG(is_leaf() && requires_grad(),
                   "register_grad_ready_hook: needs a leaf tensor with requires_grad");
  impl().grad_ready_hooks.push_back(std::move(hook));
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor[undefined]";
  std::ostringstream os;
  os << "Tensor[" << dtype_name(dtype()) << " " << shape_str(shape());
  std::vector<double> v = to_vector<double>();
  os << " {";
  for (size_t i = 0; i < v.size() && i < 8; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > 8) os << ", ...";
  os << "}]";
  return os.str();
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    COHORT_CHECK_ARG(d >= 0, "empty: negative dimension in shape ", shape_str(shape));
  auto t = std::make_shared<TensorImpl>();
  t->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), device);
  t->shape = shape;
  t->strides = contiguous_strides(shape);
  t->dtype = dtype;
  return Tensor(std::move(t));
}

Tensor from_external(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner) {
  for (int64_t d : shape)
    COHORT_CHECK_ARG(d >= 0, "from_external: negative dimension in shape ", shape_str(shape));
  size_t nbytes = size_t(shape_numel(shape)) * dtype_size(dtype);
  COHORT_CHECK_ARG(data != nullptr || nbytes == 0, "from_external: null data for shape ",
                   shape_str(shape));
  auto t = std::make_shared<TensorImpl>();
  t->storage = std::make_shared<Storage>(data, nbytes, std::move(owner));
  t->shape = shape;
  t->strides = contiguous_strides(shape);
  t->dtype = dtype;
  return Tensor(std::move(t));
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.is_cpu())
    std::memset(t.raw_data(), 0, t.nbytes());
  else
    device_memory(device).zero(device.index, t.raw_data(), t.nbytes());
  return t;
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, device).fill_(1.0);
}
Tensor full(const Shape& shape, double value, DType dtype) {
  return empty(shape, dtype).fill_(value);
}
Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), t.dtype(), t.device());
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), t.dtype(), t.device());
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape) {
  COHORT_CHECK_ARG(int64_t(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
                   " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape);
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(float));
  return t;
}
Tensor from_vector_i64(const std::vector<int64_t>& values, const Shape& shape) {
  COHORT_CHECK_ARG(int64_t(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
                   " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, DType::i64);
  std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor arange(int64_t n, DType dtype) {
  Tensor f = empty({n}, DType::f64);
  double* p = f.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = double(i);
  if (dtype == DType::f64) return f;
  Tensor out = empty({n}, dtype);
  out.copy_(f);
  return out;
}

namespace {
template <typename Fn>
Tensor random_fill(const Shape& shape, Fn value_at) {
  Tensor t = empty(shape);
  float* p = t.data<float>();
  parallel_for(0, t.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] = value_at(uint64_t(i));
  });
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, uint64_t seed) {
  Philox g(seed);
  return random_fill(shape, [&](uint64_t i) { return g.uniform(i); });
}
Tensor randn(const Shape& shape, uint64_t seed) {
  Philox g(seed);
  return random_fill(shape, [&](uint64_t i) { return g.normal(i); });
}
Tensor uniform(const Shape& shape, double lo, double hi, uint64_t seed) {
  Philox g(seed);
  float a = float(lo), w = float(hi - lo);
  return random_fill(shape, [&](uint64_t i) { return a + w * g.uniform(i); });
}

void zero_grads(const NamedTensors& tensors, ZeroGrad mode) {
  for (const auto& [name, t] : tensors) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (mode == ZeroGrad::kSetToNone) {
      Tensor(t).set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

}  // namespace cohort
