// tma_wgmma_kernel.cuh — the kernel of rungs 04 and 05: TMA loads into 128-byte-swizzled shared
// memory completing on mbarriers, consumed by WGMMA. Rung 04 runs it with one warpgroup (64 x 256
// tiles), rung 05 with two (128 x 256 tiles). See the header comments of 04_tma_wgmma.cu and
// 05_two_consumers.cu.
#pragma once

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/util.hpp"
#include "epilogue_direct_store.cuh"
#include "hopper_common.cuh"

namespace kc::stage3 {

struct TmaWgmmaParams {
  CUtensorMap a;  // A: M x K, boxes of (block_m x 64)
  CUtensorMap b;  // B: N x K, boxes of (256 x 64)
  bf16* c;
  int m, n, k;
  LinearCombination linear;
};

template <int kWarpgroups>
struct TmaWgmmaConfig {
  static constexpr int kThreads = kWarpgroups * kWarpgroupThreads;
  static constexpr int kBlockM = kWarpgroups * kWarpgroupRows;
  static constexpr int kBlockN = kHopperBlockN;
  static constexpr int kStages = 4;
  static constexpr int kTileBytesA = kBlockM * kTileRowBytes;
  static constexpr int kTileBytesB = kBlockN * kTileRowBytes;
  static constexpr int kStageBytes = kTileBytesA + kTileBytesB;
  static constexpr int kBarrierBytes = kStages * 8;
  static constexpr int kSmemBytes = kSmemAlignment + kStages * kStageBytes + kBarrierBytes;
  static_assert(kSmemBytes <= kMaxDynamicSmem, "stages do not fit in shared memory");
  static_assert(kTileBytesA % kSmemAlignment == 0, "every tile must stay 1024-byte aligned");
};

// One block computes one block_m x 256 tile of C. Thread 0 is the only one that issues TMA: it
// fills all kStages stages up front, and refills a stage as soon as every warpgroup has finished
// the WGMMAs that read it (wait_group 0, then __syncthreads).
template <int kWarpgroups>
__global__ void __launch_bounds__(TmaWgmmaConfig<kWarpgroups>::kThreads, 1)
    tma_wgmma_kernel(const __grid_constant__ TmaWgmmaParams params) {
#if KC_STAGE3_SM90A
  using Config = TmaWgmmaConfig<kWarpgroups>;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* smem = aligned_dynamic_smem(smem_raw);
  const auto tile_a = [&](int stage) { return smem + stage * Config::kStageBytes; };
  const auto tile_b = [&](int stage) { return smem + stage * Config::kStageBytes + Config::kTileBytesA; };
  auto* full = reinterpret_cast<std::uint64_t*>(smem + Config::kStages * Config::kStageBytes);

  const int block_row0 = blockIdx.x * Config::kBlockM;
  const int block_col0 = blockIdx.y * Config::kBlockN;
  const int k_tiles = ceil_div(params.k, kHopperBlockK);
  const bool is_loader = threadIdx.x == 0;

  if (is_loader) {
    for (int stage = 0; stage < Config::kStages; ++stage) sm90::mbarrier_init(&full[stage], 1);
    sm90::fence_barrier_init();
  }
  __syncthreads();

  const auto load_k_tile = [&](int k_tile) {
    const int stage = k_tile % Config::kStages;
    sm90::mbarrier_arrive_expect_tx(&full[stage], Config::kStageBytes);
    sm90::tma_load_2d(tile_a(stage), &params.a, &full[stage], k_tile * kHopperBlockK, block_row0);
    sm90::tma_load_2d(tile_b(stage), &params.b, &full[stage], k_tile * kHopperBlockK, block_col0);
  };
  if (is_loader)
    for (int k_tile = 0; k_tile < k_tiles && k_tile < Config::kStages; ++k_tile) load_k_tile(k_tile);

  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  float acc[kAccumulators];
#pragma unroll
  for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.f;

  for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
    const int stage = k_tile % Config::kStages;
    sm90::mbarrier_wait(&full[stage], (k_tile / Config::kStages) % 2);
    wgmma_k_step(acc, smem_u32(tile_a(stage)) + warpgroup * kWarpgroupRows * kTileRowBytes,
                 smem_u32(tile_b(stage)));
    sm90::wgmma_wait_group<0>();
    __syncthreads();  // every warpgroup is done reading this stage
    if (is_loader && k_tile + Config::kStages < k_tiles) load_k_tile(k_tile + Config::kStages);
  }
  sm90::fence_accumulators(acc);

  store_accumulators_direct(params.c, params.m, params.n, block_row0 + warpgroup * kWarpgroupRows,
                            block_col0, acc, params.linear, Identity{});
#endif
}

// Host side: tensor maps from the cache, the grid of one block per tile, the launch.
template <int kWarpgroups>
void launch_tma_wgmma(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = TmaWgmmaConfig<kWarpgroups>;
  const void* kernel = reinterpret_cast<const void*>(&tma_wgmma_kernel<kWarpgroups>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);
  TmaWgmmaParams params{};
  params.a = cache.tensor_map(operand_tile_map(args.a, args.m, args.k, Config::kBlockM));
  params.b = cache.tensor_map(operand_tile_map(args.b, args.n, args.k, Config::kBlockN));
  params.c = args.c;
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.linear = linear_combination(args);
  const dim3 grid(ceil_div(args.m, Config::kBlockM), ceil_div(args.n, Config::kBlockN));
  tma_wgmma_kernel<kWarpgroups><<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(params);
}

}  // namespace kc::stage3
