#include "support/published_configs.hpp"

#include <gtest/gtest.h>

namespace kc::engine::test_support {

void expect_smollm2_135m_shape(const ModelConfig& config) {
  EXPECT_EQ(config.architecture, "llama");
  EXPECT_EQ(config.hidden_size, 576);
  EXPECT_EQ(config.intermediate_size, 1536);
  EXPECT_EQ(config.num_layers, 30);
  EXPECT_EQ(config.num_heads, 9);
  EXPECT_EQ(config.num_kv_heads, 3);
  EXPECT_EQ(config.head_dim, 64);  // not in config.json: 576 / 9
  EXPECT_EQ(config.vocab_size, 49152);
  EXPECT_EQ(config.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(static_cast<float>(config.rms_norm_eps), 1e-5f);
  EXPECT_EQ(config.rope_theta, 100000.0);
  EXPECT_FALSE(config.rope_scaling.has_value());
  EXPECT_TRUE(config.rope_freqs_tensor.empty());
  EXPECT_TRUE(config.tie_word_embeddings);
}

}  // namespace kc::engine::test_support
