// The RoPE angles (kc/engine/rope_table.hpp) against values transformers' code gives, and the
// engine's device pool layout. CPU only.
//   ctest --test-dir build/ci -R "RopeTable|PoolLayout"
#include <gtest/gtest.h>

#include <cmath>

#include "kc/common/error.hpp"
#include "kc/engine/device_pool.hpp"
#include "kc/engine/rope_table.hpp"

namespace kc::engine {
namespace {

ModelConfig llama31_8b_rope() {
  ModelConfig config;
  config.head_dim = 128;
  config.rope_theta = 500000.0;
  RopeScaling scaling;
  scaling.type = "llama3";
  scaling.factor = 8.0;
  scaling.low_freq_factor = 1.0;
  scaling.high_freq_factor = 4.0;
  scaling.original_max_position_embeddings = 8192;
  config.rope_scaling = scaling;
  return config;
}

// Expected values: transformers' _compute_default_rope_parameters and
// _compute_llama3_parameters evaluated for Llama 3.1 8B's settings (float32 inverse frequencies,
// as transformers computes them; the engine computes in double, hence the relative tolerance).
TEST(RopeTable, Llama3ScalingMatchesTransformers) {
  ModelConfig config = llama31_8b_rope();
  const std::vector<double> scaled = rope_inverse_frequencies(config);
  config.rope_scaling.reset();
  const std::vector<double> plain = rope_inverse_frequencies(config);
  ASSERT_EQ(scaled.size(), 64u);
  struct Row {
    int pair;
    double plain, scaled;
  };
  const Row rows[] = {{0, 1.0, 1.0},
                      {20, 0.016560440883040428, 0.016560440883040428},      // short wave: kept
                      {30, 0.002131119603291154, 0.0013718936825171113},     // medium: smoothed
                      {35, 0.0007644970319233835, 9.556212899042293e-05},    // long: divided by 8
                      {45, 9.838111145654693e-05, 1.2297638932068367e-05},
                      {63, 2.4551407022954663e-06, 3.068925877869333e-07}};
  for (const Row& row : rows) {
    EXPECT_NEAR(plain[row.pair], row.plain, 1e-6 * row.plain) << "pair " << row.pair;
    EXPECT_NEAR(scaled[row.pair], row.scaled, 1e-6 * row.scaled) << "pair " << row.pair;
  }
}

TEST(RopeTable, TableHoldsCosThenSinOfEachPair) {
  ModelConfig config;
  config.head_dim = 4;
  config.rope_theta = 100.0;
  const std::vector<float> table = rope_cos_sin_table(config, 3);
  ASSERT_EQ(table.size(), 12u);
  // pairs: inv_freq 1 and 1/10; position 2 -> angles 2 and 0.2
  EXPECT_FLOAT_EQ(table[8], static_cast<float>(std::cos(2.0)));
  EXPECT_FLOAT_EQ(table[9], static_cast<float>(std::cos(0.2)));
  EXPECT_FLOAT_EQ(table[10], static_cast<float>(std::sin(2.0)));
  EXPECT_FLOAT_EQ(table[11], static_cast<float>(std::sin(0.2)));
  EXPECT_FLOAT_EQ(table[0], 1.f);
  EXPECT_FLOAT_EQ(table[2], 0.f);
}

TEST(RopeTable, GgufFrequencyFactorsDivideTheFrequencies) {
  ModelConfig config;
  config.head_dim = 4;
  config.rope_theta = 100.0;
  const std::vector<double> inv = rope_inverse_frequencies(config, {1.f, 4.f});
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_DOUBLE_EQ(inv[1], 0.1 / 4.0);
  EXPECT_THROW(rope_inverse_frequencies(config, {1.f}), Error);          // one factor for two pairs
  EXPECT_THROW(rope_inverse_frequencies(config, {1.f, 0.f}), Error);     // not positive
  EXPECT_THROW(rope_inverse_frequencies(llama31_8b_rope(), std::vector<float>(64, 1.f)), Error);  // both
  EXPECT_THROW(rope_cos_sin_table(config, 0), Error);
}

TEST(PoolLayout, PiecesAreAlignedAndNamedOnce) {
  PoolLayout layout;
  EXPECT_EQ(layout.add("a", 10), 0u);
  EXPECT_EQ(layout.add("b", 256), kPoolAlignment);
  EXPECT_EQ(layout.add("c", 1), 2 * kPoolAlignment);
  EXPECT_EQ(layout.total_bytes(), 3 * kPoolAlignment);
  EXPECT_EQ(layout.pieces()[0].bytes, 10u);
  EXPECT_THROW(layout.add("b", 8), Error);
}

}  // namespace
}  // namespace kc::engine
