// Test support: a small random Llama model in memory, and its forward pass in double on the host —
// the reference the GPU model step is checked against, independent of transformers.
#pragma once

#include <cstdint>
#include <vector>

#include "kc/engine/model_weights.hpp"

namespace kc::engine::test_support {

// A config of the given sizes (head_dim = hidden / heads), rope_theta 10000, eps 1e-5.
ModelConfig tiny_llama_config(std::int64_t hidden, std::int64_t intermediate, std::int64_t layers,
                              std::int64_t heads, std::int64_t kv_heads, std::int64_t vocab, bool tied);

// Weights drawn from a seeded generator, already rounded to bf16: projections ~ uniform with a
// 1/sqrt(fan_in) scale (activations stay O(1) through the layers), norm weights around 1, the
// embedding ~ uniform(-1, 1), so that logits spread over several units and the top-1 token is
// rarely a near-tie.
ModelWeights tiny_llama_weights(const ModelConfig& config, std::uint64_t seed);

// The logits of every position of `ids` ([ids.size(), vocab], row i after reading ids[0..i]), the
// whole model in double from the bf16 weights: RMSNorm, rotate-half RoPE from rope_table.hpp's
// inverse frequencies, causal grouped-query attention, SwiGLU, tied or untied output.
std::vector<double> reference_logits(const ModelWeights& weights, const std::vector<std::int32_t>& ids,
                                     const std::vector<float>& rope_freq_factors = {});

}  // namespace kc::engine::test_support
