// kc/engine/published_configs.hpp — the config.json files of the models the engine is measured
// on, as published, so that a benchmark can build a model of their shape (random weights) without
// the checkpoint, and the tests can read real configurations.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kc/engine/model_config.hpp"

namespace kc::engine {

// HuggingFaceTB/SmolLM2-135M: 30 layers, width 576, 9 query and 3 key/value heads, tied
// embeddings, RoPE theta 100000, no RoPE scaling.
extern const char* const kSmolLM2_135MConfigJson;
// meta-llama/Llama-3.2-1B: 16 layers, width 2048, 32 query and 8 key/value heads, tied
// embeddings, RoPE theta 500000 with Llama 3 scaling (factor 32).
extern const char* const kLlama32_1BConfigJson;
// meta-llama/Llama-3.1-8B: 32 layers, width 4096, 32 query and 8 key/value heads of 128, untied
// embeddings, RoPE theta 500000 with Llama 3 scaling (factor 8).
extern const char* const kLlama31_8BConfigJson;

// "smollm2-135m", "llama-3.2-1b", "llama-3.1-8b".
std::vector<std::string> published_model_names();
// The ModelConfig of one of them (parse_hf_config of its config.json); kc::Error naming the known
// ones for any other name.
ModelConfig published_model_config(std::string_view name);

}  // namespace kc::engine
