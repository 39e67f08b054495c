// The fp8_gemm op's edge cases (its parameter `edges`), drawn on the host so that a CPU test can
// read them (tests/fp8_gemm_test.cpp) and the op's operands can upload them (src/fp8_gemm_op.cpp).
//
//   edges=0  plain draws: A and B uniform in [-1, 1], every scale uniform in [0.25, 4] (the bench
//            problems, and most conformance problems)
//   edges=1  one element of A NaN (row M / 2, when M >= 2) and one of B (row N / 2, when N >= 2), so
//            one row and one column of C are NaN in any order of summation and scaling; with a
//            scale per tensor s_A an FP32 subnormal (1.5 x 2^-130: C lies around FP32's smallest
//            normals and below, and a kernel that flushes the scale to zero shows); with block
//            scales every 7th scale of A (index kb M + m, from the 4th) 0 and every 7th (from the
//            6th) a subnormal in [2^-128, 2^-127), and of B's blocks (index (n / 128) ceil(K / 128) +
//            kb) every 5th from the 3rd 0 and every 5th from the 5th a subnormal in [2^-127, 2^-126)
//   edges=2  the same NaN elements, and s_B zero everywhere: C is exactly 0 outside the NaN row and
//            column (0 x NaN is NaN), so a kernel that skips its stores where the scale is 0 shows
//
// No infinite scales: a piece's partial sum times Inf is +-Inf or NaN by the sign of a sum the
// tensor cores round differently from the double reference (e4m3 products are exact, their
// accumulation in Hopper's FP8 path is not), so its class is not part of the op's definition.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kc/common/problem.hpp"

namespace kc::stage3 {

enum class Fp8GemmEdges { none = 0, small_scales = 1, zero_scale_b = 2 };

Fp8GemmEdges fp8_gemm_edges(const Problem& p);

// The (row, column) of A (of_a) or of B made NaN, or none (edges=0, or a single row).
std::optional<std::pair<std::int64_t, std::int64_t>> fp8_gemm_nan_element(const Problem& p, bool of_a);

// Every scale of A (of_a) or of B for a problem with edges, in the operand's layout; the values
// that are not an edge case uniform in [0.25, 4) from `seed`.
std::vector<float> fp8_gemm_edge_scales(const Problem& p, bool of_a, std::uint64_t seed);

}  // namespace kc::stage3
