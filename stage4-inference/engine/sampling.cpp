// The CPU reference sampler (kc/engine/sampling.hpp).
#include "kc/engine/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kc/common/error.hpp"

namespace kc::engine {

namespace {

// The sampler's candidate tokens: the vocabulary in sampling order after the top-k and top-p cuts,
// with each token's unnormalised weight exp((logit - max) / T).
struct Candidates {
  std::vector<TokenId> tokens;
  std::vector<double> weights;
  double total = 0.0;
};

void check_logits(const std::vector<float>& logits) {
  require(!logits.empty(), "sampling: the logits are empty (a vocabulary of zero tokens)");
  for (std::size_t i = 0; i < logits.size(); ++i)
    require(!std::isnan(logits[i]), "sampling: logit {} is NaN; the model step produced no logits",
            i);
}

bool is_greedy(const SamplingParams& params) {
  return params.temperature == 0.0f || params.top_k == 1;
}

Candidates candidates(const std::vector<float>& logits, const SamplingParams& params) {
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&logits](TokenId a, TokenId b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::size_t kept = order.size();
  if (params.top_k > 0) kept = std::min<std::size_t>(kept, params.top_k);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                    before);
  order.resize(kept);
  const double max_logit = logits[order.front()];
  require(std::isfinite(max_logit),
          "sampling: the largest logit is {}; every token is masked or the logits overflowed",
          max_logit);

  Candidates result;
  result.weights.reserve(kept);
  for (const TokenId token : order) {
    const double weight = std::exp((static_cast<double>(logits[token]) - max_logit) /
                                   static_cast<double>(params.temperature));
    result.weights.push_back(weight);
    result.total += weight;
  }
  if (params.top_p < 1.0f) {
    const double target = static_cast<double>(params.top_p) * result.total;
    double running = 0.0;
    std::size_t prefix = 0;
    while (prefix < kept) {
      running += result.weights[prefix++];
      if (running >= target) break;
    }
    result.weights.resize(prefix);
    order.resize(prefix);
    result.total = running;
  }
  result.tokens = std::move(order);
  return result;
}

}  // namespace

void validate_sampling_params(const SamplingParams& params) {
  require(std::isfinite(params.temperature) && params.temperature >= 0.0f,
          "sampling: temperature {} must be finite and >= 0 (0 is greedy)", params.temperature);
  require(params.top_k >= 0, "sampling: top_k {} must be >= 0 (0 turns top-k off)", params.top_k);
  require(params.top_p > 0.0f && params.top_p <= 1.0f,
          "sampling: top_p {} must be in (0, 1] (1 turns top-p off)", params.top_p);
}

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr std::uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const std::uint64_t product0 = std::uint64_t{kMultiplier0} * counter[0];
    const std::uint64_t product1 = std::uint64_t{kMultiplier1} * counter[2];
    const auto high0 = static_cast<std::uint32_t>(product0 >> 32);
    const auto low0 = static_cast<std::uint32_t>(product0);
    const auto high1 = static_cast<std::uint32_t>(product1 >> 32);
    const auto low1 = static_cast<std::uint32_t>(product1);
    counter = {high1 ^ counter[1] ^ key[0], low1, high0 ^ counter[3] ^ key[1], low0};
  }
  return counter;
}

float sampling_uniform(std::uint64_t seed, std::uint64_t index) {
  const std::array<std::uint32_t, 4> bits = philox4x32_10(
      {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u},
      {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  return static_cast<float>(bits[0] >> 8) * 0x1.0p-24f;
}

TokenId argmax_token(const std::vector<float>& logits) {
  check_logits(logits);
  // max_element keeps the first of equal elements: ties go to the lower id.
  return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<double> sampling_probabilities(const std::vector<float>& logits,
                                           const SamplingParams& params) {
  validate_sampling_params(params);
  std::vector<double> probabilities(logits.size(), 0.0);
  if (is_greedy(params)) {
    probabilities[argmax_token(logits)] = 1.0;
    return probabilities;
  }
  check_logits(logits);
  const Candidates kept = candidates(logits, params);
  for (std::size_t i = 0; i < kept.tokens.size(); ++i)
    probabilities[kept.tokens[i]] = kept.weights[i] / kept.total;
  return probabilities;
}

TokenId sample_with_uniform(const std::vector<float>& logits, const SamplingParams& params,
                            float uniform) {
  validate_sampling_params(params);
  require(uniform >= 0.0f && uniform < 1.0f, "sampling: the uniform draw {} is not in [0, 1)",
          uniform);
  if (is_greedy(params)) return argmax_token(logits);
  check_logits(logits);
  const Candidates kept = candidates(logits, params);
  const double threshold = static_cast<double>(uniform) * kept.total;
  double running = 0.0;
  for (std::size_t i = 0; i < kept.tokens.size(); ++i) {
    running += kept.weights[i];
    if (threshold < running) return kept.tokens[i];
  }
  return kept.tokens.back();
}

TokenId sample_token(const std::vector<float>& logits, const SamplingParams& params,
                     std::uint64_t index) {
  return sample_with_uniform(logits, params, sampling_uniform(params.seed, index));
}

bool sampling_boundary_neighbours(const std::vector<float>& logits, const SamplingParams& params,
                                  std::uint64_t index, TokenId expected, TokenId got) {
  const auto vocab = static_cast<TokenId>(logits.size());
  if (expected < 0 || got < 0 || expected >= vocab || got >= vocab) return false;
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return logits[a] > logits[b]; });
  const auto at = [&](TokenId token) { return std::find(order.begin(), order.end(), token) - order.begin(); };
  const std::ptrdiff_t i = at(expected), j = at(got);
  if (std::abs(i - j) != 1) return false;
  const std::vector<double> p = sampling_probabilities(logits, params);
  double running = 0.0;
  for (std::ptrdiff_t k = 0; k <= std::min(i, j); ++k) running += p[static_cast<std::size_t>(order[k])];
  double kept = 0.0;
  for (const double v : p) kept += v;
  return std::abs(static_cast<double>(sampling_uniform(params.seed, index)) * kept - running) < 1e-5;
}

}  // namespace kc::engine
