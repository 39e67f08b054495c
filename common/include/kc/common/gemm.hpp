// kc/common/gemm.hpp — GEMM as a kc op: C = alpha.A.B + beta.C, row-major.
//
// One description serves every GEMM flavour kc measures (FP32 SGEMM in stage 1, BF16/FP16
// tensor-core GEMM in stage 3), through the op builder (op_builder.hpp): operands, the
// double-precision reference (CPU for small problems, cuBLAS FP64 on the GPU for large ones), the
// accuracy (one rounding of C, K terms), the FLOP/byte count and the cuBLAS baseline.
// BLAS semantics: when beta == 0, C is not read (it holds NaN), so kernels must not compute
// beta * C unconditionally.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kc/common/blas.hpp"
#include "kc/common/gemm_args.hpp"
#include "kc/common/op_builder.hpp"

namespace kc {

struct GemmOpConfig {
  std::string name;                           // "sgemm"
  std::vector<DType> dtypes = {DType::f32};   // of A, B and C: the problem's dtype
  BLayout b_layout = BLayout::k_by_n;
  MathUnit math = MathUnit::fp32_cuda_core;   // the unit kernels of this op use
  std::vector<ProblemSpec> bench;             // empty: the default GEMM shapes
  std::vector<ProblemSpec> conformance;       // empty: the default odd shapes
};

// The op's description, for ops that extend it (stage 3's fused bias + GELU), and the op.
// Baseline: cublasSgemm (pedantic FP32) for f32, cublasGemmEx (CUBLAS_COMPUTE_32F) for f16/bf16.
OpConfig gemm_op_config(const GemmOpConfig& config);
OpSpec make_gemm_op(const GemmOpConfig& config);

// The parameters of every GEMM op: alpha (default 1) and beta (default 0).
std::vector<ParamSpec> gemm_params();

// The square and non-square shapes kc-bench times by default, and the odd shapes
// (1, 17, 127, 1000, 4093 in every dimension, M != N != K) the conformance tests check, plus
// alpha/beta cases.
std::vector<ProblemSpec> default_gemm_bench_problems();
std::vector<ProblemSpec> default_gemm_conformance_problems();

GemmShape gemm_shape(const Problem& problem);

// What a GEMM-like op without beta (C = A.B^T written, never read) shares: the reference's work
// (M N K multiply-adds), the accuracy (K products summed in FP32, one rounding to the output type)
// and the FLOPs (2 M N K), all from the problem's GEMM shape as `shape_of` gives it.
void set_gemm_accounting(OpConfig& op, std::function<GemmShape(const Problem&)> shape_of);

// "" when A (M x K), B (K x N) and C (M x N) each hold at most 2^31 - 1 elements, the 32-bit
// indexing kc kernels use; otherwise a sentence that starts with `what` (the problem as the op
// names it) and says so.
std::string gemm_index_limit_error(GemmShape shape, std::string_view what);

// A problem of GEMM op `op` (tests and tools): dims M x N x K, the dtype, alpha and beta.
Problem gemm_problem(std::string op, Shape dims, DType dtype, double alpha = 1.0, double beta = 0.0);

// Row-major reference in double: C = alpha.A.B + beta.C_in. `c_in` is not read when beta == 0
// (pass nullptr). A is M x K; B is K x N or N x K per `b_layout`; C is M x N.
void gemm_reference(GemmShape shape, double alpha, const double* a, const double* b,
                    BLayout b_layout, double beta, const double* c_in, double* c_out);

// What a GEMM kernel needs, pulled out of the operands with their types checked.
template <typename TIn, typename TOut = TIn>
GemmArgs<TIn, TOut> gemm_args(const Problem& problem, Operands& operands, BLayout b_layout) {
  const GemmShape s = gemm_shape(problem);
  GemmArgs<TIn, TOut> args;
  args.m = static_cast<int>(s.m);
  args.n = static_cast<int>(s.n);
  args.k = static_cast<int>(s.k);
  args.alpha = static_cast<float>(problem.param("alpha"));
  args.beta = static_cast<float>(problem.param("beta"));
  args.a = operands["A"].data<TIn>();
  args.b = operands["B"].data<TIn>();
  args.c = operands["C"].data<TOut>();
  args.lda = args.k;
  args.ldb = b_layout == BLayout::k_by_n ? args.n : args.k;
  args.ldc = args.n;
  return args;
}

}  // namespace kc
