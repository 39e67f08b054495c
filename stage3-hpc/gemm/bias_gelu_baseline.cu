// The second half of the unfused baseline of rung 10: after cuBLAS has written C = A.B^T, one
// memory-bound pass reads C and the bias and writes gelu(C + bias) back. It is a fair peer, not a
// straw man: 16-byte loads and stores (8 bf16) whenever rows allow it, a grid-stride loop sized to
// the GPU. Its cost is one extra read and write of C, which the fused epilogue avoids.
#include <cuda_bf16.h>

#include <cstdint>

#include "epilogue.cuh"
#include "hgemm.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

constexpr int kThreads = 256;
constexpr int kVector = 8;  // bf16 per 16-byte access

union Bf16x8 {
  uint4 raw;
  __nv_bfloat162 pairs[kVector / 2];
};

// Rows of C are a whole number of 16-byte vectors (N % 8 == 0).
__global__ void bias_gelu_vector_kernel(bf16* c, const bf16* bias, std::int64_t vectors,
                                        int vectors_per_row) {
  for (std::int64_t v = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int col_vector = static_cast<int>(v % vectors_per_row);
    Bf16x8 values, biases;
    values.raw = reinterpret_cast<const uint4*>(c)[v];
    biases.raw = reinterpret_cast<const uint4*>(bias)[col_vector];
#pragma unroll
    for (int i = 0; i < kVector / 2; ++i) {
      const float2 x = __bfloat1622float2(values.pairs[i]);
      const float2 b = __bfloat1622float2(biases.pairs[i]);
      values.pairs[i] = __floats2bfloat162_rn(gelu_tanh(x.x + b.x), gelu_tanh(x.y + b.y));
    }
    reinterpret_cast<uint4*>(c)[v] = values.raw;
  }
}

__global__ void bias_gelu_scalar_kernel(bf16* c, const bf16* bias, std::int64_t count, int n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = __bfloat162float(c[i]) + __bfloat162float(bias[i % n]);
    c[i] = __float2bfloat16_rn(gelu_tanh(x));
  }
}

int grid_for(std::int64_t work_items) {
  int device = 0, sm_count = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  constexpr int kBlocksPerSm = 8;  // 2048 threads per SM: full occupancy for a streaming kernel
  const std::int64_t needed = (work_items + kThreads - 1) / kThreads;
  return static_cast<int>(needed < std::int64_t{sm_count} * kBlocksPerSm ? needed
                                                                        : std::int64_t{sm_count} * kBlocksPerSm);
}

}  // namespace

void bias_gelu_inplace(bf16* c, const bf16* bias, int m, int n, cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(m) * n;
  if (n % kVector == 0) {
    const std::int64_t vectors = count / kVector;
    bias_gelu_vector_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(c, bias, vectors, n / kVector);
  } else {
    bias_gelu_scalar_kernel<<<grid_for(count), kThreads, 0, stream>>>(c, bias, count, n);
  }
  KC_CHECK_LAUNCH();
}

}  // namespace kc::stage3
