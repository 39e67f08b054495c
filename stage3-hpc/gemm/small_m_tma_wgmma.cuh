// small_m_tma_wgmma.cuh — the K slice of hgemm rungs 15 and 16 (small M on Hopper): a producer warp
// streams a column block's 128 weight rows and the 8T token rows through a ring of TMA stages, and
// two consumer warpgroups multiply them with wgmma m64nNk16 (N = 8T), both operands from shared
// memory. The rungs differ only in how the splits of K are added (15: the last CTA, through L2;
// 16: the cluster, through distributed shared memory); 15_small_m_tma_wgmma.cu's header tells the
// idea of the slice.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/wgmma.cuh"
#include "arch/sm90/wgmma_narrow.cuh"
#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "hopper_common.cuh"
#include "pipeline.cuh"

namespace kc::stage3::small_m_tma {

inline constexpr int kConsumerWarpgroups = kSmallMBlockN / kWarpgroupRows;  // 2: 64 weight rows each
inline constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
inline constexpr int kConsumerWarps = kConsumerThreads / 32;  // 8; the producer warp comes after them
inline constexpr int kThreads = kConsumerThreads + 32;
inline constexpr int kStages = 4;  // 97 KiB at 8 token tiles: two CTAs an SM fit where the grid has more CTAs than SMs
inline constexpr int kTileBytesB = kSmallMBlockN * kTileRowBytes;  // 16 KiB: 128 weight rows x 64 k
static_assert(kSmallMBlockK == kHopperBlockK, "a K tile is one 128-byte swizzled row per operand row");
static_assert(kConsumerWarpgroups == 2, "two consumer warpgroups cover the 128-column block");

// One stage: the weights' box (128 rows) first, then the tokens' (8T rows), both 1024-byte aligned
// (the swizzle's period); the full and empty barriers of every stage after the ring.
template <int kTokenTiles>
struct Ring {
  static constexpr int kTokens = kSmallMTokensPerTile * kTokenTiles;  // WGMMA's N
  static constexpr int kTileBytesA = kTokens * kTileRowBytes;
  static constexpr int kStageBytes = kTileBytesB + kTileBytesA;
  static constexpr int kBarrierOffset = kStages * kStageBytes;
  static constexpr int kSmemBytes = kSmemAlignment + kBarrierOffset + 2 * kStages * 8;
  static_assert(kStageBytes % kSmemAlignment == 0, "every stage starts 1024-byte aligned");
};

struct Params {
  CUtensorMap weights;  // B: N x K, boxes of 128 x 64
  CUtensorMap tokens;   // A: M x K, boxes of 8T x 64
  HgemmArgs args;
  SmallMWeightsAsAPlan plan;
  SmallMWeightsAsAWorkspace workspace;  // rung 15's; rung 16 has none
};

// The tensor maps and arguments of a launch (host).
template <int kTokenTiles>
Params make_params(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, const SmallMWeightsAsAWorkspace& workspace,
                   HopperLaunchCache& cache) {
  Params params{};
  params.weights = cache.tensor_map(operand_tile_map(args.b, args.n, args.k, kSmallMBlockN));
  params.tokens = cache.tensor_map(operand_tile_map(args.a, args.m, args.k, Ring<kTokenTiles>::kTokens));
  params.args = args;
  params.plan = plan;
  params.workspace = workspace;
  return params;
}

#if KC_STAGE3_SM90A

// Every thread of the CTA: this CTA's product, column block blockIdx.x over the K tiles of split
// blockIdx.y (params.plan), into acc (the consumers'; the producer warp's stay zero). Thread 0
// initializes the barriers; the ring is free again when this returns in the consumers (every stage
// read, every WGMMA finished), not yet in the producer warp, whose last copies the consumers have
// waited for.
template <int kTokenTiles>
__device__ __forceinline__ void multiply_k_slice(const Params& params, std::uint8_t* smem, float (&acc)[4 * kTokenTiles]) {
  using R = Ring<kTokenTiles>;
  const int col0 = static_cast<int>(blockIdx.x) * kSmallMBlockN;
  const int split = static_cast<int>(blockIdx.y);
  const int k_tile_begin = params.plan.k_tile_begin(split);
  const int k_tiles = params.plan.k_tile_begin(split + 1) - k_tile_begin;
  constexpr std::uint32_t kStepBytes = kWgmmaK * 2;  // 16 k further along a swizzled row
  std::uint64_t* const full = reinterpret_cast<std::uint64_t*>(smem + R::kBarrierOffset);
  std::uint64_t* const empty = full + kStages;
  const auto stage_at = [&](int stage) { return smem + stage * R::kStageBytes; };
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      sm90::mbarrier_init(&full[stage], 1);
      sm90::mbarrier_init(&empty[stage], kConsumerWarps);  // lane 0 of every consumer warp
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4 * kTokenTiles; ++i) acc[i] = 0.f;

  PipelineState<kStages> state;
  if (warp == kConsumerWarps) {
    // The producer: one lane issues both boxes of every K tile as soon as its stage is free.
    if (lane == 0) {
      for (int i = 0; i < k_tiles; ++i) {
        const int k0 = (k_tile_begin + i) * kSmallMBlockK;
        sm90::mbarrier_wait(&empty[state.stage], state.phase ^ 1);
        sm90::mbarrier_arrive_expect_tx(&full[state.stage], R::kStageBytes);
        std::uint8_t* const stage = stage_at(state.stage);
        sm90::tma_load_2d(stage, &params.weights, &full[state.stage], k0, col0);
        sm90::tma_load_2d(stage + kTileBytesB, &params.tokens, &full[state.stage], k0, 0);
        state.advance();
      }
    }
    return;
  }
  // A consumer warpgroup: its 64 weight rows of every K tile against all 8T tokens.
  const std::uint32_t weight_rows = static_cast<std::uint32_t>(warp / 4) * kWarpgroupRows * kTileRowBytes;
#pragma unroll 1
  for (int i = 0; i < k_tiles; ++i) {
    sm90::mbarrier_wait(&full[state.stage], state.phase);
    const std::uint32_t stage = smem_u32(stage_at(state.stage));
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kSmallMBlockK / kWgmmaK; ++kk)
      sm90::wgmma_m64nNk16_ss_bf16<R::kTokens>(acc, sm90::smem_descriptor_sw128(stage + weight_rows + kk * kStepBytes),
                                               sm90::smem_descriptor_sw128(stage + kTileBytesB + kk * kStepBytes), 1);
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();  // the stage is read: hand it back
    if (lane == 0) sm90::mbarrier_arrive(&empty[state.stage]);
    state.advance();
  }
  sm90::fence_accumulators(acc);
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::small_m_tma
