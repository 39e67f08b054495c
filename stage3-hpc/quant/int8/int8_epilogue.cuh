// int8_epilogue.cuh — what the INT8 GEMM's kernels (rungs 01-02 on WGMMA, rung 03 on mma.sync)
// share after the K loop: which output they write, and the stores of one 16 x 8 fragment of s32
// sums, as they are or dequantized to bf16. Both instructions leave a warp's sums in the same layout — a thread holds rows lane / 4 and
// lane / 4 + 8 of each 16 x 8 block, two adjacent columns 2 (lane % 4) in each — so the same
// stores serve both.
#pragma once

#include <cstddef>
#include <cstdint>

#include "epilogue.cuh"

namespace kc::stage3 {

// The epilogue's output.
enum class Int8Output { s32, dequantized_bf16 };

// The dequantizing epilogue's column factors, in the shape gemm/epilogue.cuh's activations have:
// the pair s_B[col], s_B[col + 1] of one fragment column pair, loaded by the kernel before its
// stores and applied to both of its rows. (The row factor s_A[row] is applied before, to the
// converted sums.)
struct ScalePair {
  float2 scale;
  struct ColumnPair {};
  __device__ ColumnPair column_pair(int /*col*/, int /*n*/) const { return {}; }
  __device__ float2 operator()(float2 value, ColumnPair /*unused*/) const {
    return make_float2(value.x * scale.x, value.y * scale.y);
  }
};

// The s32 results of one 16 x 8 fragment (rows row0 + lane / 4 and + 8): pairs as one 8-byte store
// where N is even (a pair is then 8-byte aligned), else one value at a time.
__device__ __forceinline__ void store_s32_fragment(std::int32_t* c, int m, int n, int row0, int col0,
                                                   const std::int32_t* fragment) {
  const int lane = threadIdx.x % 32;
  const int col = col0 + 2 * (lane % 4);
  if (col >= n) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + lane / 4 + 8 * half;
    if (row >= m) continue;
    std::int32_t* out = c + static_cast<std::size_t>(row) * n + col;
    if (n % 2 == 0) {
      *reinterpret_cast<int2*>(out) = make_int2(fragment[2 * half], fragment[2 * half + 1]);
    } else {
      out[0] = fragment[2 * half];
      if (col + 1 < n) out[1] = fragment[2 * half + 1];
    }
  }
}

// The dequantized results of one 16 x 8 fragment: the s32 sums converted to FP32, the upper row's
// (lane / 4) times its row scale `top`, the lower row's times `bottom`, then the pair's column
// scales, one rounding to bf16, stored in pairs by the bf16 ladder's store_fragment_16x8.
__device__ __forceinline__ void store_dequantized_fragment(bf16* c, int m, int n, int row0, int col0,
                                                           const std::int32_t* sums, float top, float bottom,
                                                           float2 column_scales) {
  const float fragment[4] = {static_cast<float>(sums[0]) * top, static_cast<float>(sums[1]) * top,
                             static_cast<float>(sums[2]) * bottom, static_cast<float>(sums[3]) * bottom};
  store_fragment_16x8(c, m, n, row0, col0, fragment, LinearCombination{1.f, 0.f, nullptr, n},
                      ScalePair{column_scales});
}

}  // namespace kc::stage3
