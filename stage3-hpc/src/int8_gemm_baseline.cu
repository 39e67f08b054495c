// The int8_gemm_dequant op's baseline, second half: cuBLASLt's INT8 matmul has no epilogue that
// applies a scale per row and one per column, so its s32 result is dequantized by this kernel:
// c[row][col] = bf16(float(c32[row][col]) x s_a[row] x s_b[col]), the arithmetic of the rung's
// epilogue (quant/int8/int8_gemm_kernel.cuh). Memory-bound: 4 bytes read and 2 written per
// element; two elements a thread (an 8-byte load, a 4-byte store) where N is even.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

__global__ void int8_dequantize_kernel(const std::int32_t* c32, const float* scale_a, const float* scale_b,
                                       __nv_bfloat16* c, int m, int n) {
  const std::int64_t pairs = static_cast<std::int64_t>(m) * ((n + 1) / 2);
  const int pairs_per_row = (n + 1) / 2;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < pairs;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>(i / pairs_per_row);
    const int col = 2 * static_cast<int>(i % pairs_per_row);
    const std::size_t at = static_cast<std::size_t>(row) * n + col;
    const float s = __ldg(scale_a + row);
    if (n % 2 == 0) {
      const int2 v = *reinterpret_cast<const int2*>(c32 + at);
      *reinterpret_cast<__nv_bfloat162*>(c + at) = __floats2bfloat162_rn(
          static_cast<float>(v.x) * s * __ldg(scale_b + col), static_cast<float>(v.y) * s * __ldg(scale_b + col + 1));
    } else {
      c[at] = __float2bfloat16_rn(static_cast<float>(c32[at]) * s * __ldg(scale_b + col));
      if (col + 1 < n) c[at + 1] = __float2bfloat16_rn(static_cast<float>(c32[at + 1]) * s * __ldg(scale_b + col + 1));
    }
  }
}

}  // namespace

void int8_dequantize_baseline(const std::int32_t* c32, const float* scale_a, const float* scale_b, __nv_bfloat16* c,
                              int m, int n, cudaStream_t stream) {
  const std::int64_t pairs = static_cast<std::int64_t>(m) * ((n + 1) / 2);
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((pairs + 255) / 256, std::int64_t{1} << 16));
  int8_dequantize_kernel<<<blocks, 256, 0, stream>>>(c32, scale_a, scale_b, c, m, n);
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage3
