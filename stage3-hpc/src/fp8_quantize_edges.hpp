// The fp8_quantize op's input x and its edge cases, drawn on the host so that a CPU test can read
// them (tests/fp8_gemm_test.cpp) and the op's operand can upload them (src/fp8_quantize_op.cpp).
//
// x is uniform in [-8, 8). Problems of up to 2^22 values (M K: the conformance problems; the bench
// shapes have 2^25 and more and time plain data) also hold pieces (1 x 128 of a row, index
// row ceil(K / 128) + kb) of the kinds the scale rule must get right:
//   index % 32 == 2   nan: one value NaN, the rest as drawn
//   index % 32 == 4   infinite: one value +-Inf, the rest as drawn
//   otherwise by index % 8:
//     1  zeros: every value 0 (s = 1)
//     3  subnormal_scale: |x| below 2^-119, whose scale max|x| / 448 is an FP32 subnormal (1 / s
//        overflows FP32)
//     5  bf16_subnormals: |x| below 2^-127
//     6  near_max: magnitudes near 2^126, close to bf16's largest
//     7  lone: a single nonzero value
//     0, 2, 4: plain
//
// What the op gives for the non-finite pieces (the host reference and the kernel's arithmetic,
// quant/fp8/quantize_01_half_warp_per_block.cu, agree): the max |x| ignores NaN (std::fmax,
// fmaxf), so a piece holding a NaN has the scale of its other values and the NaN stays NaN in q
// (e4m3's NaN); a piece holding +-Inf has max |x| = Inf, so s = Inf, and q = x / s is +-0 for its
// finite values and NaN (Inf / Inf) for the infinite one.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "kc/common/op_builder.hpp"

namespace kc::stage3 {

enum class Fp8QuantizePiece { plain, zeros, subnormal_scale, bf16_subnormals, near_max, lone, nan, infinite };

// Whether a problem holds the edge-case pieces: M K <= 2^22.
bool fp8_quantize_has_edges(const Problem& p);

// The kind of piece kb of row `row`.
Fp8QuantizePiece fp8_quantize_piece(const Problem& p, std::int64_t row, std::int64_t kb);

// x [M, K], row-major, from `seed`.
std::vector<__nv_bfloat16> fp8_quantize_x(const Problem& p, std::uint64_t seed);

// The op's host reference: per piece s = max |x| / 448 (1 for a piece of zeros; NaN ignored),
// q = x / s, in double ("q" [M, K] and "scales" [ceil(K / 128), M]).
HostTensors fp8_quantize_host_reference(const Problem& p, const HostTensors& inputs);

}  // namespace kc::stage3
