// kc/core/row_source.cuh — where a row kernel's input comes from.
//
// A norm kernel reduces over a row and then rescales it. What the row *is* can differ: the input
// tensor itself, or the sum of a sublayer's output and the residual stream (which must also be
// written back as the new residual stream). Rather than one kernel per combination, row kernels
// take a RowSource:
//
//   load<N>(offset, values)    the N float values at element `offset` of the row-major input,
//                              with any side effect (storing the combined row) done once here;
//   reload<N>(offset, values)  the same values again, for kernels that stream the row twice.
//
// PlainRow reads one tensor. CombinedRow reads two, combines them element by element with a
// functor from elementwise.cuh (Add for the residual), rounds the result to T, stores it, and
// hands the rounded values on, so the norm sees exactly the residual stream that was stored (as
// HF's and vLLM's fused add + RMSNorm do).
#pragma once

#ifndef __CUDACC__
#error "kc/core/row_source.cuh holds device code: include it from .cu files compiled by nvcc"
#endif

#include <cstdint>

#include "kc/core/elementwise.cuh"
#include "kc/core/vector_io.hpp"

namespace kc::core {

template <typename T>
struct PlainRow {
  const T* x;

  template <int N>
  __device__ __forceinline__ void load(std::int64_t offset, float (&values)[N]) const {
    load_floats<T, N>(x + offset, values);
  }
  template <int N>
  __device__ __forceinline__ void reload(std::int64_t offset, float (&values)[N]) const {
    load<N>(offset, values);
  }
};

template <typename T, class Combine = Add>
struct CombinedRow {
  const T* a;
  const T* b;
  T* combined;  // receives combine(a, b), rounded to T
  Combine combine;

  template <int N>
  __device__ __forceinline__ void load(std::int64_t offset, float (&values)[N]) const {
    float a_values[N], b_values[N];
    load_floats<T, N>(a + offset, a_values);
    load_floats<T, N>(b + offset, b_values);
    Vector<T, N> rounded;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      rounded[i] = from_float<T>(combine(a_values[i], b_values[i]));
      values[i] = to_float(rounded[i]);
    }
    store_vector<T, N>(combined + offset, rounded);
  }
  // The combined row as stored: written by this same thread in load(), so no barrier is needed.
  template <int N>
  __device__ __forceinline__ void reload(std::int64_t offset, float (&values)[N]) const {
    load_floats<T, N>(combined + offset, values);
  }
};

}  // namespace kc::core
