// kc/common/dtype.hpp — the element types kc kernels read and write.
//
// A DType names a storage format. The harness uses it to size buffers, fill them with random
// values, poison outputs, read results back as double and pick a tolerance. Kernels use the
// C++ types themselves (float, __half, __nv_bfloat16, __nv_fp8_e4m3, int8_t).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kc {

enum class DType {
  f64,     // reference results only
  f32,
  tf32,    // stored as f32; names the precision of tensor-core FP32 math, for tolerances
  f16,
  bf16,
  f8e4m3,
  f8e5m2,
  i32,
  i8,
  i4,      // two values per byte, low nibble first
};

// Short lower-case name used in kernel ids, tables and JSON: "f32", "bf16", ...
std::string_view dtype_name(DType t);
// Inverse of dtype_name; throws kc::Error naming the accepted spellings.
DType parse_dtype(std::string_view name);
// Storage bits per element (4 for i4).
int dtype_bits(DType t);
// Bytes needed for `count` elements (i4 rounds up to whole bytes).
std::size_t dtype_bytes(DType t, std::size_t count);
bool dtype_is_float(DType t);
// The largest relative error of one rounding to `t` (round to nearest): 2^-8 for bf16, 2^-11 for
// f16, 2^-24 for f32 and tf32's f32 storage, 2^-53 for f64, 2^-4 for f8e4m3, 2^-3 for f8e5m2;
// 0 for the integer types, which do not round.
double unit_roundoff(DType t);
// Half the spacing of `t`'s subnormal numbers: the absolute rounding error of values that small
// (f16: 2^-25); 0 for the integer types.
double subnormal_half_spacing(DType t);

template <typename T> struct dtype_of;
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<__half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<__nv_bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<__nv_fp8_e4m3> { static constexpr DType value = DType::f8e4m3; };
template <> struct dtype_of<__nv_fp8_e5m2> { static constexpr DType value = DType::f8e5m2; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::i8; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace kc
