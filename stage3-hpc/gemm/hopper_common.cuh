// hopper_common.cuh — what every Hopper rung (04-10) shares: the tile sizes, the tensor maps of the
// operand tiles TMA brings in, and the WGMMA work on one K step of them. The instructions
// themselves are in arch/sm90/; the epilogues in epilogue_direct_store.cuh and
// epilogue_tma_store.cuh.
//
// Tiles: K steps of 64 bf16 = one 128-byte swizzled row per M (or N) index; a warpgroup owns 64
// rows of the block tile and all 256 of its columns (wgmma m64n256k16, 128 FP32 accumulators per
// thread).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/wgmma.cuh"
#include "hgemm.hpp"

namespace kc::stage3 {

inline constexpr int kHopperBlockK = 64;              // elements: one 128-byte swizzled row
inline constexpr int kHopperBlockN = 256;             // wgmma n256
inline constexpr int kWarpgroupRows = 64;             // wgmma m64
inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kWgmmaK = 16;
inline constexpr int kAccumulators = kWarpgroupRows * kHopperBlockN / kWarpgroupThreads;  // 128
inline constexpr int kTileRowBytes = kHopperBlockK * 2;                              // 128
inline constexpr int kMaxDynamicSmem = 227 * 1024;    // per block on sm_90

// The tensor map for an operand (A or B: rows x K, K contiguous) read in boxes of box_rows x 64.
inline TmaMatrix2d operand_tile_map(const bf16* matrix, int rows, int k, int box_rows) {
  TmaMatrix2d map;
  map.base = matrix;
  map.rows = static_cast<std::uint64_t>(rows);
  map.cols = static_cast<std::uint64_t>(k);
  map.box_rows = static_cast<std::uint32_t>(box_rows);
  map.box_cols = kHopperBlockK;
  map.swizzle_128b = true;
  return map;
}

#if KC_STAGE3_SM90A

// One K step (64) of one warpgroup: four m64n256k16 WGMMAs on a 64-row slice of the A tile and the
// 256-row B tile, committed as one group. Both tiles are 1024-byte aligned and swizzled.
__device__ __forceinline__ void wgmma_k_step(float (&acc)[kAccumulators], std::uint32_t a_tile,
                                             std::uint32_t b_tile) {
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHopperBlockK / kWgmmaK; ++kk) {
    constexpr std::uint32_t kStepBytes = kWgmmaK * 2;  // 16 bf16 further along the swizzled row
    sm90::wgmma_m64n256k16_bf16(acc, sm90::smem_descriptor_sw128(a_tile + kk * kStepBytes),
                                sm90::smem_descriptor_sw128(b_tile + kk * kStepBytes));
  }
  sm90::wgmma_commit_group();
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3
