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
// both K-major (wgmma_m64nNk16_ss_bf16); this K slice is small_m_tma::multiply_k_slice
// (small_m_tma_wgmma.cuh), which rung 16 shares. The accumulator of 8T columns per warpgroup is mma.sync's
// C layout slice by slice, so the swapped fragments, the column blocks of 128, the 64-deep K
// tiles, the workspace and the split-K reduction by the last CTA (split_k_last_cta.cuh, in split
// order: the same bits wherever the last CTA is) are rung 14's. The plan is rung 11's split rule
// with one CTA an SM at every M (plan_small_m_tma_wgmma): rung 14 takes two CTAs an SM from 17
// tokens so that each scheduler has a second warp of mma.sync chains; here no warp has a chain to
// hide. The ring has 4 stages (up to 97 KiB), so that grids of more CTAs than SMs (one split,
// N > 132 x 128) still run in one wave, two or three CTAs an SM; 8 stages measured no faster.
//
// Analysis (not measurements), per CTA and K tile at the H200's ~4.2 TB/s copy roof: 16 KiB of
// weights arrive about every 0.5 us (~900 clocks at 132 SMs); the two warpgroups' 8 WGMMAs are
// 128 x 8T x 64 multiply-adds, 256 tensor-core clocks at 64 tokens (an SM does 2048 dense bf16
// multiply-adds a clock: 989 TFLOPS over 132 SMs at 1.83 GHz), so even at M = 64 the tensor cores
// are busy under a third of the time and the rung should stay bound by the weight stream. In
// flight: up to 4 stages a CTA (64 KiB of weights), against the ~22 KB an SM that Little's law
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
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/util.hpp"
#include "gemm_layout.hpp"
#include "hgemm.hpp"
#include "kc/common/error.hpp"
#include "small_m_tma_wgmma.cuh"
#include "split_k_last_cta.cuh"

namespace kc::stage3 {
namespace {

using small_m_tma::kConsumerThreads;
using small_m_tma::kConsumerWarps;
using small_m_tma::kThreads;

template <int kTokenTiles>
__global__ void __launch_bounds__(kThreads, 1)
    small_m_tma_wgmma_kernel(const __grid_constant__ small_m_tma::Params params) {
#if KC_STAGE3_SM90A
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = aligned_dynamic_smem(smem_raw);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int column_block = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int col0 = column_block * kSmallMBlockN;
  float acc[4 * kTokenTiles];
  small_m_tma::multiply_k_slice<kTokenTiles>(params, smem, acc);

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
  constexpr int kSmemBytes = small_m_tma::Ring<kTokenTiles>::kSmemBytes;
  cache.prepare_kernel(reinterpret_cast<const void*>(&small_m_tma_wgmma_kernel<kTokenTiles>), kSmemBytes);
  const small_m_tma::Params params = small_m_tma::make_params<kTokenTiles>(args, plan, workspace, cache);
  const dim3 grid(static_cast<unsigned>(plan.n_blocks), static_cast<unsigned>(plan.splits));
  small_m_tma_wgmma_kernel<kTokenTiles><<<grid, kThreads, kSmemBytes, stream>>>(params);
  KC_CHECK_LAUNCH();
}

}  // namespace

void hgemm_15_small_m_tma_wgmma(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                const SmallMWeightsAsAWorkspace& workspace, cudaStream_t stream,
                                HopperLaunchCache& cache) {
  require_small_m_weights_as_a_launch(args, plan, workspace, "hgemm rung 15");
  dispatch_token_tiles(args.m, [&](auto tiles) {
    launch_instance<decltype(tiles)::value>(args, plan, workspace, stream, cache);
  });
}

}  // namespace kc::stage3
