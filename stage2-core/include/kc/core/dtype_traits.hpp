// kc/core/dtype_traits.hpp — one way to turn every stored element type into float and back.
//
// Kernels in kc::core are written once for a storage type T and do their arithmetic in float:
// load T, widen to float, compute, round back to T on the store. DTypeTraits<T> says how, so a
// kernel never spells __bfloat162float or __float2half_rn itself and a new type (fp8) needs one
// specialisation, not a new kernel. Conversions round to nearest even, as PyTorch does.
//
// Host-safe: the functions are __host__ __device__, so CPU tests and references can use them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kc/common/dtype.hpp"

namespace kc::core {

template <typename T>
struct DTypeTraits;

template <>
struct DTypeTraits<float> {
  static constexpr DType dtype = DType::f32;
  static __host__ __device__ __forceinline__ float to_float(float x) { return x; }
  static __host__ __device__ __forceinline__ float from_float(float x) { return x; }
};

template <>
struct DTypeTraits<__half> {
  static constexpr DType dtype = DType::f16;
  static __host__ __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __host__ __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};

template <>
struct DTypeTraits<__nv_bfloat16> {
  static constexpr DType dtype = DType::bf16;
  static __host__ __device__ __forceinline__ float to_float(__nv_bfloat16 x) {
    return __bfloat162float(x);
  }
  static __host__ __device__ __forceinline__ __nv_bfloat16 from_float(float x) {
    return __float2bfloat16_rn(x);
  }
};

// fp8 is storage only: the same float arithmetic, a coarser round trip (saturating to the largest
// finite e4m3 value, as the cuda_fp8 constructor does).
template <>
struct DTypeTraits<__nv_fp8_e4m3> {
  static constexpr DType dtype = DType::f8e4m3;
  static __host__ __device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) {
    return static_cast<float>(x);
  }
  static __host__ __device__ __forceinline__ __nv_fp8_e4m3 from_float(float x) {
    return __nv_fp8_e4m3(x);
  }
};

template <typename T>
__host__ __device__ __forceinline__ float to_float(T x) {
  return DTypeTraits<T>::to_float(x);
}

template <typename T>
__host__ __device__ __forceinline__ T from_float(float x) {
  return DTypeTraits<T>::from_float(x);
}

}  // namespace kc::core
