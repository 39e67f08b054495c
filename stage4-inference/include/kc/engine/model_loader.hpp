// kc/engine/model_loader.hpp — a model from a path, as the programs take it: a GGUF file, or a
// Hugging Face model directory (config.json, model.safetensors or its sharded index, and, when
// present, tokenizer.json and tokenizer_config.json's chat template).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kc/engine/chat_template.hpp"
#include "kc/engine/model_config.hpp"
#include "kc/engine/model_weights.hpp"
#include "kc/engine/tokenizer.hpp"

namespace kc::engine {

struct LoadedModel {
  std::string path;
  std::string format;  // "gguf" or "safetensors"
  ModelWeights weights;  // weights.config is the model's config
  std::vector<float> rope_freq_factors;  // a GGUF file's rope_freqs.weight, else empty
  std::optional<Tokenizer> tokenizer;    // none without tokenizer.json / tokenizer.ggml.* keys
  std::optional<ChatTemplate> chat_template;
  // What the load did that a user should know: tensor types dequantized to bf16, a missing
  // tokenizer.
  std::vector<std::string> notes;
};

// Loads everything (the weights converted to bf16 on the host, and with
// options.keep_quantized_blocks a GGUF file's q4_0, q4_1 and q8_0 projections also as stored;
// model_weights.hpp). Throws kc::Error naming the file for anything missing or malformed; a
// template the engine does not render leaves chat_template empty with a note saying why.
LoadedModel load_model(const std::string& path, const WeightLoadOptions& options = {});

}  // namespace kc::engine
