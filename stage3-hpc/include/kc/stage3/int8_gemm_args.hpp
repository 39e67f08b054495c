// kc/stage3/int8_gemm_args.hpp — the arguments of the INT8 GEMM and one launch per rung. An
// argument header: the rung files include it and nothing of the harness (kc/stage3/int8_gemm.hpp
// defines the two ops).
//
// A [M, K] and B [N, K] signed 8-bit integers, both K-contiguous (B stored N x K, the layout of an
// nn.Linear weight and the only one integer tensor cores read), their products summed exactly in
// 32-bit integers. Two outputs, one per op:
//
//   int8_gemm          C32 [M, N] s32 = A . B^T, exact (the raw product, what cuBLASLt's INT8
//                      matmul computes).
//   int8_gemm_dequant  C [M, N] bf16 = s_A[m] s_B[n] (A . B^T)[m, n]: the product dequantized in
//                      the epilogue, s_A one FP32 scale per row of A (per token, as SmoothQuant and
//                      LLM.int8() quantize activations), s_B one per row of B (per output channel
//                      of the weight). The s32 sum is converted to FP32 (exact below 2^24 in
//                      magnitude, rounded once above), multiplied by the two scales and rounded to
//                      bf16.
//
// Exactness needs the sums to fit in 32 bits: K <= kInt8MaxK (every product at most 128 x 128 in
// magnitude). K % 16 == 0: TMA moves rows of A and B in 16-byte pieces.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kc::stage3 {

using bf16 = __nv_bfloat16;

inline constexpr int kInt8KMultiple = 16;
inline constexpr int kInt8MaxK = 2147483647 / (128 * 128);  // 131071: |sum| < 2^31 for any inputs

struct Int8GemmArgs {
  int m = 0, n = 0, k = 0;
  const std::int8_t* a = nullptr;  // [M, K]
  const std::int8_t* b = nullptr;  // [N, K]
  // Exactly one output: c32 (int8_gemm) or c with the scales (int8_gemm_dequant).
  std::int32_t* c32 = nullptr;     // [M, N]
  bf16* c = nullptr;               // [M, N]
  const float* scale_a = nullptr;  // [M]
  const float* scale_b = nullptr;  // [N]
};

// What every rung's launch checks before any CUDA call (src/int8_gemm_op.cpp): a non-empty
// problem, K % 16 == 0 and K <= kInt8MaxK, A and B present and 16-byte aligned (their rows are
// moved in 16-byte pieces, by TMA or cp.async), exactly one output, and both scales with the bf16
// one. Throws kc::Error naming the rule.
void check_int8_gemm_args(const Int8GemmArgs& args);

class HopperLaunchCache;  // the tensor maps and launch facts of the Hopper kernels (arch/sm90)

// Rung 01: TMA + WGMMA m64n256k32 s8 -> s32, a producer warp and two consumer warpgroups,
// persistent CTAs over 128 x 256 tiles (the bf16 ladder's rung 07 with one-byte operands); the
// epilogue stores s32, or dequantizes to bf16 with the row and column scales. sm_90a.
void int8_gemm_01_tma_wgmma(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 02: rung 01 with the epilogue through shared memory and TMA stores (passes of two 64-row
// boxes of 128 bytes per consumer), for both outputs.
void int8_gemm_02_tma_store(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 04: rung 01 with each consumer warpgroup on 128 x 128 tiles of its own, the two taking
// alternate tiles (one's epilogue under the other's WGMMAs). sm_90a.
void int8_gemm_04_ping_pong(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache);

// Rung 03, for sm_80 and later: the bf16 ladder's rung 03 kernel (a three-stage cp.async pipeline,
// ldmatrix, mma.sync) on the s8 bytes with mma.sync m16n8k32 s8 -> s32, 128 x 256 block tiles of
// 2 x 4 warps; the s32 or the dequantizing epilogue from the fragments. A and B 16-byte aligned.
void int8_gemm_03_mma_sync(const Int8GemmArgs& args, cudaStream_t stream);

// What the negative controls get wrong on purpose (tests/negative_controls): a rung's kernel with
// one flaw each. Not a rung.
enum class Int8Flaw {
  none,
  k_step_dropped,  // the last 128-deep K step is never multiplied (a K tail dropped)
  scales_swapped,  // dequantize: row m takes s_B's m-th scale and column n s_A's n-th (clamped)
  s32_box_column_halved,  // rung 02, s32 out: a box's TMA column given in s32 columns, not in the
                          // two-byte elements the map counts (boxes land at half their column)
  fragment_rows_share_scale,  // rung 03, dequantize: rows r + 8 of each m16n8 fragment take row r's
                              // scale s_A[r]
};
// Runs the kernel of the rung the flaw belongs to (rung 01's, rung 02's for the TMA box, rung 03's
// for the fragment rows; `cache` serves the Hopper rungs).
void int8_gemm_with_flaw(const Int8GemmArgs& args, Int8Flaw flaw, cudaStream_t stream, HopperLaunchCache& cache);

}  // namespace kc::stage3
