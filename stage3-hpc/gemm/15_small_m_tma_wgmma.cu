// Rung 15 — small M (decode) on Hopper: rung 14's swapped product on TMA and WGMMA. The weights
// are WGMMA's A operand and the tokens its B operand, both straight from shared memory, and a
// producer warp keeps the TMA ring full.
//
// Idea: rung 14 streams the N x K weight B through a cp.async ring and multiplies it on mma.sync
// with the operands swapped (C^T = B.A^T: 16 weight rows a product, the tokens as n8 tiles). From
// 17 tokens its warps are long dependent chains of ldmatrix and mma.sync (rung 14's header: most
// scheduler cycles with no warp ready at 64 tokens), and it falls well behind cuBLAS there. On
// Hopper the same product is one instruction a warpgroup: wgmma m64nNk16 with N = 8 x token tiles
// (8..64) reads 64 weight rows (A) and all the tokens (B) from shared memory by descriptor — no
// ldmatrix, no fragments built by the warps, no register for an operand — and the copies are TMA
// boxes issued by one thread. So the per-warp chain of rung 14 is gone: a CTA's 16 KiB of
// weights costs each consumer warpgroup 4 WGMMAs, whatever M is.
//
// What changed from rung 14: the operands come by TMA (a 128 x 64 box of B and an 8T x 64 box of
// A a K tile, 128-byte swizzled, zeros past N, M and K) into a ring of mbarrier-guarded stages
// filled by a producer warp (the warp-specialized rungs' ring, gemm/pipeline.cuh's PipelineState),
// and two consumer warpgroups (64 weight rows each) multiply them with wgmma m64nNk16, A and B
// both K-major (wgmma_m64nNk16_ss_bf16). The accumulator of 8T columns per warpgroup is mma.sync's
// C layout slice by slice, so the swapped fragments, the column blocks of 128, the 64-deep K
// tiles, the workspace and the split-K reduction by the last CTA (split_k_last_cta.cuh, in split
// order: the same bits wherever the last CTA is) are rung 14's. The plan is rung 11's split rule
// with one CTA an SM at every M (plan_small_m_tma_wgmma): rung 14 takes two CTAs an SM from 17
// tokens so that each scheduler has a second warp of mma.sync chains; here no warp has a chain to
// hide, and the shared memory goes to a deeper ring instead: 8 stages, up to 197 KiB.
//
// Analysis (not measurements), per CTA and K tile at the H200's ~4.2 TB/s copy roof: 16 KiB of
// weights arrive about every 0.5 us (~900 clocks at 132 SMs); the two warpgroups' 8 WGMMAs are
// 128 x 8T x 64 multiply-adds, 256 tensor-core clocks at 64 tokens (an SM does 2048 dense bf16
// multiply-adds a clock: 989 TFLOPS over 132 SMs at 1.83 GHz), so even at M = 64 the tensor cores
// are busy under a third of the time and the rung should stay bound by the weight stream. In
// flight: up to 8 stages a CTA (128 KiB of weights), against the ~22 KB an SM that Little's law
// asks at the roof (rung 14's header).
//
// Expected limiter: DRAM bandwidth (B) at every M <= 64; around it the ring's fill at the start of
// each split and the last CTA's reduction (rung 14's fixed costs). The producer waits on the
// consumers only when the ring is full.
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/15_small_m_tma_wgmma.cu.o): in small_m_tma_wgmma_kernel<T> (T = 1..8) two UTMALDG a K tile
// from the producer lane (SYNCS.ARRIVE.TRANS64 before them), the consumers' loop with 4
// HGMMA.64xNx16.F32.BF16 (N = 8T) between WARPGROUP.ARRIVE and WARPGROUP.DEPBAR, no LDSM, no
// LDGSTS; after it the same STG.E.128 / MEMBAR / ATOMG.E.ADD / LDG.E.128 / STG.E.U16 reduction as
// rung 14; no LDL/STL.
//
// Refuses: M > 64 (the tile rungs' shapes), K % 8 != 0 (TMA needs 16-byte row strides), and like
// rung 14 padded leading dimensions; runs on sm_90 (H100/H200) only.
//
// Run just this rung:
//   kc-bench --filter 'stage3/hgemm/1[45]_' --shapes 1x4096x4096,16x4096x4096,64x4096x4096,64x4096x14336
#include <cuda.h>

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
#include "kc/common/error.hpp"
#include "pipeline.cuh"
#include "split_k_last_cta.cuh"

namespace kc::stage3 {
namespace {

constexpr int kConsumerWarpgroups = kSmallMBlockN / kWarpgroupRows;  // 2: 64 weight rows each
constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
constexpr int kThreads = kConsumerThreads + 32;
constexpr int kStages = 8;  // one CTA an SM (plan_small_m_tma_wgmma): up to 197 KiB of ring at 8 token tiles
constexpr int kTileBytesB = kSmallMBlockN * kTileRowBytes;  // 16 KiB: 128 weight rows x 64 k
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

struct SmallMTmaParams {
  CUtensorMap weights;  // B: N x K, boxes of 128 x 64
  CUtensorMap tokens;   // A: M x K, boxes of 8T x 64
  HgemmArgs args;
  SmallMWeightsAsAPlan plan;
  SmallMWeightsAsAWorkspace workspace;
};

template <int kTokenTiles>
__global__ void __launch_bounds__(kThreads, 1) small_m_tma_wgmma_kernel(const __grid_constant__ SmallMTmaParams params) {
#if KC_STAGE3_SM90A
  using R = Ring<kTokenTiles>;
  constexpr int kConsumerWarps = kConsumerThreads / 32;  // 8; the producer warp comes after them
  constexpr std::uint32_t kStepBytes = kWgmmaK * 2;      // 16 k further along a swizzled row
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = aligned_dynamic_smem(smem_raw);
  std::uint64_t* const full = reinterpret_cast<std::uint64_t*>(smem + R::kBarrierOffset);
  std::uint64_t* const empty = full + kStages;
  const auto stage_at = [&](int stage) { return smem + stage * R::kStageBytes; };

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int column_block = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int col0 = column_block * kSmallMBlockN;
  const int k_tile_begin = params.plan.k_tile_begin(split);
  const int k_tiles = params.plan.k_tile_begin(split + 1) - k_tile_begin;

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      sm90::mbarrier_init(&full[stage], 1);
      sm90::mbarrier_init(&empty[stage], kConsumerWarps);  // lane 0 of every consumer warp
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  float acc[4 * kTokenTiles];
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
  } else {
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

  // Fragment s (the accumulator's 8-column slice s): output columns n0 = col0 + 16 warp + g (and
  // + 8; warp 4w + v is warpgroup w's rows 16v..), tokens m0 = 8s + 2t (and + 1).
  const int g = lane / 4, t = lane % 4;
  const int n0 = col0 + 16 * warp + g;
  split_k::ThreadFragments<kTokenTiles> mine;
  mine.holds = warp < kConsumerWarps;
#pragma unroll
  for (int s = 0; s < kTokenTiles; ++s) mine.value[s] = make_float4(acc[4 * s], acc[4 * s + 1], acc[4 * s + 2], acc[4 * s + 3]);
  const auto store = [&](int s, float4 sum) {
    split_k::store_transposed_fragment(params.args, n0, kSmallMTokensPerTile * s + 2 * t, sum);
  };
  if (!params.plan.needs_workspace()) {
    if (mine.holds)
#pragma unroll
      for (int s = 0; s < kTokenTiles; ++s) store(s, mine.value[s]);
    return;
  }
  constexpr int kSlotVectors = kConsumerThreads * kTokenTiles;  // = partial_tile_floats / 4
  float4* const block_slots = reinterpret_cast<float4*>(params.workspace.partials) +
                              static_cast<std::size_t>(column_block) * params.plan.splits * kSlotVectors;
  split_k::reduce_in_last_cta<kTokenTiles, kSlotVectors>(mine, block_slots, split, params.plan.splits,
                                                         params.workspace.counters + column_block, store);
#endif
}

template <int kTokenTiles>
void launch_instance(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                     const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream, HopperLaunchCache& cache) {
  using R = Ring<kTokenTiles>;
  const void* kernel = reinterpret_cast<const void*>(&small_m_tma_wgmma_kernel<kTokenTiles>);
  cache.prepare_kernel(kernel, R::kSmemBytes);
  SmallMTmaParams params{};
  params.weights = cache.tensor_map(operand_tile_map(args.b, args.n, args.k, kSmallMBlockN));
  params.tokens = cache.tensor_map(operand_tile_map(args.a, args.m, args.k, R::kTokens));
  params.args = args;
  params.plan = plan;
  params.workspace = workspace;
  const dim3 grid(static_cast<unsigned>(plan.n_blocks), static_cast<unsigned>(plan.splits));
  small_m_tma_wgmma_kernel<kTokenTiles><<<grid, kThreads, R::kSmemBytes, stream>>>(params);
  KC_CHECK_LAUNCH();
}

}  // namespace

void hgemm_15_small_m_tma_wgmma(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream,
                                HopperLaunchCache& cache) {
  require_small_m_weights_as_a_launch(args, plan, workspace, "hgemm rung 15");
  switch (plan.token_tiles) {
    case 1: launch_instance<1>(args, plan, workspace, stream, cache); break;
    case 2: launch_instance<2>(args, plan, workspace, stream, cache); break;
    case 3: launch_instance<3>(args, plan, workspace, stream, cache); break;
    case 4: launch_instance<4>(args, plan, workspace, stream, cache); break;
    case 5: launch_instance<5>(args, plan, workspace, stream, cache); break;
    case 6: launch_instance<6>(args, plan, workspace, stream, cache); break;
    case 7: launch_instance<7>(args, plan, workspace, stream, cache); break;
    default: launch_instance<8>(args, plan, workspace, stream, cache); break;
  }
}

}  // namespace kc::stage3
