// Rung 03 — a cp.async multi-stage pipeline.
//
// Idea: keep the tensor cores fed while the next tiles are still on their way. cp.async (sm_80)
// copies 16 bytes from global straight into shared memory without passing through registers and
// without blocking the thread; copies are grouped (commit_group) and waited for by age
// (wait_group N: all but the N newest groups have landed). With kStages = 3 tile buffers, the
// copies for K steps kt+1 and kt+2 are in flight while the warps multiply step kt.
//
// What changed from rung 02: global -> shared copies are asynchronous and run kStages - 1 steps
// ahead; the copy of a chunk past the matrix edge is a cp.async with src-size 0, which writes 16
// zero bytes. One __syncthreads per K step both publishes the landed stage and tells every thread
// that the stage computed last iteration is free to be refilled. Same 128 x 128 x 64 tiles, same
// swizzle, same warp MMA as rung 02 (mma_sync_common.cuh). Shared memory: 3 x 32 KiB, so two
// blocks fit on an H100/H200 SM.
//
// The 16 cp.async of a K step are straight-line code (the chunk walk of mma_sync_common.cuh has a
// compile-time count): about 150 instructions per thread and K step. Walked by a loop starting at
// threadIdx.x they were a rolled loop with remainder handling, about 400 instructions and a chain
// of branches between the barrier and the first MMA of every K step.
// Occupancy: 237 registers (2 x 128 threads per SM by registers, __launch_bounds__(128, 2)) and
// 97 KiB of shared memory per block: 8 warps per SM.
// Bank conflicts: none by construction (CPU-tested in gemm_layout_test.cpp): each 8-lane phase of
// an ldmatrix reads one 16-byte chunk from 8 consecutive rows, which the swizzle puts in 8
// different chunk columns; the 8 threads copying one row write its 8 chunks.
//
// Layouts: A row-major M x K, B N x K. Any M, N; K a multiple of 8.
// SASS to look for: 16 LDGSTS.E.BYPASS.128 (cp.async.cg) without a branch between them, LDGDEPBAR /
// DEPBAR.LE, LDSM, HMMA.
// Expected limiter: shared-memory bandwidth and the tensor issue rate of mma.sync, about equally:
// per K step a block reads 64 KiB through ldmatrix and writes 32 KiB with cp.async for 2.1 MFLOP,
// so at 128 B/clock an SM tops out near 2.7 kFLOP/clock (~700 TFLOPS on 132 SMs at 1.98 GHz),
// about where mma.sync itself stops on Hopper (a fraction of the WGMMA peak); a 64 x 64 warp tile
// is the largest the registers allow, so only WGMMA (rung 04 on) moves that ceiling. Expected
// effect of the straight-line copies (not yet measured): +10-30% over the rolled loop at 4096^3.
//
// Run just this rung:  kc-bench --filter stage3/hgemm_bf16/03_cp_async
#include "hgemm.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

using Tile = MmaSyncTile;
constexpr int kStages = 3;
constexpr int kStageBytes = Tile::kTileBytesA + Tile::kTileBytesB;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + slack to align the base to 1024

// 16 bytes global -> shared, bypassing L1 (.cg); src_bytes = 0 writes 16 zero bytes instead.
__device__ __forceinline__ void cp_async_16(std::uint32_t destination, const void* source, bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source),
               "r"(source_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kNewestGroupsInFlight>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kNewestGroupsInFlight) : "memory");
}

// Starts the copy of one 128 x 64 tile into swizzled shared memory at `tile`.
__device__ void copy_tile_async(std::uint32_t tile, const bf16* matrix, int rows_total, int k,
                                int row0, int k0) {
  for_each_tile_chunk(matrix, rows_total, k, row0, k0, [&](int, int offset, ChunkSource source) {
    cp_async_16(tile + offset, source.pointer, source.valid);
  });
}

__global__ void __launch_bounds__(Tile::kThreads, 2) hgemm_cp_async_kernel(HgemmArgs args) {
  extern __shared__ std::uint8_t smem_raw[];
  // The swizzle pattern is defined on 1024-byte blocks: align the stages to one.
  const std::uint32_t smem_base = (shared_address(smem_raw) + 1023u) & ~1023u;
  const auto stage_a = [&](int stage) { return smem_base + stage * kStageBytes; };
  const auto stage_b = [&](int stage) { return smem_base + stage * kStageBytes + Tile::kTileBytesA; };

  const int block_row0 = blockIdx.x * Tile::kBlockM;
  const int block_col0 = blockIdx.y * Tile::kBlockN;
  const int warp = threadIdx.x / 32;
  const int warp_row0 = (warp / Tile::kWarpsN) * Tile::kWarpTileM;
  const int warp_col0 = (warp % Tile::kWarpsN) * Tile::kWarpTileN;
  const int k_tiles = ceil_div(args.k, Tile::kBlockK);

  const auto issue_k_tile = [&](int k_tile) {
    // Always commit a group, even an empty one past the last K step, so that "wait for all but
    // the newest kStages - 2 groups" keeps meaning "the stage about to be computed has landed".
    if (k_tile < k_tiles) {
      const int stage = k_tile % kStages;
      copy_tile_async(stage_a(stage), args.a, args.m, args.k, block_row0, k_tile * Tile::kBlockK);
      copy_tile_async(stage_b(stage), args.b, args.n, args.k, block_col0, k_tile * Tile::kBlockK);
    }
    cp_async_commit_group();
  };

  for (int k_tile = 0; k_tile < kStages - 1; ++k_tile) issue_k_tile(k_tile);

  WarpAccumulators acc = {};
  for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
    cp_async_wait_group<kStages - 2>();  // this thread's copies for k_tile have landed
    __syncthreads();  // everyone's have, and everyone is done computing k_tile - 1
    issue_k_tile(k_tile + kStages - 1);  // refills the stage of k_tile - 1
    const int stage = k_tile % kStages;
    warp_mma_tile(stage_a(stage), stage_b(stage), warp_row0, warp_col0, acc);
  }
  cp_async_wait_group<0>();  // no copy may still target shared memory when the block exits
  store_warp_tile(args, block_row0 + warp_row0, block_col0 + warp_col0, acc);
}

}  // namespace

void hgemm_03_cp_async(const HgemmArgs& args, cudaStream_t stream) {
  KC_CUDA_CHECK(cudaFuncSetAttribute(hgemm_cp_async_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  const dim3 grid(ceil_div(args.m, Tile::kBlockM), ceil_div(args.n, Tile::kBlockN));
  hgemm_cp_async_kernel<<<grid, Tile::kThreads, kSmemBytes, stream>>>(args);
}

}  // namespace kc::stage3
