#include "kc/engine/dequantize.hpp"

#include <cstring>

#include "kc/common/dtype.hpp"
#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"

namespace kc::engine {

namespace {

std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Block sizes, from ggml's block_q8_0, block_q4_0 and block_q4_1.
constexpr std::size_t kBlock = 32;
constexpr std::size_t kQ8_0Bytes = 2 + kBlock;
constexpr std::size_t kQ4_0Bytes = 2 + kBlock / 2;
constexpr std::size_t kQ4_1Bytes = 2 + 2 + kBlock / 2;

void dequantize_q8_0(const std::byte* src, float* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, src += kQ8_0Bytes, dst += kBlock) {
    const float d = half_to_float(load_u16(src));
    const std::byte* q = src + 2;
    for (std::size_t i = 0; i < kBlock; ++i)
      dst[i] = d * static_cast<float>(static_cast<std::int8_t>(q[i]));
  }
}

// One block of 4-bit codes: element j from the low nibble of qs[j], element j + 16 from its high
// nibble. q4_0 passes code_offset -8 (codes 0..15 stand for -8..7) and m 0; q4_1 passes
// code_offset 0 and its minimum m.
void dequantize_nibbles(const std::byte* qs, float d, float code_offset, float m, float* dst) {
  for (std::size_t j = 0; j < kBlock / 2; ++j) {
    const auto byte = std::to_integer<unsigned>(qs[j]);
    dst[j] = d * (static_cast<float>(byte & 0x0Fu) + code_offset) + m;
    dst[j + kBlock / 2] = d * (static_cast<float>(byte >> 4) + code_offset) + m;
  }
}

void dequantize_q4_0(const std::byte* src, float* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, src += kQ4_0Bytes, dst += kBlock)
    dequantize_nibbles(src + 2, half_to_float(load_u16(src)), -8.0f, 0.0f, dst);
}

void dequantize_q4_1(const std::byte* src, float* dst, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b, src += kQ4_1Bytes, dst += kBlock)
    dequantize_nibbles(src + 4, half_to_float(load_u16(src)), 0.0f,
                       half_to_float(load_u16(src + 2)), dst);
}

}  // namespace

float half_to_float(std::uint16_t bits) {
  return static_cast<float>(
      decode_element(reinterpret_cast<const std::byte*>(&bits), DType::f16, 0));
}

float bfloat16_to_float(std::uint16_t bits) {
  return static_cast<float>(
      decode_element(reinterpret_cast<const std::byte*>(&bits), DType::bf16, 0));
}

bool can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::bf16:
    case GgmlType::q8_0:
    case GgmlType::q4_0:
    case GgmlType::q4_1: return true;
    default: return false;
  }
}

void dequantize(GgmlType type, ByteView src, float* dst, std::size_t count) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  require(can_dequantize(type),
          "cannot dequantize tensors of type {}: the CPU reference handles f32, f16, bf16, q8_0, "
          "q4_0 and q4_1",
          info.name);
  const std::uint64_t expected = ggml_storage_bytes(type, count);
  require(src.size == expected, "{} values of type {} take {} bytes, but {} were given", count,
          info.name, expected, src.size);
  const std::size_t blocks = count / info.block_elements;
  switch (type) {
    case GgmlType::f32:
      if (count > 0) std::memcpy(dst, src.data, count * sizeof(float));
      break;
    case GgmlType::f16:
      for (std::size_t i = 0; i < count; ++i) dst[i] = half_to_float(load_u16(src.data + 2 * i));
      break;
    case GgmlType::bf16:
      for (std::size_t i = 0; i < count; ++i)
        dst[i] = bfloat16_to_float(load_u16(src.data + 2 * i));
      break;
    case GgmlType::q8_0: dequantize_q8_0(src.data, dst, blocks); break;
    case GgmlType::q4_0: dequantize_q4_0(src.data, dst, blocks); break;
    case GgmlType::q4_1: dequantize_q4_1(src.data, dst, blocks); break;
    default: break;  // refused above
  }
}

std::vector<float> dequantize(GgmlType type, ByteView src, std::size_t count) {
  std::vector<float> values(count);
  dequantize(type, src, values.data(), count);
  return values;
}

}  // namespace kc::engine
