// The gemv_gguf op's host side: its reference decode of the three GGUF block formats on blocks
// built by hand (values worked out below), the nibble order, and the shapes it refuses.
//   ctest --test-dir build/ci -R GemvGguf
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kc/stage3/gemv_gguf.hpp"

namespace kc::stage3 {
namespace {

TEST(GemvGguf, DecodesQ4_0BlocksLowNibblesFirst) {
  // d = 0.5 (half 0x3800); qs[j] = j in the low nibble, 15 - j in the high one:
  // weight j = 0.5 (j - 8), weight j + 16 = 0.5 (15 - j - 8).
  std::vector<std::uint8_t> block = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  const std::vector<double> w = decode_gguf_blocks(GgufBlockType::q4_0, block.data(), 1);
  ASSERT_EQ(w.size(), 32u);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(w[j], 0.5 * (j - 8)) << j;
    EXPECT_EQ(w[j + 16], 0.5 * (7 - j)) << j + 16;
  }
}

TEST(GemvGguf, DecodesQ4_1BlocksWithTheirMinimum) {
  // d = 0.25 (0x3400), m = -1 (0xBC00); qs[j] = 3 low, 12 high: weights -0.25 and 2.
  std::vector<std::uint8_t> block = {0x00, 0x34, 0x00, 0xBC};
  for (int j = 0; j < 16; ++j) block.push_back(0xC3);
  const std::vector<double> w = decode_gguf_blocks(GgufBlockType::q4_1, block.data(), 1);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(w[j], -0.25);
    EXPECT_EQ(w[j + 16], 2.0);
  }
}

TEST(GemvGguf, DecodesQ8_0BlocksAsSignedBytes) {
  // d = 2 (0x4000); q[i] = i - 16 as a signed byte: weight 2 (i - 16). Two blocks in a row.
  std::vector<std::uint8_t> blocks;
  for (int b = 0; b < 2; ++b) {
    blocks.push_back(0x00);
    blocks.push_back(0x40);
    for (int i = 0; i < 32; ++i) blocks.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(i - 16)));
  }
  const std::vector<double> w = decode_gguf_blocks(GgufBlockType::q8_0, blocks.data(), 2);
  ASSERT_EQ(w.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(w[i], 2.0 * ((i % 32) - 16)) << i;
}

TEST(GemvGguf, RefusesShapesItDoesNotDefine) {
  const OpSpec op = make_gemv_gguf_op();
  EXPECT_EQ(gemv_gguf_shape_error(op.problem({16, 7, 64}, DType::bf16)), "");
  EXPECT_NE(gemv_gguf_shape_error(op.problem({17, 7, 64}, DType::bf16)).find("at most 16"), std::string::npos);
  EXPECT_NE(gemv_gguf_shape_error(op.problem({1, 7, 48}, DType::bf16)).find("multiple of 32"), std::string::npos);
  EXPECT_NE(gemv_gguf_shape_error(op.problem({1, 7, 64}, DType::bf16, {{"ggml_type", 6.0}})).find("ggml_type"),
            std::string::npos);
  EXPECT_EQ(gguf_block_type(op.problem({1, 7, 64}, DType::bf16, {{"ggml_type", 8.0}})), GgufBlockType::q8_0);
}

}  // namespace
}  // namespace kc::stage3
