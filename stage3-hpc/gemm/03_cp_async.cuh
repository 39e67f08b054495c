// Rung 03 — the cp.async pipeline kernel, a template over its tile configuration
// (MmaSyncConfig). 03_cp_async.cu runs Rung03Config; kc-mma-sync-tune and the GPU tests run the
// configurations of tune/mma_sync_variants.cu. The header comment of 03_cp_async.cu explains
// the rung; the comments here explain the code.
#pragma once

#include "arch/sm80/cp_async.cuh"
#include "arch/util.hpp"
#include "hgemm.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {

// What rung 03 runs. kc-mma-sync-tune prints the line that replaces this one with its winner.
using Rung03Config = MmaSyncConfig</*kBlockM=*/128, /*kBlockN=*/256, /*kWarpsM=*/2, /*kWarpsN=*/4, /*kStages=*/3,
                                   /*kStagedEpilogue=*/true>;

// Starts the copies of this thread's chunks of one operand's tile for K step `k_tile` into the
// swizzled tile at shared address `tile`; a chunk past an edge is copied with src-size 0 (zeros).
template <class Chunks, bool kFullTiles>
__device__ __forceinline__ void copy_tile_async(std::uint32_t tile, const TileChunkSources<Chunks, kFullTiles>& sources,
                                                int k_tile) {
#pragma unroll
  for (int pass = 0; pass < Chunks::kPasses; ++pass) {
    const ChunkSource source = sources(pass, k_tile);
    sm80::cp_async_16(tile + Chunks::offset(pass), source.pointer, source.valid);
  }
}

// The main loop of one block: a kStages-deep cp.async pipeline of K steps, and within it the
// warp's fragments loaded one k16 slice ahead of its MMAs, across K steps too.
//
// Order within K step t (stage s = t mod kStages), slices 0 .. kSlices - 1:
//   slice i: load the fragments of slice i + 1 (after the last slice: slice 0 of step t + 1, from
//            the next stage), then issue the MMAs of slice i (fragments loaded one slice earlier);
//   after slice kSlices - 2: wait until step t + 1 has landed (this thread's copies), barrier
//            (everyone's have; and every warp has loaded its last fragments of stage s, which
//            happened at the top of slice kSlices - 2), then start the copies of step
//            t + kStages into stage s.
// One barrier per K step, and after it the warp has its next fragments already in registers: the
// ldmatrix latency at a K-step boundary hides behind the last slice's MMAs.
//
// Accumulators: WarpAccumulators<Config> (bf16 operands, FP32 sums), or Int8WarpAccumulators<Config>
// (s8 operands, s32 sums: the INT8 GEMM's rung 03 hands its s8 matrices over as rows of K / 2
// two-byte elements — copies and ldmatrix move bytes — and the accumulators pick the MMA).
template <class Config>
struct CpAsyncMainloop {
  template <bool kFullTiles, class Accumulators>
  __device__ static void run(const HgemmArgs& args, std::uint8_t* smem, int block_row0, int block_col0,
                             WarpOrigin warp, Accumulators& acc) {
    const std::uint32_t smem_base = smem_u32(smem);
    constexpr int kStages = Config::kStages;
    constexpr int kSlices = Config::kSlices;
    static_assert(kSlices % 2 == 0, "fragment buffers alternate per slice: slice 0 of every K step must use buffer 0");
    const auto stage_a = [&](int stage) { return smem_base + stage * Config::kStageBytes; };
    const auto stage_b = [&](int stage) { return smem_base + stage * Config::kStageBytes + Config::kTileBytesA; };
    const int k_tiles = ceil_div(args.k, Config::kBlockK);

    const TileChunkSources<TileChunksA<Config>, kFullTiles> sources_a(args.a, args.m, args.k, block_row0);
    const TileChunkSources<TileChunksB<Config>, kFullTiles> sources_b(args.b, args.n, args.k, block_col0);
    // Always commit a group, even an empty one past the last K step, so that group g holds step g
    // and the wait counts below stay in step with K steps.
    const auto issue_k_tile = [&](int k_tile, int stage) {
      if (k_tile < k_tiles) {
        copy_tile_async(stage_a(stage), sources_a, k_tile);
        copy_tile_async(stage_b(stage), sources_b, k_tile);
      }
      sm80::cp_async_commit_group();
    };

    // Every stage starts filled: steps 0 .. kStages - 1 in flight.
#pragma unroll
    for (int stage = 0; stage < kStages; ++stage) issue_k_tile(stage, stage);
    sm80::cp_async_wait_group<kStages - 1>();  // this thread's copies of step 0 have landed
    __syncthreads();                     // everyone's have

    const FragmentLaneOffsets lane = fragment_lane_offsets<Config>(warp);
    WarpFragments<Config> fragments[2];
    load_warp_fragments<Config>(fragments[0], stage_a(0) + lane.a, stage_b(0) + lane.b, 0);
    int stage = 0;
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      const int next_stage = stage + 1 == kStages ? 0 : stage + 1;
#pragma unroll
      for (int slice = 0; slice < kSlices; ++slice) {
        if (slice + 1 < kSlices)
          load_warp_fragments<Config>(fragments[(slice + 1) % 2], stage_a(stage) + lane.a, stage_b(stage) + lane.b,
                                      slice + 1);
        else  // after the last K step this reads a stage no copy targets any more: harmless, unused
          load_warp_fragments<Config>(fragments[0], stage_a(next_stage) + lane.a, stage_b(next_stage) + lane.b, 0);
        mma_warp_fragments<Config>(acc, fragments[slice % 2]);
        if (slice == kSlices - 2) {
          // Committed so far: steps 0 .. k_tile + kStages - 1. All but the newest kStages - 2 of
          // them done means step k_tile + 1 is done.
          sm80::cp_async_wait_group<kStages - 2>();
          __syncthreads();
          issue_k_tile(k_tile + kStages, stage);
        }
      }
      stage = next_stage;
    }
    sm80::cp_async_wait_group<0>();  // only empty groups remain; leave nothing in flight at exit
  }
};

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm) hgemm_cp_async_kernel(HgemmArgs args) {
  run_gemm_block<Config, CpAsyncMainloop<Config>>(args);
}

template <class Config>
void launch_hgemm_cp_async(const HgemmArgs& args, cudaStream_t stream) {
  launch_mma_sync_kernel<Config, hgemm_cp_async_kernel<Config>>(args, stream);
}

}  // namespace kc::stage3
