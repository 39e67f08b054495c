// int8_mma_sync_kernel.cuh — the kernel of the INT8 GEMM's rung 03 (and of its negative control):
// the bf16 ladder's rung 03 (gemm/03_cp_async.cuh: a three-stage cp.async pipeline, ldmatrix
// fragments one k-slice ahead, mma.sync) with s8 operands and s32 sums. The header comment of
// 03_mma_sync.cu explains the rung; the comments here explain the code.
//
// What is reused as it is: the tile loader and the K loop (CpAsyncMainloop), the swizzled
// 128-byte rows, the fragment loads. They move bytes: a K step is 128 bytes of a row whether those
// hold 64 bf16 or 128 s8 values, and ldmatrix hands out 16-byte rows whatever they hold. So the
// kernel gives the mainloop its s8 matrices as rows of K / 2 two-byte elements (Int8MmaSyncParams::
// bytes) and integer accumulators, which select mma.sync m16n8k32 s8 (gemm/mma_sync_common.cuh).
//
// What is new: the epilogue. A warp's 64 x 64 tile of s32 sums goes out in the same fragment
// layout the WGMMA rungs store (quant/int8/int8_epilogue.cuh): s32 pairs, or converted to FP32,
// multiplied by s_A[row] and s_B[col], rounded to bf16 and stored in pairs.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "03_cp_async.cuh"
#include "arch/util.hpp"
#include "epilogue.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/int8_gemm_args.hpp"
#include "mma_sync_common.cuh"
#include "quant/int8/int8_epilogue.cuh"

namespace kc::stage3 {

// 128 x 256 block tiles, 2 x 4 warps of 64 x 64, three stages of 48 KiB (16 KiB of A, 32 KiB of
// B: 128-byte rows of 128 s8 values): the bf16 ladder's rung 03 tile, which fits an A100's
// 163 KiB of shared memory per block. The staged epilogue is the bf16 ladder's, so it is off.
using Int8MmaSyncConfig = MmaSyncConfig</*kBlockM=*/128, /*kBlockN=*/256, /*kWarpsM=*/2, /*kWarpsN=*/4,
                                        /*kStages=*/3>;

struct Int8MmaSyncParams {
  // A and B as the mainloop copies them: rows of K / 2 two-byte elements (K % 16 == 0: whole
  // 16-byte chunks). Only m, n, k, a and b are set.
  HgemmArgs bytes;
  Int8GemmArgs args;  // the problem as the caller gave it: outputs and scales
};

// A warp's 64 x 64 tile of sums: s32 pairs as they are, or dequantized to bf16 pairs.
// fragment_rows_share_scale (the negative control): rows lane / 4 + 8 of every fragment take the
// scale of row lane / 4.
template <Int8Output kOutput, Int8Flaw kFlaw, class Config>
__device__ __forceinline__ void store_int8_warp_tile(const Int8GemmArgs& args, int row0, int col0,
                                                     const Int8WarpAccumulators<Config>& acc) {
  if constexpr (kOutput == Int8Output::s32) {
#pragma unroll
    for (int i = 0; i < Config::kFragmentsM; ++i)
#pragma unroll
      for (int j = 0; j < Config::kFragmentsN; ++j)
        store_s32_fragment(args.c32, args.m, args.n, row0 + 16 * i, col0 + 8 * j, acc[i][j]);
  } else {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    // The column scales of the warp's 8 column pairs, loaded once (clamped past N: those columns
    // are not stored), then fragment row by fragment row the two row scales.
    float2 column_scales[Config::kFragmentsN];
#pragma unroll
    for (int j = 0; j < Config::kFragmentsN; ++j) {
      const int col = col0 + 8 * j + 2 * (lane % 4);
      column_scales[j] = make_float2(__ldg(args.scale_b + min(col, args.n - 1)),
                                     __ldg(args.scale_b + min(col + 1, args.n - 1)));
    }
#pragma unroll
    for (int i = 0; i < Config::kFragmentsM; ++i) {
      const int top_row = row0 + 16 * i + lane / 4;
      const int bottom_row = kFlaw == Int8Flaw::fragment_rows_share_scale ? top_row : top_row + 8;
      const float top = __ldg(args.scale_a + min(top_row, args.m - 1));
      const float bottom = __ldg(args.scale_a + min(bottom_row, args.m - 1));
#pragma unroll
      for (int j = 0; j < Config::kFragmentsN; ++j)
        store_dequantized_fragment(args.c, args.m, args.n, row0 + 16 * i, col0 + 8 * j, acc[i][j], top, bottom,
                                   column_scales[j]);
    }
  }
}

// One block: the tile at its place in the grid (tile rows along x), the bf16 rung 03's K loop on
// the bytes, the warp's tile stored.
template <Int8Output kOutput, Int8Flaw kFlaw>
__global__ void __launch_bounds__(Int8MmaSyncConfig::kThreads, Int8MmaSyncConfig::kMinBlocksPerSm)
    int8_gemm_mma_sync_kernel(const Int8MmaSyncParams params) {
  using Config = Int8MmaSyncConfig;
  std::uint8_t* const smem = mma_sync_dynamic_smem();
  const WarpOrigin warp = warp_origin<Config>();
  const int block_row0 = static_cast<int>(blockIdx.x) * Config::kBlockM;
  const int block_col0 = static_cast<int>(blockIdx.y) * Config::kBlockN;

  Int8WarpAccumulators<Config> acc = {};
  if (block_tiles_are_full<Config>(params.bytes, block_row0, block_col0))
    CpAsyncMainloop<Config>::template run<true>(params.bytes, smem, block_row0, block_col0, warp, acc);
  else
    CpAsyncMainloop<Config>::template run<false>(params.bytes, smem, block_row0, block_col0, warp, acc);
  store_int8_warp_tile<kOutput, kFlaw, Config>(params.args, block_row0 + warp.row0, block_col0 + warp.col0, acc);
}

template <Int8Output kOutput, Int8Flaw kFlaw>
void launch_int8_gemm_mma_sync_output(const Int8GemmArgs& args, cudaStream_t stream) {
  using Config = Int8MmaSyncConfig;
  constexpr auto kKernel = &int8_gemm_mma_sync_kernel<kOutput, kFlaw>;
  allow_mma_sync_smem<Config, kKernel>();
  Int8MmaSyncParams params{};
  params.bytes.m = args.m;
  params.bytes.n = args.n;
  params.bytes.k = args.k / 2;
  params.bytes.a = reinterpret_cast<const bf16*>(args.a);
  params.bytes.b = reinterpret_cast<const bf16*>(args.b);
  params.args = args;
  const dim3 grid(ceil_div(args.m, Config::kBlockM), ceil_div(args.n, Config::kBlockN));
  kKernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

// Validates the arguments, then runs the kernel for the output the arguments ask for.
template <Int8Flaw kFlaw>
void launch_int8_gemm_mma_sync(const Int8GemmArgs& args, cudaStream_t stream) {
  check_int8_gemm_args(args);
  require(args.n <= 65535 * Int8MmaSyncConfig::kBlockN, "INT8 GEMM rung 03: N = {} is beyond its grid (at most {})",
          args.n, 65535 * Int8MmaSyncConfig::kBlockN);
  if (args.c32 != nullptr) {
    launch_int8_gemm_mma_sync_output<Int8Output::s32, kFlaw>(args, stream);
  } else {
    launch_int8_gemm_mma_sync_output<Int8Output::dequantized_bf16, kFlaw>(args, stream);
  }
}

}  // namespace kc::stage3
