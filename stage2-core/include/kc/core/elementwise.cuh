// kc/core/elementwise.cuh — element-wise functors, their composition, and one kernel to map them.
//
// A memory-bound element-wise kernel costs its loads and stores; the arithmetic in between is
// nearly free. So "bias + GELU" should not be a bias kernel followed by a GELU kernel (two round
// trips through DRAM), nor a hand-written bias_gelu kernel (one kernel per pair, forever).
// Instead the arithmetic is a functor on floats, functors compose, and one kernel, map(), applies
// any composition to any number of input views:
//
//   map(y, then(Add{}, GeluTanh{}), stream, x, broadcast_rows(bias, rows, cols))  // gelu(x + b)
//   map(y, on_first(Silu{}, Mul{}), stream, column_slice(in, 0, h), column_slice(in, h, h))  // SwiGLU
//
// Views carry strides, so broadcasting (stride 0) and slicing cost nothing. map() uses 16-byte
// accesses when every view allows them (see vector_io.hpp) and scalar accesses otherwise.
//
// Activations return the limits at +-inf (relu, silu, gelu: +inf -> +inf, -inf -> 0) instead of
// the NaN that evaluating x * sigmoid(x) at -inf would give; NaN stays NaN.
#pragma once

#ifndef __CUDACC__
#error "kc/core/elementwise.cuh holds device code: include it from .cu files compiled by nvcc"
#endif

#include <cuda_runtime.h>

#include <math_constants.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/core/gelu.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/tensor_view.hpp"
#include "kc/core/vector_io.hpp"

namespace kc::core {

// ---- unary functors: float -> float ------------------------------------------------------------

struct Scale {
  float factor = 1.f;
  __device__ __forceinline__ float operator()(float x) const { return factor * x; }
};

struct Relu {
  // Not fmaxf(x, 0): that would turn NaN into 0.
  __device__ __forceinline__ float operator()(float x) const { return x < 0.f ? 0.f : x; }
};

// -inf has the limit 0 for every activation here; the formulas would give -inf * 0 = NaN.
__device__ __forceinline__ float zero_at_minus_infinity(float x, float value) {
  return x == -CUDART_INF_F ? 0.f : value;
}

// silu(x) = x / (1 + e^-x), with the exponential as 2^(-x log2 e) on the MUFU unit and the
// approximate division (MUFU.RCP and a multiply, KernelMath in kc/core/gelu.hpp): about six
// instructions. With __expf and an IEEE division (`/`: a dozen instructions plus a slow-path
// branch) instead, stage 2's silu rung 02 (bf16, eight elements per thread) was 360 SASS
// instructions long on sm_90a; with this it is 136. For x < -88, e^-x overflows to inf and the
// division returns -0, the limit.
struct Silu {
  __device__ __forceinline__ float operator()(float x) const {
    const float e = KernelMath::exp_base(-x * KernelMath::kLogBaseOfE);
    return zero_at_minus_infinity(x, KernelMath::divide(x, 1.f + e));
  }
};

// GELU, tanh form (GPT-2, "gelu_pytorch_tanh"): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// evaluated as x / (1 + exp(-2u)), the same function without the cancellation of 1 + tanh(u) for
// negative x. The formula, shared with the references and stage 3, is in kc/core/gelu.hpp.
struct GeluTanh {
  __device__ __forceinline__ float operator()(float x) const {
    return zero_at_minus_infinity(x, gelu_tanh<KernelMath>(x));
  }
};

// GELU, exact form: x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), as max(x, 0) - |x| Phi(-|x|) with
// the tail Phi(-|x|) from KernelMath::normal_tail (kc/core/gelu.hpp: no cancellation for negative
// x, no erfcf). Beyond |x| = 14 the tail term is 0 in float; gelu_erf clamps |x| there, which
// also gives the limits at +-inf instead of inf * 0 = NaN.
struct GeluErf {
  __device__ __forceinline__ float operator()(float x) const { return gelu_erf<KernelMath>(x); }
};

// ---- binary functors: (float, float) -> float --------------------------------------------------

struct Add {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

struct Mul {
  __device__ __forceinline__ float operator()(float a, float b) const { return a * b; }
};

// ---- composition -------------------------------------------------------------------------------

// outer(inner(x...)): e.g. compose(Relu{}, Scale{2}) is relu(2x).
template <class Outer, class Inner>
struct Compose {
  Outer outer;
  Inner inner;
  template <typename... Args>
  __device__ __forceinline__ float operator()(Args... args) const {
    return outer(inner(args...));
  }
};

// then(Add{}, GeluTanh{}): gelu(a + b) — an n-ary functor followed by a unary one.
template <class First, class Next>
__host__ __device__ Compose<Next, First> then(First first, Next next) {
  return {next, first};
}

template <class Outer, class Inner>
__host__ __device__ Compose<Outer, Inner> compose(Outer outer, Inner inner) {
  return {outer, inner};
}

// on_first(Silu{}, Mul{}): silu(a) * b — a unary functor applied to the first operand only.
template <class Unary, class Binary>
struct OnFirst {
  Unary unary;
  Binary binary;
  __device__ __forceinline__ float operator()(float a, float b) const { return binary(unary(a), b); }
};

template <class Unary, class Binary>
__host__ __device__ OnFirst<Unary, Binary> on_first(Unary unary, Binary binary) {
  return {unary, binary};
}

// ---- map: y[r][c] = op(inputs[r][c]...) ---------------------------------------------------------

inline constexpr int kMapThreads = 256;
inline constexpr std::int64_t kMaxGridY = 65535;
// Rows each thread walks (when the grid stays large enough): the set-up that places a thread (its
// column, bounds checks, the views' parameters: 27 SASS instructions before the row loop in the
// bf16 bias + GELU-erf kernel on sm_90a) is paid once for several rows.
inline constexpr std::int64_t kMapRowsPerThread = 4;
// ...but never fewer than this many rows of blocks, so a small matrix still fills the GPU.
inline constexpr std::int64_t kMapMinGridY = 1024;

namespace detail {

template <typename T, int kVec>
struct FloatVector {
  float values[kVec];
};

template <class Op, typename T, int kVec, std::size_t... I>
__device__ __forceinline__ float apply_at(const Op& op, const FloatVector<T, kVec> (&loaded)[sizeof...(I)],
                                          int i, std::index_sequence<I...>) {
  return op(loaded[I].values[i]...);
}

template <typename T, int kVec, class Op, std::size_t kInputs>
__device__ __forceinline__ void map_row(const Op& op, const T* const (&input_at)[kInputs], T* out_at) {
  FloatVector<T, kVec> loaded[kInputs];
#pragma unroll
  for (std::size_t input = 0; input < kInputs; ++input) load_floats<T, kVec>(input_at[input], loaded[input].values);
  float result[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) result[i] = apply_at(op, loaded, i, std::make_index_sequence<kInputs>{});
  store_floats<T, kVec>(out_at, result);
}

}  // namespace detail

// Each thread handles kVec adjacent columns and walks the rows blockIdx.y, blockIdx.y +
// gridDim.y, ... (kMapRowsPerThread of them on large matrices). kVec > 1 requires every view to
// pass can_vectorize(view, kVec). When the grid covers every row (a vector is one row), a thread
// computes its addresses and maps one row; when it walks rows, its addresses advance by a row
// step (one 64-bit add per view) instead of being recomputed from (row, col) and the strides —
// the walk's set-up costs a dozen instructions, which a thread mapping one row would pay for
// nothing (stage 2's scalar rungs map one element per thread: the measurements are in
// docs/notes/2026-12-01-stage2-activations.md).
template <typename T, int kVec, class Op, class... Inputs>
__global__ void __launch_bounds__(kMapThreads)
    map_kernel(MatrixView<T> out, Op op, Inputs... inputs) {
  constexpr std::size_t kInputs = sizeof...(Inputs);
  const std::int64_t col =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (col >= out.shape[1]) return;
  const std::int64_t first_row = blockIdx.y;
  if (first_row >= out.shape[0]) return;
  const T* input_at[kInputs] = {(inputs.data + inputs.offset(first_row, col))...};
  T* out_at = out.data + out.offset(first_row, col);
  if (gridDim.y >= out.shape[0]) {  // one row per thread (uniform across the grid)
    detail::map_row<T, kVec>(op, input_at, out_at);
    return;
  }
  const std::int64_t input_step[kInputs] = {(inputs.stride[0] * gridDim.y)...};
  const std::int64_t out_step = out.stride[0] * gridDim.y;
  for (std::int64_t row = first_row; row < out.shape[0]; row += gridDim.y) {
    detail::map_row<T, kVec>(op, input_at, out_at);
#pragma unroll
    for (std::size_t input = 0; input < kInputs; ++input) input_at[input] += input_step[input];
    out_at += out_step;
  }
}

template <typename T, int kVec, class Op, class... Inputs>
void launch_map_with_width(const MatrixView<T>& out, Op op, cudaStream_t stream,
                           const Inputs&... inputs) {
  const std::int64_t threads_per_row = ceil_div(out.shape[1], kVec);
  const std::int64_t rows = out.shape[0];
  const std::int64_t grid_y = std::min(
      {rows, kMaxGridY, std::max(ceil_div(rows, kMapRowsPerThread), kMapMinGridY)});
  const dim3 grid(static_cast<unsigned>(ceil_div(threads_per_row, kMapThreads)),
                  static_cast<unsigned>(grid_y));
  map_kernel<T, kVec><<<grid, kMapThreads, 0, stream>>>(out, op, inputs...);
}

namespace detail {
template <typename T, class... Inputs>
bool check_map_shapes(const MatrixView<T>& out, const Inputs&... inputs) {
  static_assert(sizeof...(Inputs) >= 1, "map needs at least one input");
  const bool shapes_match =
      ((inputs.shape[0] == out.shape[0] && inputs.shape[1] == out.shape[1]) && ...);
  require(shapes_match, "map: every input must have the output's shape {}x{} (broadcast with a "
          "stride-0 view)", out.shape[0], out.shape[1]);
  return out.shape[0] > 0 && out.shape[1] > 0;
}
}  // namespace detail

// out = op(inputs...), element by element; every input has out's shape (broadcast with stride
// 0). 16-byte accesses when every view allows them, scalar accesses otherwise.
template <typename T, class Op, class... Inputs>
void map(const MatrixView<T>& out, Op op, cudaStream_t stream, const Inputs&... inputs) {
  if (!detail::check_map_shapes(out, inputs...)) return;
  constexpr int kWidth = kVectorWidth<T>;
  if (can_vectorize(out, kWidth) && (can_vectorize(inputs, kWidth) && ...))
    launch_map_with_width<T, kWidth>(out, op, stream, inputs...);
  else
    launch_map_with_width<T, 1>(out, op, stream, inputs...);
}

// map() with scalar accesses only.
template <typename T, class Op, class... Inputs>
void map_scalar(const MatrixView<T>& out, Op op, cudaStream_t stream, const Inputs&... inputs) {
  if (detail::check_map_shapes(out, inputs...)) launch_map_with_width<T, 1>(out, op, stream, inputs...);
}

}  // namespace kc::core
