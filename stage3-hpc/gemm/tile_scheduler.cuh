// tile_scheduler.cuh — which 128 x 256 output tiles a CTA of the warp-specialized kernel
// (rungs 06-10) computes, in which order, and how many CTAs the launch has.
//
// The unit of scheduling is the cluster tile: kClusterM tiles stacked along M that the CTAs of one
// cluster compute together, sharing their B tile (rung 08; without clusters a cluster tile is one
// tile). Cluster c of a grid of C clusters computes cluster tiles c, c + C, c + 2C, ... in
// grouped raster order (grouped_tile, gemm_layout.hpp: bands of tile rows walked column by column,
// so the tiles in flight at once share a few A and B panels in L2).
//
//   one_tile_per_block  (rung 06) a grid of one cluster per cluster tile, and one band as high as
//                       the matrix: plain column-major order, the order of an ordinary grid.
//   persistent          (rungs 07-10) only as many clusters as are resident at once, each looping
//                       over its tiles: setup is paid once per CTA, and the producer already loads
//                       the next tile while the consumers store the last one.
//
// Every part of the kernel (producer, consumers, rung 10's epilogue warps) walks the same
// sequence, which is what keeps their barrier arrivals and waits paired.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "arch/sm90/cluster.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma_descriptor.hpp"
#include "gemm_layout.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "split_k_last_cta.cuh"

namespace kc::stage3 {

// How the output tiles are handed out.
enum class Schedule {
  one_tile_per_block,  // grid = number of tiles, plain column-major order
  persistent,          // grid = what fits on the GPU at once, grouped raster order
};

// Host side: sets params.raster_band for `schedule` and returns how many clusters to launch.
// raster_band (persistent schedule only) is in tile rows; params.cluster_tiles_m and
// params.tiles_n must be set.
template <class Config>
int schedule_clusters(typename Config::Params& params, Schedule schedule, int raster_band,
                      HopperLaunchCache& cache, const void* kernel) {
  const int cluster_tiles = params.cluster_tiles_m * params.tiles_n;
  if (schedule == Schedule::one_tile_per_block) {
    params.raster_band = params.cluster_tiles_m;  // one band: m fastest, like a plain grid
    return cluster_tiles;
  }
  params.raster_band = std::max(1, raster_band / Config::kClusterM);  // in cluster tile rows
  const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes,
                                             Config::kClusterM) / Config::kClusterM;
  return std::min(cluster_tiles, resident);
}

// Host side: launches `kernel` as `clusters` clusters of Config::kClusterM CTAs along x (plain
// CTAs when it is 1), Config::kThreads threads and Config::kSmemBytes of dynamic shared memory
// each, on `stream`.
template <class Config, typename Params>
void launch_clusters(void (*kernel)(Params), int clusters, cudaStream_t stream, const Params& params) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(clusters * Config::kClusterM), 1, 1);
  config.blockDim = dim3(Config::kThreads, 1, 1);
  config.dynamicSmemBytes = Config::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute cluster_attribute{};
  cluster_attribute.id = cudaLaunchAttributeClusterDimension;
  cluster_attribute.val.clusterDim.x = Config::kClusterM;
  cluster_attribute.val.clusterDim.y = 1;
  cluster_attribute.val.clusterDim.z = 1;
  if (Config::kClusterM > 1) {
    config.attrs = &cluster_attribute;
    config.numAttrs = 1;
  }
  KC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params));
}

// Grouped rungs 06-07 and FP8 rung 12: the split of the last wave for `tiles` tiles on `resident`
// CTAs (plan_grouped_split_last_wave), written into params (whole_tiles, splits, units and, where it
// splits, the workspace and counters, which must hold what the pieces need); returns the grid.
template <class Config>
int plan_split_last_wave(typename Config::Params& params, int tiles, int resident, int k_tiles,
                         const GroupedSplitWorkspace* workspace, const char* op, const char* rung) {
  const GroupedSplitPlan plan = plan_grouped_split_last_wave(tiles, resident, k_tiles);
  const int split_tiles = tiles - plan.whole_tiles;
  params.whole_tiles = plan.whole_tiles;
  params.splits = plan.splits;
  params.units = plan.whole_tiles + split_tiles * plan.splits;
  if (plan.splits > 1) {
    const std::size_t vectors =
        static_cast<std::size_t>(split_tiles) * Config::kConsumers * plan.splits * Config::kSplitSlotVectors;
    const std::size_t counters = static_cast<std::size_t>(split_tiles) * Config::kConsumers;
    require(workspace != nullptr && workspace->slots != nullptr && workspace->counters != nullptr &&
                workspace->slot_vectors >= vectors && workspace->counter_count >= counters,
            "{} {}: splitting the last {} tiles {} ways needs a workspace of {} float4 slots and {} counters "
            "(grouped_split_workspace_vectors / _counters)",
            op, rung, split_tiles, plan.splits, vectors, counters);
    params.workspace = workspace->slots;
    params.counters = workspace->counters;
  }
  return std::min(params.units, resident);
}

#if KC_STAGE3_SM90A

// This CTA's walk over the cluster tiles: first, first + step, ... below count.
template <class Config>
struct TileSchedule {
  std::uint32_t cta_rank;  // this CTA's place in its cluster (0 without clusters)
  int first;               // this cluster's index in the grid
  int step;                // clusters in the grid
  int count;               // cluster tiles in the problem

  // The tile of C that cluster tile `linear` gives to this CTA: clusters split a 2-tile-high strip
  // along M, and both CTAs share its B tile (multicast).
  __device__ __forceinline__ TileCoord cta_tile(const typename Config::Params& params, int linear) const {
    const TileCoord cluster_tile =
        grouped_tile(linear, params.cluster_tiles_m, params.tiles_n, params.raster_band);
    return {cluster_tile.m * Config::kClusterM + static_cast<int>(cta_rank), cluster_tile.n};
  }

  // Whether `linear` is this CTA's last tile.
  __device__ bool is_last(int linear) const { return linear + step >= count; }
};

template <class Config>
__device__ __forceinline__ TileSchedule<Config> tile_schedule(const typename Config::Params& params) {
  TileSchedule<Config> schedule;
  schedule.cta_rank = Config::kClusterM > 1 ? sm90::cluster_cta_rank() : 0;
  schedule.first = Config::kClusterM > 1 ? static_cast<int>(sm90::cluster_id_x()) : blockIdx.x;
  schedule.step = Config::kClusterM > 1 ? static_cast<int>(sm90::cluster_count_x()) : gridDim.x;
  if constexpr (Config::kSplitLastWave)
    schedule.count = params.units;  // whole tiles, then the last wave's K pieces (grouped rung 06)
  else if constexpr (Config::kGrouped)
    schedule.count = params.tiles;  // every expert's tiles, end to end (grouped_gemm_args.hpp)
  else
    schedule.count = params.cluster_tiles_m * params.tiles_n;
  return schedule;
}

// A step of a CTA's walk: a whole tile (tile index `tile` of the walk, K steps 0 .. k_tiles - 1),
// or, in grouped rungs 06-07 and FP8 rung 12, one of `splits` pieces of a tile past the last whole wave: its K steps
// k_tile_begin .. k_tile_end - 1, piece `split`. Work unit u goes to CTA u % grid; the whole tiles
// are a multiple of the grid, so each CTA runs the same number of them, then at most one piece.
struct WorkUnit {
  int tile;
  int k_tile_begin, k_tile_end;
  int split;  // -1: a whole tile
};

template <class Config>
__device__ __forceinline__ WorkUnit work_unit(const typename Config::Params& params, int unit, int k_tiles) {
  if constexpr (Config::kSplitLastWave) {
    if (unit >= params.whole_tiles) {
      const int piece = unit - params.whole_tiles;
      const int split = piece % params.splits;
      return {params.whole_tiles + piece / params.splits, split * k_tiles / params.splits,
              (split + 1) * k_tiles / params.splits, split};
    }
  }
  return {unit, 0, k_tiles, -1};
}

// Grouped rungs 06-07 and FP8 rung 12: a consumer's sums of one piece of a split tile (its
// kAccumulatorCount a thread: 128 in the grouped GEMM, FP8's promoted 96) go to its slot of the
// workspace; the consumer half that arrives last (over all the tile's pieces) adds them in split
// order into `acc` and returns true — it stores the tile; the others return false. Per consumer
// warpgroup, on its named barrier: the producer warpgroup is already loading the next work unit.
// kAddsFirstPieceTwice: the flaw of the grouped GEMM's negative control nc_split_pieces_added_twice.
template <class Config, bool kAddsFirstPieceTwice = false, int kAccumulatorCount>
__device__ __forceinline__ bool add_pieces_in_last(const typename Config::Params& params, const WorkUnit& unit,
                                                   int consumer, float (&acc)[kAccumulatorCount]) {
  constexpr int kFragments = kAccumulatorCount / 4;
  split_k::ThreadFragments<kFragments> mine;
#pragma unroll
  for (int f = 0; f < kFragments; ++f) mine.value[f] = make_float4(acc[4 * f], acc[4 * f + 1], acc[4 * f + 2], acc[4 * f + 3]);
  const int half = (unit.tile - params.whole_tiles) * Config::kConsumers + consumer;
  float4* const slots = params.workspace + static_cast<std::size_t>(half) * params.splits * Config::kSplitSlotVectors;
  // Four fragments a group; its own piece read back from the L2 like the others, so that the
  // accumulators are free while the sums are made (kept in registers, the grouped GEMM's spilled).
  return split_k::reduce_in_last_cta<kFragments, Config::kSplitSlotVectors, kAddsFirstPieceTwice,
                                     /*kFragmentsAtOnce=*/4, /*kOwnSplitFromRegisters=*/false,
                                     split_k::WarpgroupTeam>(
      mine, slots, unit.split, params.splits, params.counters + half,
      [&](int f, float4 sum) {
        acc[4 * f] = sum.x;
        acc[4 * f + 1] = sum.y;
        acc[4 * f + 2] = sum.z;
        acc[4 * f + 3] = sum.w;
      },
      split_k::WarpgroupTeam{1 + consumer});
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3
