// epilogue.cuh — turning FP32 accumulators into BF16 results in C, shared by every rung.
//
// An epilogue is a value transform (what to compute from an accumulator at (row, col)) plus a way
// to move the result to memory. The transforms are the linear combination alpha.acc + beta.C of
// BLAS and, for rung 10, + bias[col] followed by GELU. Stores here are the direct kind: each thread
// writes the elements its tensor-core fragment holds, guarded against the edges of C.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

#include "hgemm.hpp"

namespace kc::stage3 {

// alpha.acc + beta.C[row][col]. BLAS semantics: with beta == 0, C is never read (it may be NaN).
struct LinearCombination {
  float alpha = 1.f;
  float beta = 0.f;
  const bf16* c = nullptr;  // C before the kernel; read only when beta != 0
  int ldc = 0;

  __device__ float operator()(float acc, int row, int col) const {
    float value = alpha * acc;
    if (beta != 0.f) value += beta * __bfloat162float(c[static_cast<std::size_t>(row) * ldc + col]);
    return value;
  }
};

// GELU, tanh form (the one GPT-2 and many LLM MLPs use):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). tanhf, not tanh.approx: the epilogue is not
// the bottleneck, and the result then matches the double-precision reference to BF16 rounding.
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  constexpr float kCubicCoefficient = 0.044715f;
  return 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kCubicCoefficient * x * x * x)));
}

// gelu(alpha.acc + beta.C + bias[col]): the fused epilogue of rung 10.
struct BiasGelu {
  LinearCombination linear;
  const bf16* bias = nullptr;

  __device__ float operator()(float acc, int row, int col) const {
    return gelu_tanh(linear(acc, row, col) + __bfloat162float(bias[col]));
  }
};

// Writes the results for C[row][col] and C[row][col + 1] (col is even), skipping what lies
// outside M x N. A pair is one 4-byte store when N is even; with N odd, rows start at odd element
// offsets, so the pair is stored as two halves.
template <class Transform>
__device__ __forceinline__ void store_pair(bf16* c, int m, int n, int row, int col, float acc0,
                                           float acc1, const Transform& transform) {
  if (row >= m || col >= n) return;
  bf16* destination = c + static_cast<std::size_t>(row) * n + col;
  const float v0 = transform(acc0, row, col);
  if (col + 1 >= n) {
    *destination = __float2bfloat16_rn(v0);
    return;
  }
  const float v1 = transform(acc1, row, col + 1);
  if (n % 2 == 0) {
    *reinterpret_cast<__nv_bfloat162*>(destination) = __floats2bfloat162_rn(v0, v1);
  } else {
    destination[0] = __float2bfloat16_rn(v0);
    destination[1] = __float2bfloat16_rn(v1);
  }
}

// One 16 x 8 accumulator block of an mma.sync m16n8 (and of each 8-column slice of a WGMMA m64
// warp quarter): lane l holds rows l/4 and l/4 + 8, columns 2(l%4) and 2(l%4) + 1, as
// {c0, c1} (upper row) and {c2, c3} (lower row).
template <class Transform>
__device__ __forceinline__ void store_fragment_16x8(bf16* c, int m, int n, int row0, int col0,
                                                    const float* fragment,
                                                    const Transform& transform) {
  const int lane = threadIdx.x % 32;
  const int row = row0 + lane / 4;
  const int col = col0 + 2 * (lane % 4);
  store_pair(c, m, n, row, col, fragment[0], fragment[1], transform);
  store_pair(c, m, n, row + 8, col, fragment[2], fragment[3], transform);
}

__host__ __device__ inline LinearCombination linear_combination(const HgemmArgs& args) {
  return {args.alpha, args.beta, args.c, args.ldc};
}

}  // namespace kc::stage3
