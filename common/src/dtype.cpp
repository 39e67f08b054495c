#include "kc/common/dtype.hpp"

#include <array>
#include <cmath>
#include <utility>

#include "kc/common/error.hpp"

namespace kc {
namespace {
constexpr std::array<std::pair<DType, std::string_view>, 10> kNames{{
    {DType::f64, "f64"},
    {DType::f32, "f32"},
    {DType::tf32, "tf32"},
    {DType::f16, "f16"},
    {DType::bf16, "bf16"},
    {DType::f8e4m3, "f8e4m3"},
    {DType::f8e5m2, "f8e5m2"},
    {DType::i32, "i32"},
    {DType::i8, "i8"},
    {DType::i4, "i4"},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& [type, name] : kNames)
    if (type == t) return name;
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  for (const auto& [type, spelling] : kNames)
    if (spelling == name) return type;
  throw Error(fmt::format(
      "unknown dtype '{}': use one of f64, f32, tf32, f16, bf16, f8e4m3, f8e5m2, i32, i8, i4",
      name));
}

int dtype_bits(DType t) {
  switch (t) {
    case DType::f64: return 64;
    case DType::f32:
    case DType::tf32:
    case DType::i32: return 32;
    case DType::f16:
    case DType::bf16: return 16;
    case DType::f8e4m3:
    case DType::f8e5m2:
    case DType::i8: return 8;
    case DType::i4: return 4;
  }
  return 0;
}

std::size_t dtype_bytes(DType t, std::size_t count) {
  return (count * static_cast<std::size_t>(dtype_bits(t)) + 7) / 8;
}

bool dtype_is_float(DType t) {
  return t != DType::i32 && t != DType::i8 && t != DType::i4;
}

double unit_roundoff(DType t) {
  switch (t) {
    case DType::f64: return std::ldexp(1.0, -53);
    case DType::f32:
    case DType::tf32: return std::ldexp(1.0, -24);
    case DType::f16: return std::ldexp(1.0, -11);
    case DType::bf16: return std::ldexp(1.0, -8);
    case DType::f8e4m3: return std::ldexp(1.0, -4);
    case DType::f8e5m2: return std::ldexp(1.0, -3);
    case DType::i32:
    case DType::i8:
    case DType::i4: return 0.0;
  }
  return 0.0;
}

double subnormal_half_spacing(DType t) {
  // The spacing of subnormals is 2^(emin - mantissa bits).
  switch (t) {
    case DType::f64: return std::ldexp(1.0, -1075);
    case DType::f32:
    case DType::tf32: return std::ldexp(1.0, -150);
    case DType::f16: return std::ldexp(1.0, -25);
    case DType::bf16: return std::ldexp(1.0, -134);
    case DType::f8e4m3: return std::ldexp(1.0, -10);
    case DType::f8e5m2: return std::ldexp(1.0, -17);
    case DType::i32:
    case DType::i8:
    case DType::i4: return 0.0;
  }
  return 0.0;
}

}  // namespace kc
