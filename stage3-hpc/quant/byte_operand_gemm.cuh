// byte_operand_gemm.cuh — what the Hopper GEMMs on one-byte operands (FP8 e4m3 in quant/fp8/,
// INT8 in quant/int8/) share: the shape of the bf16 ladder's persistent warp-specialized kernel
// (gemm/warp_specialized_gemm.cuh) with one byte an element.
//
// The ring of stages (gemm/pipeline.cuh's StageRing), the persistent tile walk in grouped raster
// order (gemm/tile_scheduler.cuh) and the 128-byte swizzle are the bf16 ladder's, unchanged. A
// stage holds one K step of 128-byte rows: 64 bf16 there, 128 one-byte values here. TMA moves
// bytes: a one-byte matrix of K columns is handed to it as a matrix of K / 2 two-byte elements
// (byte_operand_tile_map below), so the ring's K coordinates (64 two-byte elements a step) land
// on 128 one-byte values a step and the bf16 ladder's loads serve as they are. Both one-byte
// WGMMAs (e4m3 and s8) take 32 values = the same 32 bytes of a swizzled row that 16 bf16 are, so
// the descriptors advance exactly as in the bf16 ladder too.
#pragma once

#include <cstdint>

#include "arch/sm90/cluster.cuh"
#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "arch/util.hpp"
#include "hopper_common.cuh"
#include "pipeline.cuh"
#include "tile_scheduler.cuh"

namespace kc::stage3 {

// The knobs gemm/pipeline.cuh and gemm/tile_scheduler.cuh read, for a tile of 128 rows x
// kBlockNValue columns, kStagesValue stages. kStageReadersValue: how many consumer
// warpgroups read each stage — 2 when both consumers share a tile (64 rows each: rungs 01-03 of
// both GEMMs), 1 when each consumer computes whole tiles of its own (the INT8 GEMM's rung 04, whose
// consumers take turns: a stage is freed by the four warps of the one that read it).
// kClusterMValue: CTAs of a cluster along M sharing each B tile, each loading 1/kClusterM of it by
// TMA multicast (the bf16 ladder's rung 08 way; the FP8 GEMM's rung 08); 1: no clusters.
template <int kBlockNValue, int kStagesValue, class ParamsType, int kStageReadersValue = 2, int kClusterMValue = 1>
struct ByteOperandGemmShape {
  using Params = ParamsType;
  static constexpr int kClusterM = kClusterMValue;
  static constexpr bool kGrouped = false;
  static constexpr bool kSplitLastWave = false;  // the tile walk of tile_scheduler.cuh, as the BF16 GEMM's
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;  // 384
  static constexpr int kStageReaders = kStageReadersValue;
  static_assert(kStageReaders == 1 || kStageReaders == kConsumers, "one consumer a stage, or all of them");
  static constexpr int kConsumerWarps = kStageReaders * kWarpgroupThreads / 32;  // arrive to free a stage
  static constexpr int kBlockM = kConsumers * kWarpgroupRows;  // 128
  static constexpr int kBlockN = kBlockNValue;
  static constexpr int kBlockK = kTileRowBytes;                // 128 one-byte values: one swizzled row
  static constexpr int kTileBytesA = kBlockM * kTileRowBytes;  // 16 KiB
  static constexpr int kTileBytesB = kBlockN * kTileRowBytes;
  static constexpr int kStageBytes = kTileBytesA + kTileBytesB;
  static constexpr int kBSliceRows = kBlockN / kClusterM;  // the rows of B a CTA loads
  static constexpr int kBSliceBytes = kTileBytesB / kClusterM;
  static_assert(kClusterM == 1 || (kClusterM == 2 && kStageReaders == kConsumers), "clusters of 2 sharing tiles");
  static constexpr int kStages = kStagesValue;
  static constexpr int kRasterBandTileRows = 8;
  static constexpr int kBarrierBytes = 2 * kStages * 8;
  static constexpr int kSmemBytes = kSmemAlignment + kStages * kStageBytes + kBarrierBytes;
  // Where a buffer after the ring may start (the epilogue's, rungs with TMA stores): the first
  // 1024-byte boundary (the 128-byte swizzle's alignment) after the ring's barriers.
  static constexpr int kAfterRingOffset = kStages * kStageBytes + 1024;
  static_assert(kBarrierBytes <= 1024 && kStageBytes % 1024 == 0, "a buffer after the ring stays 1024-byte aligned");
  static constexpr int kProducerRegisters = 40;
  static constexpr int kConsumerRegisters = 232;
  static constexpr int kAccumulators = kWarpgroupRows * kBlockN / kWarpgroupThreads;  // a thread's share
  static constexpr int kWgmmaK = 32;  // one-byte values per wgmma

  static_assert(kSmemBytes <= kMaxDynamicSmem, "shared memory over the per-block limit");
};

#if KC_STAGE3_SM90A

// The ring of stages on the kernel's dynamic shared memory (the stages, then the full and empty
// barriers), its barriers initialised by thread 0 and seen by every thread.
template <class Config>
__device__ __forceinline__ StageRing<Config> byte_operand_ring(std::uint8_t* smem_raw) {
  std::uint8_t* smem = aligned_dynamic_smem(smem_raw);
  auto* barriers = reinterpret_cast<std::uint64_t*>(smem + Config::kStages * Config::kStageBytes);
  const StageRing<Config> ring{smem, barriers, barriers + Config::kStages};
  if (threadIdx.x == 0) {
    ring.init_barriers();
    sm90::fence_barrier_init();
  }
  // Barriers must be initialised in every CTA before any peer multicasts into it or arrives on it.
  if constexpr (Config::kClusterM > 1)
    sm90::cluster_sync();
  else
    __syncthreads();
  return ring;
}

// The producer warpgroup (warpgroup 0): it gives up registers for the consumers, and one thread
// issues the TMA loads of every K step of every tile of the CTA's walk.
template <class Config>
__device__ __forceinline__ void produce_byte_operand_tiles(const StageRing<Config>& ring,
                                                           const typename Config::Params& params,
                                                           const TileSchedule<Config>& schedule, int k_tiles) {
  sm90::setmaxnreg_decrease<Config::kProducerRegisters>();
  if (threadIdx.x == 0) {
    PipelineState<Config::kStages> state;
    for (int linear = schedule.first; linear < schedule.count; linear += schedule.step)
      ring.load_tile(params, state, schedule.cta_tile(params, linear), schedule.cta_rank, k_tiles);
  }
}

#endif  // KC_STAGE3_SM90A

// The tensor map of a one-byte operand (rows x K, K contiguous, K % 16 == 0) as rows x K/2
// two-byte elements in boxes of box_rows x 64 (128 bytes: one K step).
inline TmaMatrix2d byte_operand_tile_map(const void* matrix, int rows, int k, int box_rows) {
  TmaMatrix2d map;
  map.base = matrix;
  map.rows = static_cast<std::uint64_t>(rows);
  map.cols = static_cast<std::uint64_t>(k / 2);
  map.box_rows = static_cast<std::uint32_t>(box_rows);
  map.box_cols = kTileRowBytes / 2;
  map.swizzle_128b = true;
  return map;
}

}  // namespace kc::stage3
