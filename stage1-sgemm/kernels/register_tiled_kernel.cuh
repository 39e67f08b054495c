// register_tiled_kernel.cuh — the kernel body of rungs 06, 07 and 08.
//
// The three rungs run the same loop: copy a 128 x 8 tile of A (transposed) and an 8 x 128 tile of
// B into shared memory with float4 loads, wait, let every thread multiply its 8 x 8 register tile,
// wait, move 8 along K; finally write C with float4 stores. What each rung changes is a Layout:
//   kAStride     row length of the transposed A tile in shared memory (rung 07 pads it),
//   placement()  which outputs a thread owns, hence which shared-memory addresses a warp reads
//                (rung 07 spreads them, rung 08 groups them by warp),
//   kAlwaysFloat4Rows  whether the rung assumes 16-byte aligned rows of A, B and C (rungs 06, 07,
//                which then require K and N to be multiples of 4) or checks at run time and falls
//                back to scalar loads (rung 08: any shape).
#pragma once

#include "kc/stage1/sgemm.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {

// What rungs 06 and 07 have in common: a 128 x 128 x 8 block tile for 16 x 16 threads of
// 8 x 8 outputs, and float4 rows assumed. Each rung adds kAStride and placement().
struct RegisterTile128 {
  static constexpr int kTileRows = 128, kTileCols = 128, kTileK = 8;
  static constexpr int kThreadRows = 8, kThreadCols = 8;
  static constexpr int kThreads = kRegisterTileThreadsPerRow * kRegisterTileThreadsPerRow;  // 256
  static constexpr bool kAlwaysFloat4Rows = true;
};

template <typename Layout>
__global__ void __launch_bounds__(Layout::kThreads, 2)
    sgemm_register_tiled_kernel(SgemmArgs args, bool a_rows_aligned, bool b_rows_aligned,
                                bool c_rows_aligned) {
  constexpr int kTileRows = Layout::kTileRows;
  constexpr int kTileCols = Layout::kTileCols;
  constexpr int kTileK = Layout::kTileK;
  constexpr int kAStride = Layout::kAStride;
  static_assert(kAStride % 4 == 0, "rows of the transposed A tile must stay 16-byte aligned");
  __shared__ __align__(16) float smem_a[kTileK * kAStride];
  __shared__ __align__(16) float smem_b[kTileK * kTileCols];

  const int tiles_n = ceil_div(args.n, kTileCols);
  const int row0 = (blockIdx.x / tiles_n) * kTileRows;
  const int col0 = (blockIdx.x % tiles_n) * kTileCols;
  const FragmentPlacement place = Layout::placement(static_cast<int>(threadIdx.x));
  // Rungs 06 and 07 assume float4 rows (their host side refuses anything else), so the compiler
  // drops the run-time choice; rung 08 keeps it.
  const bool a_float4 = Layout::kAlwaysFloat4Rows || a_rows_aligned;
  const bool b_float4 = Layout::kAlwaysFloat4Rows || b_rows_aligned;
  const bool c_float4 = Layout::kAlwaysFloat4Rows || c_rows_aligned;

  float acc[Layout::kThreadRows][Layout::kThreadCols] = {};
  for (int k0 = 0; k0 < args.k; k0 += kTileK) {
    load_a_tile_transposed<kTileRows, kTileK, Layout::kThreads, kAStride>(args, row0, k0, smem_a,
                                                                          a_float4);
    load_b_tile<kTileK, kTileCols, Layout::kThreads>(args, k0, col0, smem_b, b_float4);
    __syncthreads();  // the tiles are complete
    multiply_tile<kTileK, Layout::kThreadRows, Layout::kThreadCols, kAStride, kTileCols>(smem_a, smem_b,
                                                                                         place, acc);
    __syncthreads();  // everyone is done with the tiles before they are overwritten
  }
  store_register_tile(args, row0, col0, place, acc, c_float4, /*accumulate=*/false);
}

template <typename Layout>
void launch_register_tiled(const SgemmArgs& args, cudaStream_t stream) {
  const bool a_aligned = rows_are_float4_aligned(args.a, args.lda);
  const bool b_aligned = rows_are_float4_aligned(args.b, args.ldb);
  const bool c_aligned = rows_are_float4_aligned(args.c, args.ldc);
  if (Layout::kAlwaysFloat4Rows)
    require(a_aligned && b_aligned && c_aligned,
            "this rung reads and writes rows of A, B and C as float4: it needs K and N to be "
            "multiples of 4 and 16-byte aligned matrices (got {}x{}x{}); rung 08 handles any shape",
            args.m, args.n, args.k);
  sgemm_register_tiled_kernel<Layout>
      <<<tile_grid(args, Layout::kTileRows, Layout::kTileCols), Layout::kThreads, 0, stream>>>(
          args, a_aligned, b_aligned, c_aligned);
}

}  // namespace kc::stage1
