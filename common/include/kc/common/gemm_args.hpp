// kc/common/gemm_args.hpp — what a GEMM kernel is handed: sizes, scalars and pointers.
//
// An argument header: kernels include it and nothing of the harness (no registry, no cuBLAS).
// Row-major C = alpha.A.B + beta.C; stage 1 stores B K x N, stage 3 N x K (see each op).
#pragma once

namespace kc {

template <typename TIn, typename TOut = TIn>
struct GemmArgs {
  int m = 0, n = 0, k = 0;
  float alpha = 1.f, beta = 0.f;
  const TIn* a = nullptr;  // M x K, leading dimension lda
  const TIn* b = nullptr;  // K x N (ldb >= N) or N x K (ldb >= K)
  TOut* c = nullptr;       // M x N, leading dimension ldc (>= N)
  int lda = 0, ldb = 0, ldc = 0;
};

}  // namespace kc
