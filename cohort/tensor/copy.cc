// Tensor::copy_ and Tensor::fill_: strided, with dtype conversion.
#include <array>
#include <cstring>
#include <tuple>

#include "cohort/tensor/device_memory.h"
#include "cohort/tensor/strided.h"

namespace cohort {
namespace {

template <typename D, typename S>
void copy_typed(const Tensor& dst, const Tensor& src) {
  D* d = static_cast<D*>(dst.raw_data());
  const S* s = static_cast<const S*>(src.raw_data());
  // src is viewed with dst's shape: same numel, walked in row-major order.
  Tensor sv = src.is_contiguous()
                  ? src.as_strided(dst.shape(), contiguous_strides(dst.shape()), src.offset())
                  : src;
  if (dst.shape() == sv.shape()) {
    for_each_offset<2>(dst.shape(), {&dst.strides(), &sv.strides()},
                       [&](int64_t a, int64_t b) { d[a] = D(float(s[b])); });
    return;
  }
  // Different shapes, same numel, src not contiguous: go through a contiguous copy of src.
  Tensor c = src.clone_raw();
  copy_typed<D, S>(dst, c);
}

// float(...) above loses precision for f64/i64 pairs; those go through double instead.
template <typename D, typename S>
void copy_wide(const Tensor& dst, const Tensor& src) {
  D* d = static_cast<D*>(dst.raw_data());
  const S* s = static_cast<const S*>(src.raw_data());
  Tensor sv = src.is_contiguous()
                  ? src.as_strided(dst.shape(), contiguous_strides(dst.shape()), src.offset())
                  : src;
  if (dst.shape() == sv.shape()) {
    for_each_offset<2>(dst.shape(), {&dst.strides(), &sv.strides()},
                       [&](int64_t a, int64_t b) { d[a] = D(double(s[b])); });
    return;
  }
  // Different shapes, same numel, src not contiguous: through a contiguous copy of src (made
  // by the same-shape path above; clone_raw would come back here and recurse forever).
  Tensor c = empty(src.shape(), src.dtype());
  copy_wide<S, S>(c, src);
  copy_wide<D, S>(dst, c);
}

template <typename T>
constexpr bool kWide =
    std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>;

// dst <- src on one device, at least one of them a view: the device gathers a strided source
// (Tensor::contiguous of a transpose) or scatters into a strided destination (a slice's
// backward); two views go through a contiguous copy of the source.
void copy_views_on_device(const Tensor& dst, const Tensor& src) {
  const Device d = dst.device();
  DeviceMemory& m = device_memory(d);
  if (src.is_contiguous() && dst.is_contiguous())
    return m.copy(dst.raw_data(), d, src.raw_data(), d, dst.nbytes());
  const size_t item = dtype_size(src.dtype());
  if (!src.is_contiguous() && !dst.is_contiguous()) {
    Tensor packed = empty(src.shape(), src.dtype(), d);
    m.copy_view(d.index, DeviceMemory::View::kSource, packed.raw_data(), src.raw_data(),
                src.shape(), src.strides(), item);
    return copy_views_on_device(dst, packed);
  }
  if (!src.is_contiguous())
    return m.copy_view(d.index, DeviceMemory::View::kSource, dst.raw_data(), src.raw_data(),
                       src.shape(), src.strides(), item);
  m.copy_view(d.index, DeviceMemory::View::kDestination, dst.raw_data(), src.raw_data(),
              dst.shape(), dst.strides(), item);
}

// A copy with a device other than the CPU on either side, keeping the dtype. On one device a
// view is gathered or scattered there; between devices the bytes move contiguous, so a view on
// either side is packed on its own device first (a copy there), then placed.
void copy_across_devices(const Tensor& dst, const Tensor& src) {
  COHORT_CHECK_ARG(dst.dtype() == src.dtype(), "copy_: from ", dtype_name(src.dtype()), " on ",
                   src.device().str(), " to ", dtype_name(dst.dtype()), " on ", dst.device().str(),
                   ": a copy between devices keeps the dtype (convert on one side first)");
  if (dst.device() == src.device()) return copy_views_on_device(dst, src);
  const Tensor packed = src.is_contiguous() ? src : src.clone_raw();
  if (!dst.is_contiguous()) {
    Tensor landed = empty(src.shape(), src.dtype(), dst.device());
    copy_across_devices(landed, packed);
    Tensor(dst).copy_(landed);  // a view on dst's own device (or a strided host copy)
    return;
  }
  const Device device = dst.device().is_cpu() ? src.device() : dst.device();
  device_memory(device).copy(dst.raw_data(), dst.device(), packed.raw_data(), packed.device(),
                             dst.nbytes());
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  COHORT_CHECK_ARG(src.numel() == numel(), "copy_: source has ", src.numel(), " elements (shape ",
                   shape_str(src.shape()), "), destination has ", numel(), " (shape ",
                   shape_str(shape()), ")");
  if (numel() == 0) return *this;
  if (!device().is_cpu() || !src.device().is_cpu()) {
    copy_across_devices(*this, src);
    return *this;
  }
  if (dtype() == src.dtype() && is_contiguous() && src.is_contiguous()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
    return *this;
  }
  COHORT_DISPATCH(dtype(), D, {COHORT_DISPATCH(src.dtype(), S, {
                    if constexpr (kWide<D> || kWide<S>) {
                      if constexpr (!std::is_same_v<D, Float16> && !std::is_same_v<D, BFloat16> &&
                                    !std::is_same_v<S, Float16> && !std::is_same_v<S, BFloat16>)
                        copy_wide<D, S>(*this, src);
                      else
                        copy_typed<D, S>(*this, src);
                    } else {
                      copy_typed<D, S>(*this, src);
                    }
                  })})
  return *this;
}

Tensor& Tensor::fill_(double value) {
  if (!device().is_cpu()) {  // filled on the host, then copied (initialisation, not a hot path)
    Tensor host = empty(shape(), dtype());
    host.fill_(value);
    return copy_(host);
  }
  COHORT_DISPATCH(dtype(), T, {
    T v = T(value);
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) v = T(float(value));
    T* p = static_cast<T*>(raw_data());
    for_each_offset<1>(shape(), {&strides()}, [&](int64_t a) { p[a] = v; });
  })
  return *this;
}

}  // namespace cohort
