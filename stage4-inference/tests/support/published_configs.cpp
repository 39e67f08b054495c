#include "support/published_configs.hpp"

#include <gtest/gtest.h>

namespace kc::engine::test_support {

// HuggingFaceTB/SmolLM2-135M config.json, as published.
const char* const kSmolLM2_135MConfigJson = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 0,
  "eos_token_id": 0,
  "hidden_act": "silu",
  "hidden_size": 576,
  "initializer_range": 0.041666666666666664,
  "intermediate_size": 1536,
  "is_llama_config": true,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 9,
  "num_hidden_layers": 30,
  "num_key_value_heads": 3,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_interleaved": false,
  "rope_scaling": null,
  "rope_theta": 100000,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1",
  "use_cache": true,
  "vocab_size": 49152
})";

// meta-llama/Llama-3.2-1B config.json, as published.
const char* const kLlama32_1BConfigJson = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 8192,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
})";

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
