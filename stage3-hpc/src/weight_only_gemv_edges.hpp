// weight_only_gemv_edges.hpp — what the two weight-only GEMV ops' edge cases share (gemv_gguf:
// src/gemv_gguf_edges.hpp; gemv_int4: src/gemv_int4_edges.hpp): which problems hold them, the
// generator they are drawn from, the NaN in x and where the NaN scales of w go. Each op's header
// says what its weight's edge cases are; this one how both place them. Problem dimensions M, N, K
// (y [M, N] = x [M, K] . w^T) for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/op_builder.hpp"

namespace kc::stage3 {

// NaN as IEEE half bits (the scales' type in both ops).
inline constexpr std::uint16_t kHalfNanBits = 0x7E00;

// Whether a problem holds the edge cases: its weight has at most 2^22 weights (N K <= 4 Mi), every
// conformance problem of both ops and none of their bench shapes (which time the plain draws).
inline bool weight_only_gemv_has_edge_cases(const Problem& problem) {
  return problem.dims[1] * problem.dims[2] <= (std::int64_t{1} << 22);
}

// The edge cases' own generator, seeded from an operand's seed: the plain draws keep their bytes.
inline std::mt19937_64 weight_only_gemv_edge_generator(std::uint64_t seed) {
  return std::mt19937_64(seed ^ 0x9E3779B97F4A7C15ull);
}

// The index in x (row K + k) of the element the fill makes NaN for x's operand seed `seed`, or -1
// where it makes none (no edge cases, or M = 1: a NaN there would cover all of y).
inline std::int64_t weight_only_gemv_nan_x_index(const Problem& problem, std::uint64_t seed) {
  const std::int64_t m = problem.dims[0], k = problem.dims[2];
  if (!weight_only_gemv_has_edge_cases(problem) || m < 2) return -1;
  std::mt19937_64 rng = weight_only_gemv_edge_generator(seed);
  const auto row = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(m));
  const auto column = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(k));
  return row * k + column;
}

// Where a problem with edge cases puts its NaN scales, drawn from `rng`: in problems of at least
// 16 rows of w, 1 + N / 256 entries (indices row x entries_per_row + entry), each in a row of its
// own, the rows spread over N from a random one. Each NaN scale makes its row's output column NaN
// in every row of y, a few columns in all, so an output left unwritten (NaN-poisoned) still fails
// elsewhere.
inline std::vector<std::int64_t> weight_only_gemv_nan_scales(const Problem& problem, std::int64_t entries_per_row,
                                                             std::mt19937_64& rng) {
  const std::int64_t n = problem.dims[1];
  std::vector<std::int64_t> indices;
  if (n < 16) return indices;
  const std::int64_t nan_rows = 1 + n / 256;
  const auto first_row = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n));
  for (std::int64_t i = 0; i < nan_rows; ++i) {
    const std::int64_t row = (first_row + i * (n / nan_rows)) % n;
    const auto entry = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(entries_per_row));
    indices.push_back(row * entries_per_row + entry);
  }
  return indices;
}

// x [M, K] (operand "x", the problem's dtype): the plain uniform draw from its seed, then the NaN of
// weight_only_gemv_nan_x_index where there is one.
inline OperandSpec weight_only_gemv_x() {
  OperandSpec x = input("x", dims_at({0, 2}));
  x.initialize = [fill = x.fill](const Problem& p, Tensor& tensor, std::uint64_t seed, cudaStream_t stream) {
    fill_random(tensor.raw(), tensor.dtype, tensor.count(), seed, fill, stream);
    const std::int64_t nan_at = weight_only_gemv_nan_x_index(p, seed);
    if (nan_at >= 0)
      poison(static_cast<std::byte*>(tensor.raw()) + dtype_bytes(tensor.dtype, static_cast<std::size_t>(nan_at)),
             tensor.dtype, 1, stream);
  };
  return x;
}

}  // namespace kc::stage3
