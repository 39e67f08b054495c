// expert_tile.cuh — where a tile of a grouped GEMM's walk lies, and whether its results may leave by
// TMA store: the pieces the bf16 grouped GEMM (gemm/warp_specialized_gemm.cuh, Config::kGrouped)
// and the FP8 grouped GEMM (quant/fp8/fp8_gemm_kernel.cuh) share. Params: any kernel parameters
// with the tile table (tile_starts, row_starts, groups), n, m (every token) and use_tma_store.
#pragma once

#include "arch/sm90/sm90a.hpp"
#include "hopper_common.cuh"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "tile_scheduler.cuh"

namespace kc::stage3 {

#if KC_STAGE3_SM90A

// The grouped GEMM (Config::kGrouped): tile `linear` of the grid is a tile of one expert's output.
struct ExpertTile {
  TileCoord tile;     // its tile row and column inside the expert's output
  int first_row;      // the expert's first row of A and C
  int rows;           // the expert's rows
  int weight_row;     // the expert's first row of B viewed as G.N x K
};

template <class Config>
__device__ __forceinline__ ExpertTile expert_tile(const typename Config::Params& params, int linear) {
  const GroupedTile t =
      grouped_tile_at(linear, params.tile_starts, params.row_starts, params.groups, Config::kBlockM);
  const int first_row = params.row_starts[t.group];
  return {{t.m, t.n}, first_row, params.row_starts[t.group + 1] - first_row, t.group * params.n};
}

// The tile the consumers compute at step `linear` of the walk: the schedule's (bf16 rungs 06-10, FP8
// rungs) or the expert's (grouped).
template <class Config>
__device__ __forceinline__ TileCoord consumer_tile(const TileSchedule<Config>& schedule,
                                                   const typename Config::Params& params, int linear) {
  if constexpr (Config::kGrouped) {
    return expert_tile<Config>(params, linear).tile;
  } else {
    return schedule.cta_tile(params, linear);
  }
}

// The grouped GEMM with TMA stores (bf16 rungs 04-07, FP8 grouped rungs): whether a consumer's
// 64-row half, starting at row `half_row0` of its expert, may leave through the TMA store. TMA
// clips at the last row of C (the last token), not at an expert's last row: a half that runs past
// its expert's rows into the next expert's must take the guarded direct stores, unless its expert
// is the last one with rows.
template <class Config>
__device__ __forceinline__ bool half_stored_by_tma(const typename Config::Params& params,
                                                   const ExpertTile& expert, int half_row0) {
  const bool inside = half_row0 + kWarpgroupRows <= expert.rows;
  const bool clipped_at_last_token = expert.first_row + expert.rows == params.m;
  return params.use_tma_store && half_row0 < expert.rows && (inside || clipped_at_last_token);
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3
