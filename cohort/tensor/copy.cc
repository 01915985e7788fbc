// Tensor::copy_ and Tensor::fill_: strided, with dtype conversion.
#include <array>
#include <cstring>
#include <tuple>

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

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  COHORT_CHECK_ARG(src.numel() == numel(), "copy_: source has ", src.numel(), " elements (shape ",
                   shape_str(src.shape()), "), destination has ", numel(), " (shape ",
                   shape_str(shape()), ")");
  if (numel() == 0) return *this;
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
  COHORT_DISPATCH(dtype(), T, {
    T v = T(value);
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) v = T(float(value));
    T* p = static_cast<T*>(raw_data());
    for_each_offset<1>(shape(), {&strides()}, [&](int64_t a) { p[a] = v; });
  })
  return *this;
}

}  // namespace cohort
