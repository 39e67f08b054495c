// The fused op's device reference: + bias and GELU applied in FP64 to cuBLAS's FP64 product.
#include "kc/common/error.hpp"
#include "kc/stage3/register.hpp"

namespace kc::stage3 {
namespace {

// gelu_tanh_reference's formula, evaluated on the device in double.
__global__ void bias_gelu_reference_kernel(double* c, const double* bias, std::int64_t m, std::int64_t n) {
  const double sqrt_2_over_pi = 0.79788456080286535588;  // sqrt(2 / pi)
  const std::int64_t count = m * n;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double x = c[i] + bias[i % n];
    const double u = sqrt_2_over_pi * (x + 0.044715 * x * x * x);
    c[i] = x / (1.0 + exp(-2.0 * u));
  }
}

}  // namespace

void bias_gelu_reference_inplace(double* c, const double* bias, std::int64_t m, std::int64_t n,
                                 cudaStream_t stream) {
  bias_gelu_reference_kernel<<<1024, 256, 0, stream>>>(c, bias, m, n);
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage3
