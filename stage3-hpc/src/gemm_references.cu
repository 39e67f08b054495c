// The fused op's device reference: + bias and GELU applied in FP64 to cuBLAS's FP64 product.
#include "kc/common/error.hpp"
#include "kc/core/gelu.hpp"
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
