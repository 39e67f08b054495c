// kc/stage3/register.hpp — the stage-3 ops and ladders, for kc-bench, the tests and the tuners.
#pragma once

#include <string>

#include "kc/common/registry.hpp"

namespace kc::stage3 {

inline constexpr const char* kHgemmOp = "hgemm_bf16";
inline constexpr const char* kBiasGeluOp = "gemm_bias_gelu_bf16";
inline constexpr const char* kReportGroup = "stage3-gemm";

// hgemm_bf16: BF16 in and out, B N x K, FP32 accumulation; baseline cublasGemmEx, COMPUTE_32F.
OpSpec make_hgemm_bf16_op();
// gemm_bias_gelu_bf16: the same GEMM followed by + bias[col] and GELU (tanh form); baseline
// cublasGemmEx followed by a separate bias+GELU kernel.
OpSpec make_gemm_bias_gelu_bf16_op();

// Shapes every rung of the ladder accepts: any M and N, K a multiple of 8 (rows of A and B are
// moved in 16-byte pieces: vector loads, cp.async and TMA all need 16-byte aligned rows).
// Returns "" or the reason a shape is refused.
std::string hgemm_shape_error(const Problem& problem);

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), on the host in double (the
// reference). The device version is gelu_tanh() in epilogue.cuh.
double gelu_tanh_reference(double x);

// Adds the stage-3 ops (hgemm_bf16, gemm_bias_gelu_bf16) and the tensor-core GEMM ladder
// (stage3/hgemm_bf16/01_wmma ... 09_tma_store, stage3/gemm_bias_gelu_bf16/10_fused_bias_gelu).
void register_kernels(Registry& registry);

}  // namespace kc::stage3
