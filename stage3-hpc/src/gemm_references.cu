// Device halves of stage 3's GEMM references: the fused op's + bias and GELU applied in FP64 to
// cuBLAS's FP64 product, and the FP8 GEMM's operands times their scales; and the FP8 baseline's
// weight scales in the layout cuBLASLt reads.
#include "kc/common/error.hpp"
#include "kc/core/gelu.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

// The reference GELU (kc/core/gelu.hpp, in double), evaluated on the device.
__global__ void bias_gelu_reference_kernel(double* c, const double* bias, std::int64_t m, std::int64_t n) {
  const std::int64_t count = m * n;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    c[i] = core::gelu_tanh<core::ReferenceMath>(c[i] + bias[i % n]);
}

}  // namespace

void bias_gelu_reference_inplace(double* c, const double* bias, std::int64_t m, std::int64_t n,
                                 cudaStream_t stream) {
  bias_gelu_reference_kernel<<<1024, 256, 0, stream>>>(c, bias, m, n);
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage3

// The FP8 GEMM's device reference: its operands, converted to double, times their scales.
namespace kc::stage3 {
namespace {

__global__ void fp8_dequantize_reference_kernel(double* values, std::int64_t rows, std::int64_t cols,
                                                const float* scales, Fp8ScaleMap map) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    values[i] *= static_cast<double>(scales[map(i / cols, i % cols)]);
}

}  // namespace

void fp8_dequantize_reference(double* values, std::int64_t rows, std::int64_t cols, const float* scales,
                              Fp8ScaleMap map, cudaStream_t stream) {
  fp8_dequantize_reference_kernel<<<1024, 256, 0, stream>>>(values, rows, cols, scales, map);
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage3
