// sgemm_common.cuh — the two small things every SGEMM rung shares.
#pragma once

#include <cuda_runtime.h>

namespace kc::stage1 {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// C = alpha * acc + beta * C, with the BLAS rule that C is not read when beta == 0: C may then
// hold anything, NaN included, and must not leak into the result.
__device__ __forceinline__ void store_result(float* c, float acc, float alpha, float beta) {
  *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
}

}  // namespace kc::stage1
