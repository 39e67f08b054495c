// kc/stage3/fp8_gemm.hpp — the fp8_gemm op: C = (A . s_A)(B . s_B)^T with FP8 e4m3 A [M, K] and
// B [N, K], bf16 C [M, N], FP32 accumulation, and the scales of kc/stage3/fp8_gemm_args.hpp.
//
// Problem dimensions M, N, K ("4096x4096x4096 f8e4m3"), two parameters:
//   scaling  0: one scale per tensor; 1: block scales (1 x 128 pieces of A's rows, 128 x 128
//            blocks of B), DeepSeek-V3's recipe.
//   edges    0: plain draws (below); 1 and 2: the conformance edge cases, a NaN element in A and
//            in B, zero and FP32-subnormal scales, or s_B zero (src/fp8_gemm_edges.hpp).
// Operands: A and B e4m3 ~ uniform(-1, 1) rounded to e4m3 (3 mantissa bits: the values the format
// can hold), scale_a and scale_b FP32 ~ uniform(0.25, 4) in the shapes the scaling gives them,
// C bf16 (poisoned). Reference: the dequantized product in double (A and B times their scales,
// then a GEMM: on the host for small problems, cuBLAS DGEMM on the GPU for large ones): every
// product of two e4m3 values is exact in FP32, so what a kernel may get wrong is the summation
// and the one rounding to bf16 — the tolerance of a bf16 GEMM with K terms. FLOPs 2 M N K.
// Baseline: cuBLASLt's FP8 matmul with the same scales (its default, promoted accumulation; block
// scaling through its BLK128x128 mode on B and VEC128 on A, on the scales as the op stores them;
// it reads A's scales in 16-byte aligned columns and is refused, saying so, for M % 4 != 0 or
// N % 4 != 0).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/fp8_gemm.hpp, the op's harness side: kernels include fp8_gemm_args.hpp"
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kFp8GemmOp = "fp8_gemm";
inline constexpr const char* kFp8GemmReport = "stage3-fp8-gemm";

// "" when the op defines `problem` (scaling 0 or 1), otherwise why not.
std::string fp8_gemm_problem_error(const Problem& problem);

// The rungs also need K % 16 == 0 (TMA moves rows of A and B in 16-byte pieces): "" or why not,
// and the conformance problems they refuse.
std::string fp8_gemm_rung_shape_error(const Problem& problem);
// The K part of that rule, which the FP8 grouped GEMM's rungs share: "" or why K is refused.
std::string fp8_k_multiple_error(std::int64_t k);
const std::vector<std::string>& fp8_gemm_rung_refusals();

// The kernel arguments of a problem on its operands.
Fp8GemmArgs fp8_gemm_args(const Problem& problem, Operands& operands);

OpSpec make_fp8_gemm_op();

// fp8_quantize: x [M, K] bf16 -> q [M, K] e4m3 and scales [ceil(K/128), M] f32, per 1 x 128 piece
// of a row (kc/stage3/fp8_gemm_args.hpp): the A operand and s_A of fp8_gemm with scaling=1. The
// reference divides by the scale in double; q is held to e4m3's rounding, the scale to FP32's.
// Baseline: a copy of the bytes it must move. Inputs ~ uniform(-8, 8).
inline constexpr const char* kFp8QuantizeOp = "fp8_quantize";
std::string fp8_quantize_shape_error(const Problem& problem);  // K % 16 == 0, 32-bit indexing
Fp8QuantizeArgs fp8_quantize_args(const Problem& problem, Operands& operands);
OpSpec make_fp8_quantize_op();

// Adds the ops, their baselines and ladders (stage3/fp8_gemm/01_tma_wgmma … 12_split_last_wave;
// stage3/fp8_quantize/01_half_warp_per_block), all in the report stage3-fp8-gemm.
void register_fp8_gemm_kernels(Registry& registry);

}  // namespace kc::stage3
