#include "kc/common/blas.hpp"

#include <vector>

#include "kc/common/blas_grouped.hpp"
#include "kc/common/error.hpp"

namespace kc {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f64: return CUDA_R_64F;
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f8e4m3: return CUDA_R_8F_E4M3;
    case DType::f8e5m2: return CUDA_R_8F_E5M2;
    case DType::i8: return CUDA_R_8I;
    case DType::i32: return CUDA_R_32I;
    default: break;
  }
  throw Error(fmt::format("cuBLAS has no data type for kc dtype {}", dtype_name(t)));
}

void require_gemm_shape(GemmShape s) {
  require(s.m >= 1 && s.n >= 1 && s.k >= 1, "GEMM needs M, N, K >= 1 (got {}x{}x{})", s.m, s.n, s.k);
  require(s.m <= INT32_MAX && s.n <= INT32_MAX && s.k <= INT32_MAX,
          "cuBLAS takes 32-bit dimensions; {}x{}x{} is too large", s.m, s.n, s.k);
}

// Column-major view of the row-major product (see blas.hpp): the first cuBLAS operand is our B.
struct ColumnMajorCall {
  cublasOperation_t op_b;  // applied to our B, cuBLAS's "A"
  int m, n, k;             // cuBLAS's m (our N), n (our M), k
  int ld_b, ld_a, ld_c;
};

// A leading dimension of 0 means dense (`row_length`); any other must hold a row and fit cuBLAS's int.
int leading_dimension(std::int64_t ld, std::int64_t row_length, const char* name) {
  if (ld == 0) return static_cast<int>(row_length);
  require(ld >= row_length,
          "{} = {} is shorter than a row ({} elements): a leading dimension is the distance "
          "between the starts of two rows, at least the row length",
          name, ld, row_length);
  require(ld <= INT32_MAX, "cuBLAS takes 32-bit leading dimensions; {} = {} is too large", name, ld);
  return static_cast<int>(ld);
}

ColumnMajorCall column_major(GemmShape s, BLayout b_layout, GemmLeadingDims lds = {}) {
  ColumnMajorCall call{};
  call.m = static_cast<int>(s.n);
  call.n = static_cast<int>(s.m);
  call.k = static_cast<int>(s.k);
  call.op_b = b_layout == BLayout::k_by_n ? CUBLAS_OP_N : CUBLAS_OP_T;
  call.ld_b = leading_dimension(lds.ldb, b_layout == BLayout::k_by_n ? s.n : s.k, "ldb");
  call.ld_a = leading_dimension(lds.lda, s.k, "lda");
  call.ld_c = leading_dimension(lds.ldc, s.n, "ldc");
  return call;
}

// Restores the handle's math mode on scope exit, so one wrapper cannot change another's math.
class ScopedMathMode {
 public:
  ScopedMathMode(cublasHandle_t handle, cublasMath_t mode) : handle_(handle) {
    KC_CUBLAS_CHECK(cublasGetMathMode(handle_, &previous_));
    KC_CUBLAS_CHECK(cublasSetMathMode(handle_, mode));
  }
  ~ScopedMathMode() { (void)cublasSetMathMode(handle_, previous_); }
  ScopedMathMode(const ScopedMathMode&) = delete;
  ScopedMathMode& operator=(const ScopedMathMode&) = delete;

 private:
  cublasHandle_t handle_;
  cublasMath_t previous_ = CUBLAS_DEFAULT_MATH;
};

// GemmEx's math: default (tensor cores allowed), split-K reductions in FP32 unless asked otherwise.
cublasMath_t math_mode(GemmReductions reductions) {
  return static_cast<cublasMath_t>(reductions == GemmReductions::fp32
                                       ? CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION
                                       : CUBLAS_DEFAULT_MATH);
}

}  // namespace

std::string_view b_layout_name(BLayout layout) {
  return layout == BLayout::k_by_n ? "B K×N" : "B N×K";
}

CublasHandle::CublasHandle() { KC_CUBLAS_CHECK(cublasCreate(&handle_)); }
CublasHandle::~CublasHandle() { (void)cublasDestroy(handle_); }
CublasLtHandle::CublasLtHandle() { KC_CUBLAS_CHECK(cublasLtCreate(&handle_)); }
CublasLtHandle::~CublasLtHandle() { (void)cublasLtDestroy(handle_); }

void cublas_sgemm(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, float alpha,
                  const float* a, const float* b, BLayout b_layout, float beta, float* c,
                  SgemmMath math) {
  require_gemm_shape(shape);
  const ColumnMajorCall call = column_major(shape, b_layout);
  ScopedMathMode mode(handle, math == SgemmMath::pedantic ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH);
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasSgemm(handle, call.op_b, CUBLAS_OP_N, call.m, call.n, call.k, &alpha, b,
                              call.ld_b, a, call.ld_a, &beta, c, call.ld_c));
}

void cublas_dgemm(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, double alpha,
                  const double* a, const double* b, BLayout b_layout, double beta, double* c) {
  require_gemm_shape(shape);
  const ColumnMajorCall call = column_major(shape, b_layout);
  ScopedMathMode pedantic(handle, CUBLAS_PEDANTIC_MATH);
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasDgemm(handle, call.op_b, CUBLAS_OP_N, call.m, call.n, call.k, &alpha, b,
                              call.ld_b, a, call.ld_a, &beta, c, call.ld_c));
}

void cublas_gemm_ex(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, DType ab_type,
                    DType c_type, float alpha, const void* a, const void* b, BLayout b_layout,
                    float beta, void* c, GemmLeadingDims lds, GemmReductions reductions) {
  require_gemm_shape(shape);
  require(ab_type == DType::f16 || ab_type == DType::bf16,
          "cublas_gemm_ex: inputs must be f16 or bf16, not {}", dtype_name(ab_type));
  const ColumnMajorCall call = column_major(shape, b_layout, lds);
  ScopedMathMode math(handle, math_mode(reductions));
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasGemmEx(handle, call.op_b, CUBLAS_OP_N, call.m, call.n, call.k, &alpha, b,
                               cuda_type(ab_type), call.ld_b, a, cuda_type(ab_type), call.ld_a,
                               &beta, c, cuda_type(c_type), call.ld_c, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT));
}

namespace {

void require_batch(const GemmBatch& batch) {
  require(batch.count >= 1 && batch.count <= INT32_MAX, "a GEMM batch needs 1 to 2^31-1 products (got {})",
          batch.count);
  require(batch.stride_a >= 0 && batch.stride_b >= 0 && batch.stride_c > 0,
          "GEMM batch strides must be >= 0, and C's > 0 so that no two products write one C (got {}, {}, {})",
          batch.stride_a, batch.stride_b, batch.stride_c);
}

}  // namespace

void cublas_dgemm_batched(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, double alpha,
                          const double* a, const double* b, BLayout b_layout, double beta, double* c,
                          GemmBatch batch) {
  require_gemm_shape(shape);
  require_batch(batch);
  const ColumnMajorCall call = column_major(shape, b_layout);
  ScopedMathMode pedantic(handle, CUBLAS_PEDANTIC_MATH);
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, call.op_b, CUBLAS_OP_N, call.m, call.n, call.k,
                                            &alpha, b, call.ld_b, batch.stride_b, a, call.ld_a,
                                            batch.stride_a, &beta, c, call.ld_c, batch.stride_c,
                                            static_cast<int>(batch.count)));
}

void cublas_gemm_ex_batched(cublasHandle_t handle, cudaStream_t stream, GemmShape shape, DType ab_type,
                            DType c_type, float alpha, const void* a, const void* b, BLayout b_layout,
                            float beta, void* c, GemmBatch batch, GemmReductions reductions) {
  require_gemm_shape(shape);
  require_batch(batch);
  require(ab_type == DType::f16 || ab_type == DType::bf16,
          "cublas_gemm_ex_batched: inputs must be f16 or bf16, not {}", dtype_name(ab_type));
  const ColumnMajorCall call = column_major(shape, b_layout);
  ScopedMathMode math(handle, math_mode(reductions));
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, call.op_b, CUBLAS_OP_N, call.m, call.n, call.k, &alpha, b, cuda_type(ab_type),
      call.ld_b, batch.stride_b, a, cuda_type(ab_type), call.ld_a, batch.stride_a, &beta, c,
      cuda_type(c_type), call.ld_c, batch.stride_c, static_cast<int>(batch.count),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void cublas_gemm_grouped_ex(cublasHandle_t handle, cudaStream_t stream, const GemmShape* shapes, int count,
                            DType ab_type, DType c_type, float alpha, const void* const* a,
                            const void* const* b, BLayout b_layout, float beta, void* const* c,
                            GemmReductions reductions) {
  require(count >= 1, "cublas_gemm_grouped_ex needs at least one product (got {})", count);
  require(ab_type == DType::f16 || ab_type == DType::bf16,
          "cublas_gemm_grouped_ex: inputs must be f16 or bf16, not {}", dtype_name(ab_type));
  const auto size = static_cast<std::size_t>(count);
  // Per group (here: per product) on the host, in cuBLAS's column-major terms (column_major).
  std::vector<cublasOperation_t> op_first(size), op_second(size, CUBLAS_OP_N);
  std::vector<int> m(size), n(size), k(size), ld_first(size), ld_second(size), ld_c(size);
  const std::vector<float> alphas(size, alpha), betas(size, beta);
  const std::vector<int> group_sizes(size, 1);
  for (std::size_t i = 0; i < size; ++i) {
    require_gemm_shape(shapes[i]);
    const ColumnMajorCall call = column_major(shapes[i], b_layout);
    op_first[i] = call.op_b;
    m[i] = call.m;
    n[i] = call.n;
    k[i] = call.k;
    ld_first[i] = call.ld_b;
    ld_second[i] = call.ld_a;
    ld_c[i] = call.ld_c;
  }
  ScopedMathMode math(handle, math_mode(reductions));
  KC_CUBLAS_CHECK(cublasSetStream(handle, stream));
  KC_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(handle, op_first.data(), op_second.data(), m.data(), n.data(), k.data(),
                                             alphas.data(), b, cuda_type(ab_type), ld_first.data(), a,
                                             cuda_type(ab_type), ld_second.data(), betas.data(), c, cuda_type(c_type),
                                             ld_c.data(), count, group_sizes.data(), CUBLAS_COMPUTE_32F));
}

CublasLtGemm::CublasLtGemm(cublasLtHandle_t handle, GemmShape shape, DType ab_type, DType c_type,
                           BLayout b_layout, LtEpilogue epilogue, std::size_t workspace_bytes,
                           LtScaling scaling)
    : handle_(handle), epilogue_(epilogue), scaling_(scaling), workspace_(workspace_bytes) {
  try {
    plan(shape, ab_type, c_type, b_layout, epilogue, workspace_bytes, scaling);
  } catch (...) {
    release();  // the destructor does not run for a half-built object
    throw;
  }
}

void CublasLtGemm::plan(GemmShape shape, DType ab_type, DType c_type, BLayout b_layout,
                        LtEpilogue epilogue, std::size_t workspace_bytes, LtScaling scaling) {
  require_gemm_shape(shape);
  const bool fp8 = ab_type == DType::f8e4m3 || ab_type == DType::f8e5m2;
  integer_ = ab_type == DType::i8;
  require(!(fp8 || integer_) || b_layout == BLayout::n_by_k,
          "cuBLASLt {} matmul needs B stored N x K (\"TN\"); got {}", dtype_name(ab_type), b_layout_name(b_layout));
  require(scaling == LtScaling::none || fp8, "cuBLASLt scale operands are for FP8 inputs, not {}",
          dtype_name(ab_type));
  require(!integer_ || (c_type == DType::i32 && epilogue == LtEpilogue::none),
          "cuBLASLt's INT8 matmul here writes s32 with no epilogue (got {} output)", dtype_name(c_type));
  const ColumnMajorCall call = column_major(shape, b_layout);
  if (integer_)
    KC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&operation_, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  else
    KC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&operation_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_n = CUBLAS_OP_N;
  KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_TRANSA,
                                                 &call.op_b, sizeof(call.op_b)));
  KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_TRANSB, &op_n,
                                                 sizeof(op_n)));
  if (epilogue == LtEpilogue::gelu_bias) {
    // The bias runs along cuBLAS's m, which is our N (column-major view of row-major C).
    const cublasLtEpilogue_t gelu_bias = CUBLASLT_EPILOGUE_GELU_BIAS;
    const cudaDataType_t bias_type = cuda_type(c_type);
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                   &gelu_bias, sizeof(gelu_bias)));
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                   &bias_type, sizeof(bias_type)));
  }
  if (scaling == LtScaling::blocks_128x128) {
    // Swapped like the operands: cuBLASLt's A is our B (128 x 128 blocks), its B our A (1 x 128).
    const cublasLtMatmulMatrixScale_t ours_a = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    const cublasLtMatmulMatrixScale_t ours_b = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ours_b,
                                                   sizeof(ours_b)));
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &ours_a,
                                                   sizeof(ours_a)));
    // Without scale pointers the heuristic answers CUBLAS_STATUS_INVALID_VALUE in these modes;
    // any device addresses do for planning, and run() sets the call's own.
    placeholder_scales_ = DeviceBuffer<float>(4);
    const float* placeholder = placeholder_scales_.data();
    for (const cublasLtMatmulDescAttributes_t pointer : {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER})
      KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, pointer, &placeholder, sizeof(placeholder)));
  }
  // cuBLASLt's "A" is our B (stored rows x cols in column-major terms), "B" is our A.
  const std::uint64_t b_rows = call.op_b == CUBLAS_OP_N ? call.m : call.k;
  const std::uint64_t b_cols = call.op_b == CUBLAS_OP_N ? call.k : call.m;
  KC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_a_, cuda_type(ab_type), b_rows, b_cols, call.ld_b));
  KC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_b_, cuda_type(ab_type), call.k, call.n, call.ld_a));
  KC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_c_, cuda_type(c_type), call.m, call.n, call.ld_c));

  cublasLtMatmulPreference_t preference = nullptr;
  KC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  KC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, operation_, layout_a_, layout_b_, layout_c_, layout_c_,
                                     preference, 1, &heuristic, &found);
  (void)cublasLtMatmulPreferenceDestroy(preference);
  KC_CUBLAS_CHECK(status);
  require(found > 0, "cuBLASLt found no algorithm for {}x{}x{} {} -> {} ({})", shape.m, shape.n,
          shape.k, dtype_name(ab_type), dtype_name(c_type), b_layout_name(b_layout));
  algorithm_ = heuristic.algo;
}

CublasLtGemm::~CublasLtGemm() { release(); }

void CublasLtGemm::release() noexcept {
  if (layout_c_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_c_);
  if (layout_b_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_b_);
  if (layout_a_ != nullptr) (void)cublasLtMatrixLayoutDestroy(layout_a_);
  if (operation_ != nullptr) (void)cublasLtMatmulDescDestroy(operation_);
  layout_a_ = layout_b_ = layout_c_ = nullptr;
  operation_ = nullptr;
}

void CublasLtGemm::run(float alpha, const void* a, const void* b, float beta, void* c,
                       cudaStream_t stream, const void* bias, const float* scale_a,
                       const float* scale_b) const {
  if (scaling_ != LtScaling::none) {
    require(scale_a != nullptr && scale_b != nullptr, "cuBLASLt FP8 matmul: a scale pointer is null");
    // Swapped like the operands: cuBLASLt's A is our B.
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_b,
                                                   sizeof(scale_b)));
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_a,
                                                   sizeof(scale_a)));
  }
  if (epilogue_ == LtEpilogue::gelu_bias) {
    require(bias != nullptr, "cuBLASLt GELU_BIAS epilogue: the bias pointer is null");
    KC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &bias, sizeof(bias)));
  }
  // INT8: alpha and beta are s32 (the scale type of CUBLAS_COMPUTE_32I).
  const std::int32_t alpha_s32 = static_cast<std::int32_t>(alpha), beta_s32 = static_cast<std::int32_t>(beta);
  require(!integer_ || (static_cast<float>(alpha_s32) == alpha && static_cast<float>(beta_s32) == beta),
          "cuBLASLt INT8 matmul: alpha and beta must be integers (got {}, {})", alpha, beta);
  const void* alpha_pointer = integer_ ? static_cast<const void*>(&alpha_s32) : &alpha;
  const void* beta_pointer = integer_ ? static_cast<const void*>(&beta_s32) : &beta;
  KC_CUBLAS_CHECK(cublasLtMatmul(handle_, operation_, alpha_pointer, b, layout_a_, a, layout_b_, beta_pointer, c,
                                 layout_c_, c, layout_c_, &algorithm_, workspace_.data(),
                                 workspace_.bytes(), stream));
}

}  // namespace kc
