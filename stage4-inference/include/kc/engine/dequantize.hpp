// kc/engine/dequantize.hpp — ggml tensor bytes to float, on the CPU.
//
// The reference the engine's GPU dequantization will be checked against. The block layouts are
// ggml's, byte for byte (little-endian, packed, no padding); d and m are IEEE half precision:
//
//   type   block  bytes  layout                                value of element i (0..31)
//   q8_0   32     34     f16 d, int8 q[32]                     d * q[i]
//   q4_0   32     18     f16 d, uint8 qs[16]                   d * (nibble(i) - 8)
//   q4_1   32     20     f16 d, f16 m, uint8 qs[16]            d * nibble(i) + m
//
// Nibble order (q4_0, q4_1): element j < 16 is the LOW nibble of qs[j], element j + 16 the HIGH
// nibble of the same byte — the first half of the block in the low nibbles, the second half in
// the high ones, not neighbours sharing a byte.
// f32, f16 and bf16 (the upper 16 bits of an f32) are one value per "block".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kc/engine/ggml_types.hpp"
#include "kc/engine/mapped_file.hpp"

namespace kc::engine {

// Whether dequantize() handles `type`: f32, f16, bf16, q8_0, q4_0, q4_1.
bool can_dequantize(GgmlType type);

// Writes the `count` values stored in `src` as `type` to dst[0..count). Throws kc::Error when
// the engine cannot dequantize `type`, when `count` is not a whole number of blocks, or when
// `src` does not hold exactly the bytes of `count` values.
void dequantize(GgmlType type, ByteView src, float* dst, std::size_t count);
std::vector<float> dequantize(GgmlType type, ByteView src, std::size_t count);

// One half-precision value (IEEE binary16) or bfloat16 value from its bits.
float half_to_float(std::uint16_t bits);
float bfloat16_to_float(std::uint16_t bits);

}  // namespace kc::engine
