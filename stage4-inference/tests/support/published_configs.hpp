// Test support: the shape a ModelConfig of SmolLM2-135M must have, whichever file it was read
// from; the published config.json files themselves are the library's
// (kc/engine/published_configs.hpp).
#pragma once

#include "kc/engine/model_config.hpp"
#include "kc/engine/published_configs.hpp"

namespace kc::engine::test_support {

using kc::engine::kLlama32_1BConfigJson;
using kc::engine::kSmolLM2_135MConfigJson;

// Checks the architecture of SmolLM2-135M: sizes, heads, head_dim 64, vocabulary, context, RMSNorm
// eps (as a float: GGUF stores it so), RoPE, tied embeddings. Not the special tokens or the
// dtype, which differ between the base model's config.json and the instruct model's GGUF.
void expect_smollm2_135m_shape(const ModelConfig& config);

}  // namespace kc::engine::test_support
