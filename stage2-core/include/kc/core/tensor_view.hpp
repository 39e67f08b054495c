// kc/core/tensor_view.hpp — a non-owning view of a strided tensor: pointer, shape, strides, dtype.
//
// Memory is owned elsewhere (a kc::Tensor, a DeviceBuffer, a model's weight arena); a view only
// says how to index it, so it is cheap to copy into a kernel's arguments. Strides are in elements
// and may be 0 (broadcast: every row of a bias "matrix" is the same vector) or larger than the
// row length (a slice of columns, such as the gate half of a fused [gate | up] projection).
// The element type T carries the dtype; `const T` views are read-only.
//
// Host-safe: the member functions are __host__ __device__; view_of() checks a kc::Tensor's dtype
// and rank on the host and throws kc::Error with the reason.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kc/common/error.hpp"
#include "kc/common/problem.hpp"
#include "kc/core/dtype_traits.hpp"

namespace kc::core {

template <typename T, int kRank>
struct TensorView {
  static_assert(kRank >= 1 && kRank <= 4, "kc::core views have rank 1 to 4");
  using Element = std::remove_const_t<T>;
  static constexpr int rank = kRank;
  static constexpr DType dtype = DTypeTraits<Element>::dtype;

  T* data = nullptr;
  std::int64_t shape[kRank] = {};
  std::int64_t stride[kRank] = {};  // in elements, not bytes

  __host__ __device__ std::int64_t size(int dim) const { return shape[dim]; }

  __host__ __device__ std::int64_t numel() const {
    std::int64_t count = 1;
    for (int d = 0; d < kRank; ++d) count *= shape[d];
    return count;
  }

  // Row-major and dense: the last stride is 1 and each stride is the product of the sizes after it.
  __host__ __device__ bool is_contiguous() const {
    std::int64_t expected = 1;
    for (int d = kRank - 1; d >= 0; --d) {
      if (shape[d] != 1 && stride[d] != expected) return false;
      expected *= shape[d];
    }
    return true;
  }

  template <typename... Index>
  __host__ __device__ std::int64_t offset(Index... index) const {
    static_assert(sizeof...(Index) == kRank, "one index per dimension");
    const std::int64_t indices[kRank] = {static_cast<std::int64_t>(index)...};
    std::int64_t result = 0;
    for (int d = 0; d < kRank; ++d) result += indices[d] * stride[d];
    return result;
  }

  template <typename... Index>
  __host__ __device__ T& operator()(Index... index) const {
    return data[offset(index...)];
  }

  __host__ __device__ TensorView<const Element, kRank> as_const() const {
    TensorView<const Element, kRank> view;
    view.data = data;
    for (int d = 0; d < kRank; ++d) {
      view.shape[d] = shape[d];
      view.stride[d] = stride[d];
    }
    return view;
  }
};

template <typename T>
using MatrixView = TensorView<T, 2>;

// A dense row-major view of `data` with the given sizes.
template <typename T, typename... Size>
__host__ __device__ TensorView<T, static_cast<int>(sizeof...(Size))> contiguous_view(T* data,
                                                                                     Size... sizes) {
  constexpr int kRank = static_cast<int>(sizeof...(Size));
  TensorView<T, kRank> view;
  view.data = data;
  const std::int64_t shape[kRank] = {static_cast<std::int64_t>(sizes)...};
  std::int64_t stride = 1;
  for (int d = kRank - 1; d >= 0; --d) {
    view.shape[d] = shape[d];
    view.stride[d] = stride;
    stride *= shape[d];
  }
  return view;
}

// Columns [begin, begin + count) of a matrix: same rows and strides, a narrower window.
template <typename T>
__host__ __device__ MatrixView<T> column_slice(const MatrixView<T>& matrix, std::int64_t begin,
                                               std::int64_t count) {
  MatrixView<T> view = matrix;
  view.data = matrix.data + begin * matrix.stride[1];
  view.shape[1] = count;
  return view;
}

// A `rows` x `cols` matrix whose every row is the same `cols`-long vector (row stride 0): how a
// bias or a norm weight meets a batch of rows without being copied.
template <typename T>
__host__ __device__ MatrixView<T> broadcast_rows(T* vector, std::int64_t rows, std::int64_t cols) {
  MatrixView<T> view;
  view.data = vector;
  view.shape[0] = rows;
  view.shape[1] = cols;
  view.stride[0] = 0;
  view.stride[1] = 1;
  return view;
}

// A dense view of a harness tensor, after checking that its dtype and rank are what the kernel
// expects.
template <typename T, int kRank>
TensorView<T, kRank> view_of(Tensor& tensor) {
  using Element = std::remove_const_t<T>;
  require(tensor.dtype == DTypeTraits<Element>::dtype,
          "tensor '{}' holds {} but the kernel reads it as {}", tensor.name,
          dtype_name(tensor.dtype), dtype_name(DTypeTraits<Element>::dtype));
  require(static_cast<int>(tensor.shape.size()) == kRank,
          "tensor '{}' has rank {} but the kernel views it with rank {}", tensor.name,
          tensor.shape.size(), kRank);
  TensorView<T, kRank> view;
  view.data = reinterpret_cast<T*>(tensor.raw());
  std::int64_t stride = 1;
  for (int d = kRank - 1; d >= 0; --d) {
    view.shape[d] = tensor.shape[d];
    view.stride[d] = stride;
    stride *= tensor.shape[d];
  }
  return view;
}

}  // namespace kc::core
