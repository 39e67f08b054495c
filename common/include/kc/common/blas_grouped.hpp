// kc/common/blas_grouped.hpp — cuBLAS's grouped GEMM, wrapped for row-major kc problems as the
// calls of blas.hpp are (operands swapped for column-major cuBLAS, FP32 accumulation pinned).
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes cuBLAS: kernels include argument headers only; the registration lives in src/"
#endif

#include "kc/common/blas.hpp"

namespace kc {

// cublasGemmGroupedBatchedEx with cublas_gemm_ex's types and math: `count` products of their own
// shapes in one call, C_i = alpha.A_i.B_i + beta.C_i (B_i as `b_layout` says), each dense, each a
// group of one. `shapes` (count of them) on the host; `a`, `b` and `c`: arrays of count operand
// pointers in device memory, where cuBLAS reads them (a mixture-of-experts layer's baseline).
void cublas_gemm_grouped_ex(cublasHandle_t handle, cudaStream_t stream, const GemmShape* shapes, int count,
                            DType ab_type, DType c_type, float alpha, const void* const* a,
                            const void* const* b, BLayout b_layout, float beta, void* const* c,
                            GemmReductions reductions = GemmReductions::fp32);

}  // namespace kc
