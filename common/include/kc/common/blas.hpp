// kc/common/blas.hpp — cuBLAS and cuBLASLt, wrapped for row-major kc problems.
//
// kc stores matrices row-major; cuBLAS is column-major. A row-major M x N matrix C is the
// column-major N x M matrix C^T, and C = A.B  <=>  C^T = B^T . A^T, so every wrapper here calls
// cuBLAS with the operands swapped and m/n exchanged. Accumulation is pinned to FP32 or better:
// FP32 SGEMM runs with CUBLAS_PEDANTIC_MATH (no silent TF32), half types with CUBLAS_COMPUTE_32F.
#pragma once

#ifdef KC_KERNEL_SOURCE
#error "a kernel (rung) file includes cuBLAS: kernels include argument headers only (kc/common/gemm_args.hpp, kc/stage1/sgemm.hpp, kc/stage2/kernels.hpp, stage 3's hgemm.hpp); the registration lives in src/"
#endif

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kc/common/buffer.hpp"
#include "kc/common/dtype.hpp"

namespace kc {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

// How B is stored, row-major: K x N (the textbook C = A.B), or N x K (C = A.B^T, cuBLAS "TN",
// the layout of a PyTorch nn.Linear weight and the fastest for tensor cores).
enum class BLayout { k_by_n, n_by_k };
std::string_view b_layout_name(BLayout layout);

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

class CublasLtHandle {
 public:
  CublasLtHandle();
  ~CublasLtHandle();
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// C = alpha.A.B + beta.C in FP32. Pedantic (the default): CUBLAS_PEDANTIC_MATH, true FP32 FFMA,
// no TF32, no reduced-precision reductions. Otherwise CUBLAS_DEFAULT_MATH, which is still FP32
// (TF32 needs CUBLAS_TF32_TENSOR_OP_MATH) but lets cuBLAS pick any of its FP32 kernels.
enum class SgemmMath { pedantic, default_math };
void cublas_sgemm(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, float alpha,
                  const float* a, const float* b, BLayout b_layout, float beta, float* c,
                  SgemmMath math = SgemmMath::pedantic);

// The same in FP64: the reference for shapes too large for the CPU.
void cublas_dgemm(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, double alpha,
                  const double* a, const double* b, BLayout b_layout, double beta, double* c);

// Leading dimensions of the row-major operands, in elements: the distance from the start of one
// row to the start of the next (at least the row length; larger for a matrix that is a window
// into a wider one). 0 means dense: K for A, N (B K x N) or K (B N x K) for B, N for C.
struct GemmLeadingDims {
  std::int64_t lda = 0, ldb = 0, ldc = 0;
};

// cublasGemmEx: A and B of `ab_type` (f16, bf16), C of `c_type` (same or f32),
// CUBLAS_COMPUTE_32F, alpha/beta in FP32. Dense operands, or the leading dimensions in `lds`.
//
// Reductions: by default cuBLAS may reduce split-K partial sums in the output type (bf16/f16),
// which is not FP32 accumulation: on the H200, GemmEx's bf16 result at 4093x2049x1032 carried
// errors of several ulps. kc asks for reductions in the compute type
// (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) unless `reductions` says otherwise.
enum class GemmReductions { fp32, library_default };
void cublas_gemm_ex(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, DType ab_type,
                    DType c_type, float alpha, const void* a, const void* b, BLayout b_layout,
                    float beta, void* c, GemmLeadingDims lds = {},
                    GemmReductions reductions = GemmReductions::fp32);

// A batch of equally shaped, dense GEMMs whose operands lie at fixed distances (in elements):
// GEMM i reads A at a + i * stride_a and B at b + i * stride_b and writes C at c + i * stride_c.
// A stride of 0 reuses one operand for the whole batch.
struct GemmBatch {
  std::int64_t count = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// cublasDgemmStridedBatched: the FP64 reference of batched products (attention's Q.K^T and P.V).
void cublas_dgemm_batched(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, double alpha,
                          const double* a, const double* b, BLayout b_layout, double beta, double* c,
                          GemmBatch batch);

// cublasGemmStridedBatchedEx with cublas_gemm_ex's types and math: A and B f16 or bf16, C of
// `c_type`, CUBLAS_COMPUTE_32F, reductions in FP32 unless `reductions` says otherwise.
void cublas_gemm_ex_batched(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, DType ab_type,
                            DType c_type, float alpha, const void* a, const void* b, BLayout b_layout,
                            float beta, void* c, GemmBatch batch,
                            GemmReductions reductions = GemmReductions::fp32);

// What cuBLASLt does to alpha.A.B + beta.C before storing it.
enum class LtEpilogue {
  none,
  // + bias[col], then GELU (cuBLASLt's tanh form), in FP32, one rounding: CUBLASLT_EPILOGUE_GELU_BIAS.
  // The bias is a vector of N elements of C's type, passed to run().
  gelu_bias,
};

// How an FP8 matmul's operands are scaled (kc's row-major terms, the stage-3 FP8 GEMM's
// definitions in kc/stage3/fp8_gemm_args.hpp):
//   none        no scale operands (alpha only)
//   per_tensor  one FP32 scale for A and one for B, device pointers given to run()
//   blocks_128x128  A with one FP32 scale per 1 x 128 piece of a row, stored [ceil(K/128), M] (M
//               contiguous), and B with one per 128 x 128 block, stored [ceil(N/128), ceil(K/128)]
//               (K blocks contiguous): cuBLASLt's VEC128_32F on A and BLK128x128_32F on B (Hopper,
//               CUDA 12.9 and newer; no fast accumulation), the stage-3 FP8 GEMM's block scaling as
//               it stores it. cuBLASLt refuses a plan in its block modes
//               (CUBLAS_STATUS_INVALID_VALUE from the heuristic) until the scale pointers are set,
//               so the plan sets placeholders; run() sets the real ones.
enum class LtScaling { none, per_tensor, blocks_128x128 };

// One cuBLASLt matmul plan: descriptors and the heuristic's best algorithm chosen once, then run
// many times. FP32 accumulation (CUBLAS_COMPUTE_32F); for FP8 inputs C is bf16/f16/f32 and B
// must be N x K (the only FP8 layout cuBLASLt offers). FP8 accumulation is cuBLASLt's default,
// not its "fast accumulation" mode: partial sums are promoted to FP32. INT8 inputs (i8): exact
// s32 accumulation (CUBLAS_COMPUTE_32I), C i32, B N x K, no epilogue or scales; alpha and beta
// are then passed to cuBLASLt as s32 and must be integers.
class CublasLtGemm {
 public:
  CublasLtGemm(cublasLtHandle_t handle, GemmShape shape, DType ab_type, DType c_type,
               BLayout b_layout, LtEpilogue epilogue = LtEpilogue::none,
               std::size_t workspace_bytes = std::size_t{32} << 20, LtScaling scaling = LtScaling::none);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // `bias`: N elements of C's type, for LtEpilogue::gelu_bias (else ignored). `scale_a`,
  // `scale_b`: device FP32 scales of A and B as the plan's LtScaling says (else ignored).
  void run(float alpha, const void* a, const void* b, float beta, void* c, cudaStream_t stream,
           const void* bias = nullptr, const float* scale_a = nullptr, const float* scale_b = nullptr) const;

 private:
  void plan(GemmShape shape, DType ab_type, DType c_type, BLayout b_layout, LtEpilogue epilogue,
            std::size_t workspace_bytes, LtScaling scaling);
  void release() noexcept;

  cublasLtHandle_t handle_;
  cublasLtMatmulDesc_t operation_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  cublasLtMatmulAlgo_t algorithm_{};
  LtEpilogue epilogue_ = LtEpilogue::none;
  LtScaling scaling_ = LtScaling::none;
  bool integer_ = false;  // INT8 inputs: s32 compute and scale type
  mutable DeviceBuffer<std::byte> workspace_;
  DeviceBuffer<float> placeholder_scales_;  // blocks_128x128's scale pointers while planning
};

}  // namespace kc
