// kc/engine/sampling.hpp — the CPU reference of the sampler: greedy, temperature, top-k, top-p.
//
// Every choice is a pure function of (logits, parameters, one uniform draw), and the draw is a
// pure function of (the request's seed, the index of the token being generated), so a request
// gives the same tokens whatever batch it runs in, after a preemption, and on the GPU sampler,
// which is checked against this file.
//
// The draw, exactly (a GPU sampler reproduces these bits):
//   key     = { seed & 0xffffffff, seed >> 32 }                 (seed: SamplingParams::seed)
//   counter = { index & 0xffffffff, index >> 32, 0, 0 }          (index: 0 for a request's first
//                                                                  generated token, 1 for the next)
//   x       = Philox4x32-10(counter, key)[0]                     (Salmon et al., SC'11; Random123's
//                                                                  philox4x32 with 10 rounds)
//   u       = (x >> 8) * 2^-24                                   (a float in [0, 1), exact)
//
// The choice for temperature T > 0:
//   1. order the vocabulary by logit, largest first, ties by the lower token id;
//   2. top-k: keep the first k of that order (k = 0 keeps all);
//   3. p_i = exp((logit_i - logit_max) / T) over the kept tokens, normalised to sum 1;
//   4. top-p: keep the shortest prefix of the order whose p sums to >= top_p (at least one token;
//      top_p = 1 keeps all);
//   5. with m the sum of the kept p and c_i the running sum along the order, the token is the
//      first i with u * m < c_i (the last kept token if rounding leaves none).
// T = 0 (or top_k = 1) is greedy: the largest logit, ties to the lower id; no draw is used.
// The reference computes steps 3-5 in double. A float GPU sampler sums in another order, so where
// u * m falls within rounding of a boundary c_i the two may pick neighbours in the order; the GPU
// check allows exactly that case and no other.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kc/engine/tokenizer.hpp"

namespace kc::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  std::int32_t top_k = 0;    // 0: no top-k cut
  float top_p = 1.0f;        // 1: no nucleus cut; must be in (0, 1]
  std::uint64_t seed = 0;
};

// Throws kc::Error unless temperature is finite and >= 0, top_k >= 0 and top_p in (0, 1].
void validate_sampling_params(const SamplingParams& params);

// Philox4x32 with 10 rounds (Random123's philox4x32_10).
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                           std::array<std::uint32_t, 2> key);
// The uniform in [0, 1) that generated token number `index` of a request with `seed` uses.
float sampling_uniform(std::uint64_t seed, std::uint64_t index);

// Greedy choice: the largest logit, ties to the lower id. Throws kc::Error on NaN logits.
TokenId argmax_token(const std::vector<float>& logits);

// The probabilities after temperature, top-k and top-p (zero for cut tokens; they sum to 1). For
// greedy parameters, 1 on the argmax.
std::vector<double> sampling_probabilities(const std::vector<float>& logits,
                                           const SamplingParams& params);

// The token the rule above picks for the given uniform draw.
TokenId sample_with_uniform(const std::vector<float>& logits, const SamplingParams& params,
                            float uniform);
// The token generated as number `index` of a request: sample_with_uniform with
// sampling_uniform(params.seed, index).
TokenId sample_token(const std::vector<float>& logits, const SamplingParams& params,
                     std::uint64_t index);

// Whether a sampler that sums in FP32 may give `got` where this reference gives `expected` for
// token number `index`: the two are neighbours in the order of step 1 and the scaled draw u * m
// lies within 1e-5 of the running sum between them (computed here in double) — the one
// difference the header allows. False for any other pair.
bool sampling_boundary_neighbours(const std::vector<float>& logits, const SamplingParams& params,
                                  std::uint64_t index, TokenId expected, TokenId got);

}  // namespace kc::engine
