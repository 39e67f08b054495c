// Test support: the config.json files of two real models, as published, and the shape a
// ModelConfig of SmolLM2-135M must have, whichever file it was read from.
#pragma once

#include "kc/engine/model_config.hpp"

namespace kc::engine::test_support {

// HuggingFaceTB/SmolLM2-135M: 30 layers, width 576, 9 query and 3 key/value heads, tied
// embeddings, RoPE theta 100000, no RoPE scaling.
extern const char* const kSmolLM2_135MConfigJson;
// meta-llama/Llama-3.2-1B: 16 layers, width 2048, 32 query and 8 key/value heads, tied
// embeddings, RoPE theta 500000 with Llama 3 scaling (factor 32).
extern const char* const kLlama32_1BConfigJson;

// Checks the architecture of SmolLM2-135M: sizes, heads, head_dim 64, vocabulary, context, RMSNorm
// eps (as a float: GGUF stores it so), RoPE, tied embeddings. Not the special tokens or the
// dtype, which differ between the base model's config.json and the instruct model's GGUF.
void expect_smollm2_135m_shape(const ModelConfig& config);

}  // namespace kc::engine::test_support
