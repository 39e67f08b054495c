// kc/stage3/fp8_grouped_gemm.hpp — the fp8_grouped_gemm op: the expert GEMMs of a mixture-of-experts
// layer in FP8 with block scales (layout: kc/stage3/fp8_grouped_gemm_args.hpp): the grouped GEMM's
// routing (kc/stage3/grouped_gemm.hpp) on the FP8 GEMM's operands (kc/stage3/fp8_gemm.hpp).
//
// Problem dimensions G, N, K ("8x14336x4096 f8e4m3": Mixtral's 8 experts of 4096 -> 14336) and the
// grouped GEMM's three routing parameters, tokens (required), skew and routing_seed, with one more:
//   row_align  every expert's rows rounded up to a multiple of row_align (an expert with none keeps
//              none), as a token-sorted FP8 layer pads each expert's rows (DeepGEMM's contiguous
//              layout pads to 128); A and C have the padded rows, their sum. 1: no padding;
//              4: every expert's rows start 16-byte aligned in s_A, which the rungs' TMA and
//              cuBLASLt's block scales (the baseline below) both need.
// The counts are expert_token_counts' (grouped_gemm.hpp), then padded: a pure function of the
// problem, the same for the reference, the baseline and the kernels.
//
// Operands: A [rows, K] and B [G, N, K] e4m3 ~ uniform(-1, 1) rounded to e4m3, scale_a
// [ceil(K/128), rows rounded up to a multiple of 4] and scale_b [G, ceil(N/128), ceil(K/128)] FP32 ~
// uniform(0.25, 4), C [rows, N] bf16 (poisoned). Reference: each expert's dequantized product in
// double (A and B_g times their scales, then a GEMM: on the host for small problems, cuBLAS DGEMM per
// expert that has rows on the GPU for large ones); the tolerance is the FP8 GEMM's, a bf16 GEMM's
// with K terms. FLOPs: 2 rows N K (padding rows included: the kernels compute them). Bytes: A, the
// weights of the experts that have rows and C once each, and the scales they read.
// Baseline: cuBLASLt's FP8 block-scaled matmul (the FP8 GEMM's baseline) once per expert that has
// rows, on A_g, B_g and C_g where they lie; cuBLASLt reads each expert's A scales as a
// [ceil(K/128), rows_g] array of its own, so the baseline first gathers s_A into that layout with one
// kernel for all experts, inside the timed call (a few microseconds). It runs where K % 16 == 0,
// N is a multiple of 128 and K of 512 (whole blocks, each row of an expert's s_B a multiple of 4
// floats: on an H100 cuBLASLt's results disagreed with the reference at 2x256x256 and 6x264x272, where
// K/128 is 2 and 3, and agreed wherever K/128 was a multiple of 4; the cause is not established), and
// every expert's rows are a multiple of 4 (row_align=4 gives them); it is refused, saying which,
// otherwise.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/fp8_grouped_gemm.hpp, the op's harness side: kernels include fp8_grouped_gemm_args.hpp"
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/fp8_grouped_gemm_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kFp8GroupedGemmOp = "fp8_grouped_gemm";
inline constexpr const char* kFp8GroupedGemmReport = "stage3-fp8-grouped-gemm";

// `counts` with every count rounded up to a multiple of `row_align` (0 stays 0). Throws kc::Error
// for row_align < 1 or a negative count.
std::vector<std::int64_t> padded_expert_counts(std::vector<std::int64_t> counts, std::int64_t row_align);

// The padded rows per expert of an fp8_grouped_gemm problem, and their sum (the rows of A and C).
// Throw kc::Error with fp8_grouped_gemm_problem_error's reason for a problem the op does not define.
std::vector<std::int64_t> fp8_grouped_gemm_counts(const Problem& problem);
std::int64_t fp8_grouped_gemm_rows(const Problem& problem);

// "" when the op defines `problem` (the grouped GEMM's rules for tokens, skew and routing_seed,
// row_align a whole number >= 1, and every operand within 2^31 - 1 elements), otherwise why not.
std::string fp8_grouped_gemm_problem_error(const Problem& problem);

// The rungs also need K % 16 == 0 (TMA moves rows of A and B in 16-byte pieces) and every expert's
// rows a multiple of 4 (TMA reads a tile's scales of A from its first token's, 16-byte aligned in
// s_A: row_align=4): "" or why not, and the conformance problems they refuse.
std::string fp8_grouped_gemm_rung_shape_error(const Problem& problem);
const std::vector<std::string>& fp8_grouped_gemm_rung_refusals();

// What the baseline needs beyond the op, without asking cuBLASLt (which it also does): K % 16 == 0,
// N % 128 == 0 and K % 512 == 0, and every expert's rows a multiple of 4.
// "" or why not.
std::string fp8_grouped_gemm_baseline_shape_error(const Problem& problem);

OpSpec make_fp8_grouped_gemm_op();

// Adds the op, its baseline and its ladder (stage3/fp8_grouped_gemm/01_scales_in_stage,
// 02_wide_tiles and 03_width_per_layer), in the report stage3-fp8-grouped-gemm. Compute capability
// 9.0 (sm_90a code).
void register_fp8_grouped_gemm_kernels(Registry& registry);

// Rung 01's launch with its kernel's flaw (fp8_grouped_gemm_01_neighbours_weight_scales): the same
// tile table and cache, for the negative control stage3/fp8_grouped_gemm/nc_neighbours_weight_scales
// (tests/negative_controls/fp8_grouped_gemm_controls.cpp), which must fail wherever an expert other
// than the last has rows. Compute capability 9.0.
LaunchFn fp8_grouped_gemm_01_launch_with_neighbours_weight_scales();

}  // namespace kc::stage3
