// row_reduction.cuh — what each row reduction computes, as types the kernels are templated on:
// the value each element contributes (x or x^2), how values combine (sum or NaN-propagating max),
// and the final step (divide by the row length for the mean).
#pragma once

#include <type_traits>

#include "kc/core/reduce.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

template <RowReduction kKind>
struct RowReductionTraits {
  using Combine = std::conditional_t<kKind == RowReduction::max, core::MaxOp, core::SumOp>;
  __device__ __forceinline__ static float contribution(float x) {
    return kKind == RowReduction::sum_squares ? x * x : x;
  }
  __device__ __forceinline__ static float finish(float total, int cols) {
    return kKind == RowReduction::mean ? total / cols : total;
  }
};

// Calls launch(kind) with a std::integral_constant for the run-time reduction kind.
template <class Launch>
void dispatch_reduction(RowReduction kind, const Launch& launch) {
  switch (kind) {
    case RowReduction::sum: launch(std::integral_constant<RowReduction, RowReduction::sum>{}); break;
    case RowReduction::max: launch(std::integral_constant<RowReduction, RowReduction::max>{}); break;
    case RowReduction::mean: launch(std::integral_constant<RowReduction, RowReduction::mean>{}); break;
    case RowReduction::sum_squares:
      launch(std::integral_constant<RowReduction, RowReduction::sum_squares>{});
      break;
  }
}

}  // namespace kc::stage2
