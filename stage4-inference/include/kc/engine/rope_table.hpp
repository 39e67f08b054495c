// kc/engine/rope_table.hpp — the RoPE angles of a Llama model: inverse frequencies (with Llama 3's
// scaling) and the cos/sin table that stage 2's rope() reads.
//
// Pair i of a head (0 <= i < head_dim / 2) turns at position p by the angle p * inv_freq[i], with
//   inv_freq[i] = 1 / rope_theta^(2i / head_dim)
// as transformers' default RoPE computes it. Llama 3's "llama3" scaling (rope_scaling in
// config.json) then stretches the low frequencies, as transformers' _compute_llama3_parameters
// does: with wavelength w = 2 pi / inv_freq, L = original_max_position_embeddings,
//   w > L / low_freq_factor             inv_freq / factor                   (long waves: scaled)
//   w < L / high_freq_factor            inv_freq                            (short waves: kept)
//   otherwise, s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor),
//                                       (1 - s) inv_freq / factor + s inv_freq
// A GGUF file of a Llama 3 model carries the same scaling as per-pair divisors (its
// rope_freqs.weight tensor, llama.cpp's "freq factors"): inv_freq[i] / freq_factors[i].
// Plain RoPE scales nothing (attention scaling is 1 for both kinds).
#pragma once

#include <cstdint>
#include <vector>

#include "kc/engine/model_config.hpp"

namespace kc::engine {

// inv_freq[i] for i < head_dim / 2, in double. `freq_factors`: empty, or head_dim / 2 positive
// divisors (a GGUF rope_freqs.weight), which a config with rope_scaling must not also have.
// Throws kc::Error for factors of the wrong count or not finite and positive.
std::vector<double> rope_inverse_frequencies(const ModelConfig& config,
                                             const std::vector<float>& freq_factors = {});

// The table of kc::stage2::rope(): `positions` rows of head_dim floats, cos(p * inv_freq[i]) at
// [p][i] and sin(p * inv_freq[i]) at [p][head_dim / 2 + i], each angle computed in double and
// rounded once. Throws kc::Error for positions < 1.
std::vector<float> rope_cos_sin_table(const ModelConfig& config, std::int64_t positions,
                                      const std::vector<float>& freq_factors = {});

}  // namespace kc::engine
