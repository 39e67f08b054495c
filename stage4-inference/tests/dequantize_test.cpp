// CPU dequantization against blocks built by hand, whose values are worked out in the comments,
// and round trips through small reference quantizers written here from ggml's definitions.
#include "kc/engine/dequantize.hpp"

#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "support/test_files.hpp"

namespace kc::engine {
namespace {

using test_support::contains_all;
using test_support::error_of;

// Block builders: the bytes exactly as ggml lays them out.
void put_u16(std::vector<std::byte>& out, std::uint16_t v) {
  out.push_back(static_cast<std::byte>(v & 0xFF));
  out.push_back(static_cast<std::byte>(v >> 8));
}

ByteView view(const std::vector<std::byte>& bytes) { return {bytes.data(), bytes.size()}; }

// Half-precision bits of a float, rounded to nearest even (cuda_fp16.h, host side).
std::uint16_t half_bits(float value) {
  const __half h = __float2half_rn(value);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

TEST(Dequantize, HalfAndBfloat16Bits) {
  EXPECT_EQ(half_to_float(0x3C00), 1.0f);
  EXPECT_EQ(half_to_float(0xC000), -2.0f);
  EXPECT_EQ(half_to_float(0x3400), 0.25f);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);               // largest finite half
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(half_to_float(0xFC00)) && half_to_float(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(half_to_float(0x7E00)));
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);  // the top half of 0x3F800000
  EXPECT_EQ(bfloat16_to_float(0xC040), -3.0f);
  EXPECT_EQ(bfloat16_to_float(0x4049), 3.140625f);
}

TEST(Dequantize, Q8_0HandBlock) {
  // d = -0.5 (half 0xB800); q[0] = -128, q[i] = 4i - 64 for i = 1..30, q[31] = 127.
  std::vector<std::byte> block;
  put_u16(block, 0xB800);
  for (int i = 0; i < 32; ++i) {
    const int q = i == 0 ? -128 : i == 31 ? 127 : 4 * i - 64;
    block.push_back(static_cast<std::byte>(static_cast<std::int8_t>(q)));
  }
  ASSERT_EQ(block.size(), 34u);
  // x[i] = d * q[i]: -0.5 * -128 = 64, -0.5 * -60 = 30, ..., -0.5 * 0 = 0 (i = 16), ...,
  // -0.5 * 56 = -28 (i = 30), -0.5 * 127 = -63.5.
  const std::vector<float> expected = {64,  30,  28,  26,  24,  22,  20,  18,  16,  14,    12,
                                       10,  8,   6,   4,   2,   0,   -2,  -4,  -6,  -8,    -10,
                                       -12, -14, -16, -18, -20, -22, -24, -26, -28, -63.5f};
  EXPECT_EQ(dequantize(GgmlType::q8_0, view(block), 32), expected);
}

TEST(Dequantize, Q4_0HandBlockLowNibblesFirst) {
  // d = 2 (half 0x4000); byte j = (15 - j) << 4 | j: low nibble j, high nibble 15 - j.
  std::vector<std::byte> block;
  put_u16(block, 0x4000);
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<std::byte>(((15 - j) << 4) | j));
  ASSERT_EQ(block.size(), 18u);
  // Elements 0..15 come from the low nibbles: (j - 8) * 2 = -16, -14, ..., 14.
  // Elements 16..31 from the high nibbles of the same bytes: (15 - j - 8) * 2 = 14, 12, ..., -16.
  // (Neighbours sharing a byte would give -16, 14, -14, 12, ... instead.)
  const std::vector<float> expected = {-16, -14, -12, -10, -8, -6, -4,  -2,  0,   2,  4,
                                       6,   8,   10,  12,  14, 14, 12,  10,  8,   6,  4,
                                       2,   0,   -2,  -4,  -6, -8, -10, -12, -14, -16};
  EXPECT_EQ(dequantize(GgmlType::q4_0, view(block), 32), expected);
}

TEST(Dequantize, Q4_1HandBlocks) {
  // Block 0: d = 0.25 (0x3400), m = -1 (0xBC00); byte j = j << 4 | (15 - j).
  //   elements 0..15:  (15 - j) * 0.25 - 1 = 2.75, 2.5, ..., -1
  //   elements 16..31: j * 0.25 - 1       = -1, -0.75, ..., 2.75
  // Block 1: d = 1 (0x3C00), m = 0.5 (0x3800); every byte 0x21 (low 1, high 2):
  //   elements 0..15: 1 * 1 + 0.5 = 1.5;  elements 16..31: 2 * 1 + 0.5 = 2.5
  std::vector<std::byte> blocks;
  put_u16(blocks, 0x3400);
  put_u16(blocks, 0xBC00);
  for (int j = 0; j < 16; ++j) blocks.push_back(static_cast<std::byte>((j << 4) | (15 - j)));
  put_u16(blocks, 0x3C00);
  put_u16(blocks, 0x3800);
  for (int j = 0; j < 16; ++j) blocks.push_back(std::byte{0x21});
  ASSERT_EQ(blocks.size(), 40u);
  std::vector<float> expected = {2.75f, 2.5f,   2.25f, 2.0f,   1.75f,  1.5f,  1.25f,  1.0f,
                                 0.75f, 0.5f,   0.25f, 0.0f,   -0.25f, -0.5f, -0.75f, -1.0f,
                                 -1.0f, -0.75f, -0.5f, -0.25f, 0.0f,   0.25f, 0.5f,   0.75f,
                                 1.0f,  1.25f,  1.5f,  1.75f,  2.0f,   2.25f, 2.5f,   2.75f};
  expected.insert(expected.end(), 16, 1.5f);
  expected.insert(expected.end(), 16, 2.5f);
  EXPECT_EQ(dequantize(GgmlType::q4_1, view(blocks), 64), expected);
}

TEST(Dequantize, FloatTypes) {
  std::vector<std::byte> f32(12);
  const float values[] = {1.5f, -0.0f, 3e38f};
  std::memcpy(f32.data(), values, 12);
  EXPECT_EQ(dequantize(GgmlType::f32, view(f32), 3), (std::vector<float>{1.5f, -0.0f, 3e38f}));
  std::vector<std::byte> f16;
  for (std::uint16_t bits : {0x3C00, 0xC000, 0x3555}) put_u16(f16, bits);
  const std::vector<float> halves = dequantize(GgmlType::f16, view(f16), 3);
  EXPECT_EQ(halves[0], 1.0f);
  EXPECT_EQ(halves[1], -2.0f);
  EXPECT_EQ(halves[2], 0.25f * (1.0f + 341.0f / 1024.0f));  // 0x3555: 2^(13-15) * (1 + 0x155/1024)
  std::vector<std::byte> bf16;
  for (std::uint16_t bits : {0x3F80, 0xC040}) put_u16(bf16, bits);
  EXPECT_EQ(dequantize(GgmlType::bf16, view(bf16), 2), (std::vector<float>{1.0f, -3.0f}));
}

TEST(Dequantize, RefusesWhatItCannotDo) {
  const std::vector<std::byte> bytes(210);
  EXPECT_TRUE(contains_all(error_of([&] { dequantize(GgmlType::q6_K, view(bytes), 256); }),
                           {"cannot dequantize tensors of type q6_K"}));
  EXPECT_TRUE(contains_all(error_of([&] { dequantize(GgmlType::q4_0, view(bytes), 33); }),
                           {"33 values of type q4_0", "not a whole number"}));
  const std::vector<std::byte> short_block(17);
  EXPECT_TRUE(contains_all(error_of([&] { dequantize(GgmlType::q4_0, view(short_block), 32); }),
                           {"32 values of type q4_0 take 18 bytes, but 17 were given"}));
  EXPECT_TRUE(can_dequantize(GgmlType::q4_1));
  EXPECT_FALSE(can_dequantize(GgmlType::q5_0));
}

// --- Round trips: reference quantizers following ggml's quantize_row_*_ref --------------------
//
// Each returns the block bytes and the codes it chose, so the test can check both that the
// dequantized value is exactly code * d (+ m) with the stored half-precision scales and that it
// lies within half a quantization step (plus the scales' rounding) of the input.

struct Quantized {
  std::vector<std::byte> bytes;
  std::vector<int> codes;   // per element: q8_0 -127..127, q4_0 0..15, q4_1 0..15
  std::vector<float> d, m;  // per block, as stored (rounded to half)
};

Quantized quantize_q8_0(const std::vector<float>& x) {
  Quantized out;
  for (std::size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_u16(out.bytes, half_bits(d));
    out.d.push_back(half_to_float(half_bits(d)));
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::round(x[b * 32 + i] * id));
      out.codes.push_back(q);
      out.bytes.push_back(static_cast<std::byte>(static_cast<std::int8_t>(q)));
    }
  }
  return out;
}

Quantized quantize_q4_0(const std::vector<float>& x) {
  Quantized out;
  for (std::size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f, max = 0.0f;  // the value of largest magnitude, with its sign
    for (int i = 0; i < 32; ++i) {
      const float v = x[b * 32 + i];
      if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_u16(out.bytes, half_bits(d));
    out.d.push_back(half_to_float(half_bits(d)));
    int codes[32];
    for (int i = 0; i < 32; ++i)
      codes[i] = std::min(15, static_cast<int>(x[b * 32 + i] * id + 8.5f));
    for (int j = 0; j < 16; ++j)
      out.bytes.push_back(static_cast<std::byte>(codes[j] | (codes[j + 16] << 4)));
    out.codes.insert(out.codes.end(), codes, codes + 32);
  }
  return out;
}

Quantized quantize_q4_1(const std::vector<float>& x) {
  Quantized out;
  for (std::size_t b = 0; b < x.size() / 32; ++b) {
    const auto [lo, hi] = std::minmax_element(x.begin() + b * 32, x.begin() + b * 32 + 32);
    const float min = *lo, d = (*hi - *lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_u16(out.bytes, half_bits(d));
    put_u16(out.bytes, half_bits(min));
    out.d.push_back(half_to_float(half_bits(d)));
    out.m.push_back(half_to_float(half_bits(min)));
    int codes[32];
    for (int i = 0; i < 32; ++i)
      codes[i] = std::min(15, static_cast<int>((x[b * 32 + i] - min) * id + 0.5f));
    for (int j = 0; j < 16; ++j)
      out.bytes.push_back(static_cast<std::byte>(codes[j] | (codes[j + 16] << 4)));
    out.codes.insert(out.codes.end(), codes, codes + 32);
  }
  return out;
}

// 8 blocks of normal values at scales 2^-6 ... 2^8 (all scales stay normal half-precision
// numbers, so their rounding is relative), one block of zeros, one constant block.
std::vector<float> test_values() {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x;
  for (int b = 0; b < 8; ++b) {
    const float scale = std::ldexp(1.0f, 2 * b - 6);
    for (int i = 0; i < 32; ++i) x.push_back(scale * normal(random));
  }
  x.insert(x.end(), 32, 0.0f);
  x.insert(x.end(), 32, 0.75f);
  return x;
}

// Dequantizes what a reference quantizer made of `x` and checks every value twice: exactly
// `exact(i)`, the code times the stored scale (plus the stored minimum), and within `bound(i)` of
// the input it came from.
template <typename Exact, typename Bound>
void check_round_trip(GgmlType type, const std::vector<float>& x, const Quantized& q,
                      std::size_t block_bytes, Exact exact, Bound bound) {
  ASSERT_EQ(q.bytes.size(), x.size() / 32 * block_bytes);
  const std::vector<float> y = dequantize(type, view(q.bytes), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], exact(i)) << ggml_type_name(type) << " element " << i;
    ASSERT_LE(std::fabs(y[i] - x[i]), bound(i)) << ggml_type_name(type) << " element " << i;
  }
}

TEST(Dequantize, Q8_0RoundTrip) {
  const std::vector<float> x = test_values();
  const Quantized q = quantize_q8_0(x);
  check_round_trip(
      GgmlType::q8_0, x, q, 34,
      [&](std::size_t i) { return q.d[i / 32] * static_cast<float>(q.codes[i]); },
      // Half a step, plus 127 codes times the rounding of d to half (2^-11 relative).
      [&](std::size_t i) { return q.d[i / 32] * (0.5f + 128.0f / 2048.0f); });
}

TEST(Dequantize, Q4_0RoundTrip) {
  const std::vector<float> x = test_values();
  const Quantized q = quantize_q4_0(x);
  check_round_trip(
      GgmlType::q4_0, x, q, 18,
      [&](std::size_t i) { return q.d[i / 32] * static_cast<float>(q.codes[i] - 8); },
      // The largest magnitude maps to code 0 exactly; the far side of the range can reach code
      // 16, which is clamped to 15: at most one step off, plus the rounding of d.
      [&](std::size_t i) { return std::fabs(q.d[i / 32]) * (1.0f + 16.0f / 2048.0f); });
}

TEST(Dequantize, Q4_1RoundTrip) {
  const std::vector<float> x = test_values();
  const Quantized q = quantize_q4_1(x);
  check_round_trip(
      GgmlType::q4_1, x, q, 20,
      [&](std::size_t i) { return q.d[i / 32] * static_cast<float>(q.codes[i]) + q.m[i / 32]; },
      // Half a step, plus 15 codes times the rounding of d and the rounding of m.
      [&](std::size_t i) {
        return q.d[i / 32] * (0.5f + 16.0f / 2048.0f) + std::fabs(q.m[i / 32]) / 2048.0f;
      });
}

}  // namespace
}  // namespace kc::engine
