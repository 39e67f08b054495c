// kc/stage3/int8_gemm.hpp — the INT8 GEMM's two ops, on A [M, K] and B [N, K] s8 (layouts and
// exactness in kc/stage3/int8_gemm_args.hpp):
//
//   int8_gemm          C32 [M, N] s32 = A . B^T. Exact: the reference is the integer product
//                      (in double, exact below 2^53), and every element must equal it.
//                      Baseline: cuBLASLt's INT8 matmul (s8 x s8 -> s32, CUBLAS_COMPUTE_32I).
//   int8_gemm_dequant  C [M, N] bf16 = s_A[m] s_B[n] (A . B^T)[m, n], s_A [M] and s_B [N] FP32
//                      (per token, per output channel). Reference: the exact integer product,
//                      times s_A[m], times s_B[n], in double; tolerance: one rounding to bf16. Baseline: what a caller of
//                      cuBLASLt has to do, which has no epilogue for two scale vectors: its s32
//                      matmul into a scratch matrix, then a kernel that dequantizes it
//                      (s32 x s_A x s_B -> bf16), both timed.
//
// Problem dimensions M, N, K ("4096x4096x4096 i8"), no parameters. Operands: A and B ~ uniform
// integers in [-127, 127], the scales ~ uniform(0.25, 4), with zero, subnormal, +Inf and NaN scales
// in the conformance problems (src/int8_gemm_edges.hpp). FLOPs 2 M N K (a multiply-add is two
// integer operations). The kernels also need K % 16 == 0 (TMA) and K <= 131071 (32-bit sums).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes kc/stage3/int8_gemm.hpp, the ops' harness side: kernels include int8_gemm_args.hpp"
#endif

#include <string>
#include <vector>

#include "kc/common/registry.hpp"
#include "kc/stage3/int8_gemm_args.hpp"

namespace kc::stage3 {

inline constexpr const char* kInt8GemmOp = "int8_gemm";
inline constexpr const char* kInt8GemmDequantOp = "int8_gemm_dequant";
inline constexpr const char* kInt8GemmReport = "stage3-int8-gemm";

// "" when the ops define `problem` (32-bit indexing, K within the 32-bit sums), otherwise why not.
std::string int8_gemm_problem_error(const Problem& problem);
// The rungs also need K % 16 == 0: "" or why not, and the conformance problems they refuse.
std::string int8_gemm_rung_shape_error(const Problem& problem);
const std::vector<std::string>& int8_gemm_rung_refusals();

// The kernel arguments of a problem of either op on its operands (the op is known from which
// operands exist: C32 or C with the scales).
Int8GemmArgs int8_gemm_args(const Problem& problem, Operands& operands);

OpSpec make_int8_gemm_op();
OpSpec make_int8_gemm_dequant_op();

// Adds both ops, their baselines and rungs 01-03 (stage3/int8_gemm/01_tma_wgmma, 02_tma_store,
// 03_mma_sync, and the same under stage3/int8_gemm_dequant/), in the report stage3-int8-gemm.
void register_int8_gemm_kernels(Registry& registry);

}  // namespace kc::stage3
