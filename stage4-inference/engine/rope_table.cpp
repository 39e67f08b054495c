// The RoPE angles (kc/engine/rope_table.hpp).
#include "kc/engine/rope_table.hpp"

#include <cmath>

#include "kc/common/error.hpp"

namespace kc::engine {

std::vector<double> rope_inverse_frequencies(const ModelConfig& config,
                                             const std::vector<float>& freq_factors) {
  const std::int64_t pairs = config.head_dim / 2;
  require(pairs >= 1 && config.rope_theta > 0.0, "RoPE needs head_dim >= 2 and rope_theta > 0 (got {} and {})",
          config.head_dim, config.rope_theta);
  std::vector<double> inv_freq(static_cast<std::size_t>(pairs));
  for (std::int64_t i = 0; i < pairs; ++i)
    inv_freq[static_cast<std::size_t>(i)] =
        1.0 / std::pow(config.rope_theta, static_cast<double>(2 * i) / static_cast<double>(config.head_dim));

  if (!freq_factors.empty()) {
    require(!config.rope_scaling.has_value(),
            "RoPE: the model has both rope_scaling and per-pair frequency factors; one of them at most");
    require(static_cast<std::int64_t>(freq_factors.size()) == pairs,
            "RoPE: {} frequency factors for head_dim {} (expected head_dim / 2 = {})", freq_factors.size(),
            config.head_dim, pairs);
    for (std::int64_t i = 0; i < pairs; ++i) {
      const float factor = freq_factors[static_cast<std::size_t>(i)];
      require(std::isfinite(factor) && factor > 0.f, "RoPE: frequency factor {} is {} (must be finite and > 0)", i,
              factor);
      inv_freq[static_cast<std::size_t>(i)] /= factor;
    }
    return inv_freq;
  }
  if (!config.rope_scaling.has_value()) return inv_freq;

  const RopeScaling& scaling = *config.rope_scaling;
  require(scaling.type == "llama3", "RoPE scaling '{}' is not supported (llama3 only)", scaling.type);
  const double pi = std::acos(-1.0);
  const double old_context = static_cast<double>(scaling.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / scaling.low_freq_factor;
  const double high_freq_wavelen = old_context / scaling.high_freq_factor;
  for (double& freq : inv_freq) {
    const double wavelen = 2.0 * pi / freq;
    if (wavelen > low_freq_wavelen) {
      freq /= scaling.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (old_context / wavelen - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      freq = (1.0 - smooth) * freq / scaling.factor + smooth * freq;
    }
  }
  return inv_freq;
}

std::vector<float> rope_cos_sin_table(const ModelConfig& config, std::int64_t positions,
                                      const std::vector<float>& freq_factors) {
  require(positions >= 1, "RoPE table: positions must be >= 1 (got {})", positions);
  const std::vector<double> inv_freq = rope_inverse_frequencies(config, freq_factors);
  const std::size_t pairs = inv_freq.size(), dim = 2 * pairs;
  std::vector<float> table(static_cast<std::size_t>(positions) * dim);
  for (std::int64_t p = 0; p < positions; ++p) {
    float* row = table.data() + static_cast<std::size_t>(p) * dim;
    for (std::size_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(p) * inv_freq[i];
      row[i] = static_cast<float>(std::cos(angle));
      row[pairs + i] = static_cast<float>(std::sin(angle));
    }
  }
  return table;
}

}  // namespace kc::engine
