// The CPU reference sampler (kc/engine/sampling.hpp): Philox against Random123's known answers,
// greedy and its limits, top-k and top-p cuts and their ties, reproducible seeded draws, and the
// distribution of many draws against the softmax probabilities (a chi-square bound, with a
// negative control that the bound rejects a wrong distribution).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kc/common/error.hpp"
#include "kc/engine/sampling.hpp"

namespace kc::engine {
namespace {

SamplingParams params(float temperature, std::int32_t top_k = 0, float top_p = 1.0f,
                      std::uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.seed = seed;
  return p;
}

std::vector<float> random_logits(std::size_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& logit : logits) logit = normal(rng);
  return logits;
}

// softmax(logits / T) in double, written independently of the sampler.
std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double max_logit = -INFINITY;
  for (const float logit : logits) max_logit = std::max(max_logit, double{logit});
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i)
    sum += p[i] = std::exp((logits[i] - max_logit) / temperature);
  for (double& value : p) value /= sum;
  return p;
}

// Pearson's chi-square statistic of `counts` against `expected` probabilities (cells with zero
// probability must have zero counts).
double chi_square(const std::vector<std::int64_t>& counts, const std::vector<double>& expected,
                  std::int64_t draws) {
  double statistic = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    const double mean = expected[i] * static_cast<double>(draws);
    statistic += (counts[i] - mean) * (counts[i] - mean) / mean;
  }
  return statistic;
}

// The chi-square quantile at 1 - 1e-3 for 1 to 7 degrees of freedom.
double chi_square_bound(std::size_t degrees) {
  static const double kQuantiles[] = {0.0, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322};
  return kQuantiles[degrees];
}

std::vector<std::int64_t> draw_counts(const std::vector<float>& logits, const SamplingParams& p,
                                      std::int64_t draws) {
  std::vector<std::int64_t> counts(logits.size(), 0);
  for (std::int64_t i = 0; i < draws; ++i)
    ++counts[sample_token(logits, p, static_cast<std::uint64_t>(i))];
  return counts;
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  // Random123 tests/kat_vectors, "philox4x32 10": counter, key, result.
  using Words4 = std::array<std::uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Words4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (Words4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (Words4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, TheUniformIsTheTop24BitsOfTheFirstWord) {
  EXPECT_EQ(sampling_uniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) / 16777216.0f);
  const std::uint64_t seed = 0xa4093822299f31d0ull;  // key words {0x299f31d0, 0xa4093822}
  const std::uint64_t index = 0x85a308d3243f6a88ull;
  const std::uint32_t first =
      philox4x32_10({0x243f6a88u, 0x85a308d3u, 0, 0}, {0x299f31d0u, 0xa4093822u})[0];
  EXPECT_EQ(sampling_uniform(seed, index), static_cast<float>(first >> 8) / 16777216.0f);
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const float u = sampling_uniform(12345, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u * 16777216.0f, std::floor(u * 16777216.0f));
  }
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(2, 0));
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(1, 1));
}

TEST(Sampling, GreedyIsTheArgmaxWithTiesToTheLowerId) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = random_logits(1000, seed);
    const TokenId expected =
        static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(sample_token(logits, params(0.0f), seed), expected);
    EXPECT_EQ(argmax_token(logits), expected);
  }
  EXPECT_EQ(argmax_token({1.0f, 5.0f, 2.0f, 5.0f}), 1);
  EXPECT_EQ(sample_with_uniform({-INFINITY, 0.5f, 0.5f}, params(0.0f), 0.99f), 1);
}

TEST(Sampling, TopKOfOneIsGreedyAtAnyTemperature) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = random_logits(500, seed);
    for (const float temperature : {0.5f, 1.0f, 5.0f})
      for (std::uint64_t index = 0; index < 10; ++index)
        EXPECT_EQ(sample_token(logits, params(temperature, 1, 1.0f, seed), index),
                  argmax_token(logits));
  }
}

TEST(Sampling, TemperatureTowardsZeroBecomesGreedy) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = random_logits(200, seed);
    const TokenId best = argmax_token(logits);
    logits[best] += 0.05f;  // a clear gap to the runner-up
    for (int draw = 0; draw < 50; ++draw)
      EXPECT_EQ(sample_with_uniform(logits, params(1e-3f), draw / 50.0f), best);
  }
}

TEST(Sampling, ProbabilitiesAreTheSoftmaxAtTheTemperature) {
  const std::vector<float> logits = random_logits(64, 3);
  for (const float temperature : {0.3f, 1.0f, 2.5f}) {
    const std::vector<double> expected = softmax(logits, temperature);
    const std::vector<double> got = sampling_probabilities(logits, params(temperature));
    for (std::size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12);
  }
}

TEST(Sampling, TopKKeepsTheKLargestWithTiesToTheLowerId) {
  const std::vector<float> logits = {3.0f, 1.0f, 1.0f, 1.0f, 2.0f};
  const std::vector<double> p = sampling_probabilities(logits, params(1.0f, 3));
  EXPECT_GT(p[0], 0.0);
  EXPECT_GT(p[4], 0.0);
  EXPECT_GT(p[1], 0.0);  // the first of the three tied tokens
  EXPECT_EQ(p[2], 0.0);
  EXPECT_EQ(p[3], 0.0);
  const double sum = std::exp(0.0) + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(p[0], 1.0 / sum, 1e-12);
  EXPECT_NEAR(p[4], std::exp(-1.0) / sum, 1e-12);
  // top_k at or above the vocabulary keeps everything.
  EXPECT_EQ(sampling_probabilities(logits, params(1.0f, 5)),
            sampling_probabilities(logits, params(1.0f, 0)));
  EXPECT_EQ(sampling_probabilities(logits, params(1.0f, 99)),
            sampling_probabilities(logits, params(1.0f, 0)));
}

TEST(Sampling, TopPEdgeCases) {
  // Probabilities about 0.5, 0.25, 0.125, 0.125 (logits 3, 2, 1, 1 in units of ln 2).
  const float ln2 = std::log(2.0f);
  const std::vector<float> logits = {3 * ln2, 1 * ln2, 2 * ln2, 1 * ln2};
  const auto kept = [&](float top_p) {
    const std::vector<double> p = sampling_probabilities(logits, params(1.0f, 0, top_p));
    std::vector<int> nonzero;
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p[i] > 0.0) nonzero.push_back(static_cast<int>(i));
    return nonzero;
  };
  EXPECT_EQ(kept(1.0f), std::vector<int>({0, 1, 2, 3}));    // off
  EXPECT_EQ(kept(1e-6f), std::vector<int>({0}));            // at least the best token
  EXPECT_EQ(kept(0.49f), std::vector<int>({0}));
  EXPECT_EQ(kept(0.74f), std::vector<int>({0, 2}));         // 0.5 + 0.25 >= 0.74
  EXPECT_EQ(kept(0.76f), std::vector<int>({0, 1, 2}));      // the tie goes to the lower id
  EXPECT_EQ(kept(0.99f), std::vector<int>({0, 1, 2, 3}));
  const std::vector<double> p = sampling_probabilities(logits, params(1.0f, 0, 0.74f));
  EXPECT_NEAR(p[0], 2.0 / 3.0, 1e-6);
  EXPECT_NEAR(p[2], 1.0 / 3.0, 1e-6);
  // A dominant token alone passes any top_p below its probability.
  EXPECT_EQ(sample_with_uniform({10.0f, 0.0f, 0.0f}, params(1.0f, 0, 0.9f), 0.999f), 0);
  // top-k first, then top-p over the renormalised survivors.
  const std::vector<double> both = sampling_probabilities(logits, params(1.0f, 2, 0.6f));
  EXPECT_NEAR(both[0], 1.0, 1e-12);  // 0.5 / 0.75 = 0.67 >= 0.6
}

TEST(Sampling, TheDrawPicksAlongTheCumulativeOrder) {
  // Probabilities 0.5 (token 2), 0.25 (token 0), 0.25 (token 1): u in [0, 0.5) -> 2,
  // [0.5, 0.75) -> 0, [0.75, 1) -> 1.
  const float ln2 = std::log(2.0f);
  const std::vector<float> logits = {0.0f, 0.0f, ln2};
  EXPECT_EQ(sample_with_uniform(logits, params(1.0f), 0.0f), 2);
  EXPECT_EQ(sample_with_uniform(logits, params(1.0f), 0.49f), 2);
  EXPECT_EQ(sample_with_uniform(logits, params(1.0f), 0.51f), 0);
  EXPECT_EQ(sample_with_uniform(logits, params(1.0f), 0.74f), 0);
  EXPECT_EQ(sample_with_uniform(logits, params(1.0f), 0.76f), 1);
  EXPECT_EQ(sample_with_uniform(logits, params(1.0f), 0.99999994f), 1);
  // A masked token is never drawn.
  EXPECT_EQ(sample_with_uniform({-INFINITY, 0.0f}, params(1.0f), 0.0f), 1);
}

TEST(Sampling, TheSameSeedGivesTheSameTokens) {
  const std::vector<float> logits = random_logits(300, 11);
  const SamplingParams p = params(1.0f, 50, 0.9f, 424242);
  std::vector<TokenId> first, second, other_seed;
  for (std::uint64_t index = 0; index < 200; ++index) {
    first.push_back(sample_token(logits, p, index));
    second.push_back(sample_token(logits, p, index));
    other_seed.push_back(sample_token(logits, params(1.0f, 50, 0.9f, 424243), index));
  }
  EXPECT_EQ(first, second);
  EXPECT_NE(first, other_seed);
}

TEST(Sampling, ManyDrawsFollowTheSoftmax) {
  const std::vector<float> logits = {1.2f, -0.4f, 0.3f, 2.0f, 0.0f, -1.5f, 0.9f, 0.1f};
  constexpr std::int64_t kDraws = 200000;
  for (const float temperature : {0.7f, 1.0f, 1.6f}) {
    const SamplingParams p = params(temperature, 0, 1.0f, 99);
    const std::vector<std::int64_t> counts = draw_counts(logits, p, kDraws);
    const double statistic = chi_square(counts, softmax(logits, temperature), kDraws);
    EXPECT_LT(statistic, chi_square_bound(7)) << "temperature " << temperature;
  }
}

TEST(Sampling, ManyDrawsFollowTheTruncatedDistributions) {
  const std::vector<float> logits = {1.2f, -0.4f, 0.3f, 2.0f, 0.0f, -1.5f, 0.9f, 0.1f};
  constexpr std::int64_t kDraws = 200000;
  // top-k 4 keeps tokens 3, 0, 6, 2; top-p 0.8 at T = 1 keeps a prefix of the order.
  for (const SamplingParams& p : {params(1.0f, 4, 1.0f, 5), params(1.0f, 0, 0.8f, 6),
                                  params(0.8f, 5, 0.9f, 7)}) {
    const std::vector<double> expected = sampling_probabilities(logits, p);
    std::size_t kept = 0;
    for (const double probability : expected) kept += probability > 0.0;
    ASSERT_GE(kept, 2u);
    // The expected probabilities, independently: the softmax restricted to the kept tokens.
    const std::vector<double> full = softmax(logits, p.temperature);
    double kept_mass = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) kept_mass += expected[i] > 0.0 ? full[i] : 0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      if (expected[i] > 0.0) {
        EXPECT_NEAR(expected[i], full[i] / kept_mass, 1e-12);
      }
    }
    const std::vector<std::int64_t> counts = draw_counts(logits, p, kDraws);
    EXPECT_LT(chi_square(counts, expected, kDraws), chi_square_bound(kept - 1));
  }
}

// A negative control: the same bound rejects draws at the wrong temperature, so the test above
// can fail.
TEST(Sampling, TheChiSquareBoundRejectsAWrongDistribution) {
  const std::vector<float> logits = {1.2f, -0.4f, 0.3f, 2.0f, 0.0f, -1.5f, 0.9f, 0.1f};
  constexpr std::int64_t kDraws = 200000;
  const std::vector<std::int64_t> counts = draw_counts(logits, params(1.1f, 0, 1.0f, 99), kDraws);
  EXPECT_GT(chi_square(counts, softmax(logits, 1.0), kDraws), chi_square_bound(7));
}

TEST(Sampling, BadParametersAndLogitsAreRefused) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_THROW(sample_token(logits, params(-1.0f), 0), kc::Error);
  EXPECT_THROW(sample_token(logits, params(NAN), 0), kc::Error);
  EXPECT_THROW(sample_token(logits, params(1.0f, -2), 0), kc::Error);
  EXPECT_THROW(sample_token(logits, params(1.0f, 0, 0.0f), 0), kc::Error);
  EXPECT_THROW(sample_token(logits, params(1.0f, 0, 1.5f), 0), kc::Error);
  EXPECT_THROW(sample_with_uniform(logits, params(1.0f), 1.0f), kc::Error);
  EXPECT_THROW(sample_token({0.0f, NAN}, params(1.0f), 0), kc::Error);
  EXPECT_THROW(sample_token({0.0f, NAN}, params(0.0f), 0), kc::Error);
  EXPECT_THROW(sample_token({}, params(0.0f), 0), kc::Error);
  EXPECT_THROW(sample_token({-INFINITY, -INFINITY}, params(1.0f), 0), kc::Error);
}

// The one difference an FP32 sampler may show: a neighbour in the order where the scaled draw sits
// on the running sum between the two. Three tokens with probabilities u, (1 - u) / 2, (1 - u) / 2
// at T = 1 put the first boundary exactly on the draw u (the reference picks the second token, by
// "the first i with u m < c_i"); the first token may then stand for it, the third may not, and with
// the boundary moved away neither may.
TEST(Sampling, BoundaryNeighboursAreOnlyAdjacentTokensAtTheDraw) {
  SamplingParams params;
  params.temperature = 1.0f;
  const std::uint64_t index = 7;
  // A seed whose draw puts token 0 first in the order below (u > (1 - u) / 2) and leaves room to
  // move the boundary away.
  params.seed = 1;
  while (!(sampling_uniform(params.seed, index) > 0.4 && sampling_uniform(params.seed, index) < 0.6)) ++params.seed;
  const double u = sampling_uniform(params.seed, index);
  const auto logits_for = [](double first) {
    const double rest = (1.0 - first) / 2.0;
    return std::vector<float>{static_cast<float>(std::log(first)), static_cast<float>(std::log(rest)),
                              static_cast<float>(std::log(rest)) - 1e-6f};
  };
  // Token 0 first only if u > (1 - u) / 2; otherwise the order starts with tokens 1 and 2.
  const std::vector<float> on_boundary = logits_for(u);
  const TokenId expected = sample_token(on_boundary, params, index);
  std::vector<TokenId> order = {0, 1, 2};
  std::stable_sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return on_boundary[a] > on_boundary[b]; });
  const std::ptrdiff_t at = std::find(order.begin(), order.end(), expected) - order.begin();
  bool some_neighbour_accepted = false;
  for (const TokenId other : {0, 1, 2}) {
    if (other == expected) continue;
    const std::ptrdiff_t other_at = std::find(order.begin(), order.end(), other) - order.begin();
    const bool accepted = sampling_boundary_neighbours(on_boundary, params, index, expected, other);
    if (std::abs(other_at - at) != 1) {
      EXPECT_FALSE(accepted) << "token " << other << " is not a neighbour";
    }
    some_neighbour_accepted = some_neighbour_accepted || accepted;
  }
  ASSERT_EQ(order[0], 0);
  // c_0 is u up to the float rounding of log(u): the reference takes token 0 or token 1, and the
  // other one, across that boundary, may stand for it.
  ASSERT_TRUE(expected == 0 || expected == 1) << expected;
  EXPECT_TRUE(some_neighbour_accepted) << "u = " << u;
  EXPECT_TRUE(sampling_boundary_neighbours(on_boundary, params, index, expected, expected == 0 ? 1 : 0));
  // Moved well away from the draw, no boundary is near: nothing but the reference's token.
  const std::vector<float> away = logits_for(u - 0.3);
  const TokenId far_expected = sample_token(away, params, index);
  for (const TokenId other : {0, 1, 2}) {
    if (other != far_expected) {
      EXPECT_FALSE(sampling_boundary_neighbours(away, params, index, far_expected, other));
    }
  }
  EXPECT_FALSE(sampling_boundary_neighbours(on_boundary, params, index, expected, 3));  // outside the vocabulary
}

}  // namespace
}  // namespace kc::engine
