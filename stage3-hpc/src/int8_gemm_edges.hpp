// The int8_gemm_dequant op's scale edge cases, drawn on the host so that a CPU test can read them
// (tests/int8_gemm_test.cpp) and the op's operands can upload them (src/int8_gemm_op.cpp).
//
// Every scale is uniform in [0.25, 4) from the operand's seed. Problems of up to 2^23 outputs (M N:
// every conformance problem; the smallest bench shape has 2^24) also hold, by index:
//   s_A[r]  r % 8 == 1: 0;  r % 8 == 3: an FP32 subnormal in [2^-130, 2^-127);
//           with M >= 4, r == M / 2: +Inf and r == M - 1: NaN
//   s_B[c]  c % 8 == 2: 0;  c % 8 == 5: an FP32 subnormal in [2^-130, 2^-127);
//           with N >= 4, c == N / 2: +Inf and c == N - 1: NaN
// (a problem of one row or one column keeps that row or column plain: a non-finite scale there
// would cover the whole output, which a kernel that writes nothing matches too).
//
// What C is then (the op's definition, C = (sum x s_A) x s_B of the exact s32 sum): a row or
// column of scale 0 is +-0, of scale NaN NaN; a scale +Inf gives +-Inf where the sum and the other
// scale are nonzero and NaN where either is 0 (or NaN). These classes are the same in every order
// of the two multiplications, in FP32 as in double (an FP32 sum of the kernels converts to 0 only
// where the s32 sum is 0, with its sign otherwise), so every kernel that applies both scales by
// IEEE multiplication agrees with the reference there.
//
// Why the subnormals lie in [2^-130, 2^-127): with the other scale in [0.25, 4) the product
// s_A s_B is at least 2^-132, whose FP32 spacing 2^-149 leaves 17 bits: a kernel computing
// sum x (s_A s_B) is off by at most 2^-18 relative, and one computing (sum x s_A) x s_B by no more
// (sum x s_A is an integer times s_A's spacing, exact below 2^-126 and rounded to 24 bits above),
// both far inside bf16's 2^-8. (A scale near 2^-149 would keep one bit and could not pass.) A
// subnormal row meeting a subnormal column underflows to 0 in FP32 in every order, far below the
// tolerance. These small values are far below the tolerance's floor (2^-8 rms(C)) too, so a kernel
// that flushes a subnormal scale to 0 does not show in them: it shows where the scale meets the
// +Inf scale of the other side, where 0 x Inf makes NaN instead of +-Inf.
#pragma once

#include <cstdint>
#include <vector>

#include "kc/common/op_builder.hpp"

namespace kc::stage3 {

enum class Int8ScaleKind { plain, zero, subnormal, infinite, nan };

// Whether a problem's scales hold the edge cases: M N <= 2^23.
bool int8_scales_have_edges(const Problem& p);

// The kind of s_A[index] (of_a) or of s_B[index].
Int8ScaleKind int8_scale_kind(const Problem& p, bool of_a, std::int64_t index);

// s_A (of_a: M values) or s_B (N values), the plain ones uniform in [0.25, 4) from `seed`.
std::vector<float> int8_gemm_scales(const Problem& p, bool of_a, std::uint64_t seed);

// The int8_gemm_dequant op's host reference: the exact integer product in double, each sum times
// s_A[row], then times s_B[col] (C), or the sums alone for int8_gemm (C32).
HostTensors int8_gemm_host_reference(const Problem& p, const HostTensors& inputs);

}  // namespace kc::stage3
