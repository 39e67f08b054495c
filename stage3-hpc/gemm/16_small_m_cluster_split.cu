// Rung 16 — small M (decode) on Hopper, the splits of K as one cluster: rung 15's K slices, added
// through distributed shared memory by every CTA of the column block instead of by the last one
// through L2.
//
// Idea: rungs 14 and 15 end each column block the same way: every split writes its FP32 partial
// tile to global memory, fences, counts itself with an atomic, and the last CTA to arrive reads the
// other splits' tiles back from L2 and adds them alone, while the SMs of the other splits have
// nothing left to do. Measured (stage-3 README, rung 15), that tail is what keeps both rungs below
// cuBLAS once the partial tiles are large (many tokens) or many (narrow weights, many splits).
// Hopper can do the same additions without global memory: launch the splits of a column block as
// one thread-block cluster (they run together on one GPC), let each CTA leave its partial tile in
// its own shared memory, and let every CTA add one splits-th of the tile, reading the others'
// shared memory directly (distributed shared memory: mapa + ld.shared::cluster). One cluster
// barrier before the reads, one after; no workspace, no counters, no atomics, no global fence, and
// the additions spread over all the block's SMs instead of one.
//
// What changed from rung 15: only the end of the kernel and the launch (a cluster of `splits` CTAs
// along the grid's y). The K slice is rung 15's (small_m_tma_wgmma.cuh: the TMA ring, the producer
// warp, wgmma m64nNk16 with both operands from shared memory). After it the ring is free, so a
// CTA's partial tile (128 columns x 8T tokens of FP32, at most 32 KiB) goes to the start of its
// shared memory in fragment order (float4 (warp, s, lane) at (warp x T + s) x 32 + lane, as rung
// 14's slots); after the cluster barrier (barrier.cluster.arrive.release / wait.acquire: the writes
// of every CTA visible to all) the CTA of rank r adds vectors [r V / S, (r + 1) V / S) of the tile
// over ranks 0..S-1 in rank order — the same additions in the same order as rungs 14 and 15, so the
// same bits — applies alpha and beta and stores its share of C; a second cluster barrier keeps every
// CTA (and its shared memory) alive until the others have read it. The plan is rung 15's with at
// most 8 splits (plan_small_m_cluster_split: 8 is the cluster size every sm_90 GPU runs), which
// matters only where N is small (N = 1024: 8 column blocks x 8 splits = 64 CTAs, not 128).
//
// Analysis (not measurements): at 64 tokens and 4 splits the last CTA of rung 15 reads 3 x 32 KiB
// from L2 after a fence to global memory and an atomic round trip, then adds 4 tiles; here each of
// the 4 CTAs reads 4 x 8 KiB of distributed shared memory (3 remote) after one cluster barrier and
// adds a quarter of the tile. At 64 x 2048 x 2048 (8 splits of 4 K tiles), where rung 15's last CTA
// reads 7 x 32 KiB — more than the 64 KiB of weights each CTA streams — the reduction becomes 8 x 4
// KiB a CTA.
//
// Expected limiter: DRAM bandwidth (B) where the tail was the loss; the launch and the ring's fill
// remain. A cluster of S CTAs must fit on one GPC at once (97 KiB of shared memory a CTA at 8 token
// tiles: two an SM), which the grids of the plan (one CTA an SM, at most 8 a cluster) allow.
//
// SASS to look for (cuobjdump -sass -arch sm_90a <build>/stage3-hpc/CMakeFiles/kc_stage3.dir/
// gemm/16_small_m_cluster_split.cu.o): in small_m_cluster_split_kernel<T> rung 15's K loop
// (UTMALDG, 4 HGMMA between WARPGROUP.ARRIVE and WARPGROUP.DEPBAR), then UCGABAR_ARV / UCGABAR_WAIT
// (the cluster barriers) around LD.E.128 (the other CTAs' shared memory through the cluster
// window), no ATOMG, no STG.E.128 of partials; no LDL/STL. The <T, true> instances are the
// negative control nc_cluster_split_reads_rank_0_twice.
//
// Refuses: as rung 15 (M > 64, K % 8 != 0, padded leading dimensions); runs on sm_90 only.
//
// Run just this rung:
//   kc-bench --filter 'stage3/hgemm/1[56]_' --shapes 16x4096x4096,64x4096x4096,64x2048x2048,64x1024x4096
#include <cuda.h>

#include <cstdint>

#include "arch/sm90/cluster.cuh"
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

// kReadsRankZeroForTheLast: the negative control's flaw (the last rank's partial tile replaced by
// rank 0's in the additions); false in the rung.
template <int kTokenTiles, bool kReadsRankZeroForTheLast>
__global__ void __launch_bounds__(kThreads, 1)
    small_m_cluster_split_kernel(const __grid_constant__ small_m_tma::Params params) {
#if KC_STAGE3_SM90A
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = aligned_dynamic_smem(smem_raw);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int column_block = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int splits = params.plan.splits;
  const int col0 = column_block * kSmallMBlockN;
  float acc[4 * kTokenTiles];
  small_m_tma::multiply_k_slice<kTokenTiles>(params, smem, acc);

  // Vector v of a tile in fragment order: warp v / 32T, slice (v / 32) % T, lane v % 32; its
  // outputs are columns col0 + 16 warp + g (+ 8) and tokens 8 slice + 2t (+ 1), g = lane / 4, t = lane % 4.
  const auto store = [&](int v, float4 sum) {
    const int w = v / (32 * kTokenTiles), s = (v / 32) % kTokenTiles, l = v % 32;
    split_k::store_transposed_fragment(params.args, col0 + 16 * w + l / 4, kSmallMTokensPerTile * s + 2 * (l % 4), sum);
  };
  const int first_vector = (warp * kTokenTiles) * 32 + lane;  // this thread's fragment 0
  if (splits == 1) {  // the whole K in this CTA: store from registers
    if (warp < kConsumerWarps)
#pragma unroll
      for (int s = 0; s < kTokenTiles; ++s)
        store(first_vector + 32 * s, make_float4(acc[4 * s], acc[4 * s + 1], acc[4 * s + 2], acc[4 * s + 3]));
    return;
  }

  // The partial tile into this CTA's shared memory, where the ring was: every consumer has finished
  // reading the ring (its last wgmma waited for) once the CTA barrier is passed.
  constexpr int kTileVectors = kConsumerThreads * kTokenTiles;
  float4* const partial = reinterpret_cast<float4*>(smem);
  __syncthreads();
  if (warp < kConsumerWarps)
#pragma unroll
    for (int s = 0; s < kTokenTiles; ++s)
      partial[first_vector + 32 * s] = make_float4(acc[4 * s], acc[4 * s + 1], acc[4 * s + 2], acc[4 * s + 3]);
  sm90::cluster_sync();  // every CTA's partial tile is written and visible to the cluster

  // This CTA's share of the tile, added over the ranks in rank order (rank = split: the cluster is
  // the grid's column of splits).
  const int share = (kTileVectors + splits - 1) / splits;
  const int end = min(kTileVectors, (split + 1) * share);
  const std::uint32_t partial_address = smem_u32(partial);
  for (int v = split * share + static_cast<int>(threadIdx.x); v < end; v += kThreads) {
    const std::uint32_t address = partial_address + static_cast<std::uint32_t>(v) * sizeof(float4);
    float4 values[kSmallMMaxClusterSplits];
#pragma unroll
    for (int rank = 0; rank < kSmallMMaxClusterSplits; ++rank)
      if (rank < splits) {
        const int source = kReadsRankZeroForTheLast && rank == splits - 1 ? 0 : rank;
        values[rank] = sm90::ld_shared_cluster_f32x4(address, static_cast<std::uint32_t>(source));
      }
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int rank = 0; rank < kSmallMMaxClusterSplits; ++rank)
      if (rank < splits) sum = split_k::add(sum, values[rank]);
    store(v, sum);
  }
  sm90::cluster_sync();  // no CTA exits while another may still read its shared memory
#endif
}

template <int kTokenTiles, bool kReadsRankZeroForTheLast>
void launch_instance(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, cudaStream_t stream,
                     HopperLaunchCache& cache) {
  constexpr auto kernel = &small_m_cluster_split_kernel<kTokenTiles, kReadsRankZeroForTheLast>;
  constexpr int kSmemBytes = small_m_tma::Ring<kTokenTiles>::kSmemBytes;
  static_assert(kConsumerThreads * kTokenTiles * 16 <= small_m_tma::Ring<kTokenTiles>::kBarrierOffset,
                "the partial tile fits where the ring was");
  cache.prepare_kernel(reinterpret_cast<const void*>(kernel), kSmemBytes);
  const small_m_tma::Params params = small_m_tma::make_params<kTokenTiles>(args, plan, {}, cache);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(plan.n_blocks), static_cast<unsigned>(plan.splits), 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = static_cast<unsigned>(plan.splits);  // the splits of one column block
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  KC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params));
}

template <bool kReadsRankZeroForTheLast>
void launch(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan, cudaStream_t stream, HopperLaunchCache& cache) {
  require_small_m_swapped_plan(args, plan, "hgemm rung 16");
  require(plan.splits <= kSmallMMaxClusterSplits,
          "hgemm rung 16: {} splits, but a cluster holds the splits of a column block and at most {} CTAs "
          "(make the plan with plan_small_m_cluster_split)",
          plan.splits, kSmallMMaxClusterSplits);
  dispatch_token_tiles(args.m, [&](auto tiles) {
    launch_instance<decltype(tiles)::value, kReadsRankZeroForTheLast>(args, plan, stream, cache);
  });
}

}  // namespace

void hgemm_16_small_m_cluster_split(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                    const SmallMWeightsAsAWorkspace& /*workspace*/, cudaStream_t stream,
                                    HopperLaunchCache& cache) {
  launch<false>(args, plan, stream, cache);
}

void hgemm_16_small_m_cluster_split_reads_rank_0_twice(const HgemmArgs& args, const SmallMWeightsAsAPlan& plan,
                                                       const SmallMWeightsAsAWorkspace& /*workspace*/,
                                                       cudaStream_t stream, HopperLaunchCache& cache) {
  launch<true>(args, plan, stream, cache);
}

}  // namespace kc::stage3
