// warp_specialized_gemm.cuh — the kernel of rungs 06-10, composed of its parts: a producer
// warpgroup feeding two consumer warpgroups through a ring of shared-memory stages, a tile loop,
// optional clusters with TMA multicast, and a choice of epilogue. Each rung file picks one
// configuration and says what it adds:
//
//   06 warp specialization   one tile per block                   direct stores
//   07 persistent            one block per SM, grouped raster     direct stores
//   08 clusters + multicast  as 07, 2 CTAs share each B tile      direct stores
//   09 TMA store epilogue    as 07, raster bands of 16 tile rows  smem + TMA store
//                            instead of 8 (TmaStoreConfig)
//   10 fused bias + GELU     as 09, gelu(acc + bias) computed by  smem + TMA store
//                            the producer warpgroup's idle warps
//   grouped GEMM, rung 03    as 07, the tiles of every expert of  direct stores, at each
//   (GroupedConfig,          a mixture-of-experts layer, found   expert's rows
//   Config::kGrouped)        in a table of prefix sums
//   grouped GEMM, rung 04    as grouped 03                        smem + TMA store where a
//                                                                 64-row half lies in its expert
//   grouped GEMM, rung 05    as grouped 04, a consumer whose      as grouped 04
//                            rows all lie past its expert's
//                            issues no WGMMA
//   grouped GEMM, rung 06    as grouped 05, the last wave's       as grouped 04, by the
//                            tiles split along K                  last piece to finish
//   grouped GEMM, rung 07    as grouped 06, 64 rows of A for a    as grouped 06
//                            tile whose second half is empty
//
// The parts, each in its own file:
//   warp_specialized_config.cuh         the knobs (WarpSpecializedConfig), the kernel parameters,
//                                       TmaStoreConfig and OffloadedActivationConfig
//   pipeline.cuh                        the stage ring: its full/empty mbarriers, the producer's
//                                       TMA loads of a tile, the consumers' wait and release
//   tile_scheduler.cuh                  which tiles a CTA computes, in which order; the grid
//   epilogue_direct_store.cuh           registers -> C (rungs 06-08)
//   epilogue_tma_store.cuh              registers -> swizzled shared memory -> TMA (rung 09)
//   epilogue_offloaded_activation.cuh   the consumers hand the tile to the epilogue warps (10)
//
// What stays here is the composition: the shared-memory layout, the roles of the warpgroups, the
// consumers' mainloop (K steps of WGMMA over the ring) and the choice of epilogue per tile.
//
// Shared memory, from its 1024-byte aligned start: the kStages A tiles, the kStages B tiles, the
// consumers' store buffers (TMA epilogues only), then the barriers: full[] and empty[] per stage
// and, with the offloaded activation, epilogue_full[] and epilogue_empty[] per consumer buffer.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "arch/sm90/cluster.cuh"
#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/util.hpp"
#include "epilogue_direct_store.cuh"
#include "epilogue_offloaded_activation.cuh"
#include "epilogue_tma_store.cuh"
#include "expert_tile.cuh"
#include "hopper_common.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "pipeline.cuh"
#include "split_k_last_cta.cuh"
#include "tile_scheduler.cuh"
#include "warp_specialized_config.cuh"

namespace kc::stage3 {

#if KC_STAGE3_SM90A

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    warp_specialized_gemm_kernel(const __grid_constant__ typename Config::Params params) {
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* smem = aligned_dynamic_smem(smem_raw);
  std::uint8_t* epilogue_buffer = smem + Config::kStages * Config::kStageBytes;
  auto* barriers = reinterpret_cast<std::uint64_t*>(epilogue_buffer + Config::kEpilogueBytes);
  const StageRing<Config> ring{smem, barriers, barriers + Config::kStages};
  // tma_store_offloaded only: the handoff of each consumer's store buffer.
  std::uint64_t* epilogue_full = barriers + 2 * Config::kStages;
  std::uint64_t* epilogue_empty = epilogue_full + Config::kConsumers;

  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  const TileSchedule<Config> schedule = tile_schedule<Config>(params);
  const int k_tiles = ceil_div(params.k, kHopperBlockK);

  if (threadIdx.x == 0) {
    ring.init_barriers();
    if constexpr (Config::kOffloadedActivation)
      init_handoff_barriers<Config>(epilogue_full, epilogue_empty);
    sm90::fence_barrier_init();
  }
  // Barriers must be initialised in every CTA before any peer multicasts into it or arrives on it.
  if constexpr (Config::kClusterM > 1)
    sm90::cluster_sync();
  else
    __syncthreads();

  if (warpgroup == 0) {
    // ---- producer: one thread issues every TMA copy; with the offloaded activation, warps 1-3
    // run the epilogue's activation and stores ----
    sm90::setmaxnreg_decrease<Config::kProducerRegisters>();
    if constexpr (Config::kOffloadedActivation) {
      if (threadIdx.x >= 32)
        run_offloaded_activation<Config>(params, epilogue_buffer, epilogue_full, epilogue_empty,
                                         schedule);
    }
    if (threadIdx.x == 0) {
      PipelineState<Config::kStages> state;
      for (int linear = schedule.first; linear < schedule.count; linear += schedule.step) {
        if constexpr (Config::kGrouped) {
          // Rows past the expert's last one load the next expert's tokens (or zeros past the
          // last token): their results are never stored.
          WorkUnit unit{linear, 0, k_tiles, -1};  // a whole tile but in rungs 06-07
          if constexpr (Config::kSplitLastWave) unit = work_unit<Config>(params, linear, k_tiles);
          const ExpertTile e = expert_tile<Config>(params, unit.tile);
          if constexpr (Config::kHalfATiles) {
            // Rung 07: the second half is empty (its consumer skips it): 64 rows of A are enough.
            if (e.rows - e.tile.m * Config::kBlockM <= kWarpgroupRows) {
              ring.load_rows(params, state, e.first_row + e.tile.m * Config::kBlockM,
                             e.weight_row + e.tile.n * Config::kBlockN, unit.k_tile_end, unit.k_tile_begin,
                             &params.a_half, Config::kTileBytesA / 2 + Config::kTileBytesB);
              continue;
            }
          }
          ring.load_rows(params, state, e.first_row + e.tile.m * Config::kBlockM,
                         e.weight_row + e.tile.n * Config::kBlockN, unit.k_tile_end, unit.k_tile_begin);
        } else {
          ring.load_tile(params, state, schedule.cta_tile(params, linear), schedule.cta_rank, k_tiles);
        }
      }
    }
  } else {
    // ---- consumers: WGMMA on their 64-row half, then the epilogue ----
    sm90::setmaxnreg_increase<Config::kConsumerRegisters>();
    const int consumer = warpgroup - 1;
    // The ring as this consumer's mainloop uses it. The mainloop reaches the ring's members
    // through these lambdas, not directly: both compile to the same instructions, but calling the
    // members directly renumbers registers in rungs 06-08, whose SASS is that of these lambdas.
    const int lane = threadIdx.x % 32;
    const auto release = [&](int stage) { ring.release(stage, lane); };
    const auto tile_a = [&](int stage) { return ring.tile_a(stage); };
    const auto tile_b = [&](int stage) { return ring.tile_b(stage); };

    std::uint8_t* const buffer = epilogue_buffer + consumer * Config::kEpilogueBytesPerConsumer;
    // tma_store_offloaded: uses of this consumer's buffer (mod 2), and the last pass of the
    // previous tile while it waits for this tile's mainloop (epilogue_offloaded_activation.cuh).
    std::uint32_t epilogue_phase = 0;
    PassResults<Config> held_pass;
    bool holding_pass = false;

    PipelineState<Config::kStages> state;
    float acc[kAccumulators];
    for (int linear = schedule.first; linear < schedule.count; linear += schedule.step) {
      // A whole tile but in rungs 06-07, whose pieces of the last wave's tiles take part of K. (The
      // other configurations use `linear`, k_tiles and 0 themselves: through `unit` the compiler
      // allocates their registers differently, and their SASS would change.)
      WorkUnit unit{linear, 0, k_tiles, -1};
      if constexpr (Config::kSplitLastWave) unit = work_unit<Config>(params, linear, k_tiles);
      const int tile_index = Config::kSplitLastWave ? unit.tile : linear;
      const TileCoord tile = consumer_tile<Config>(schedule, params, tile_index);
      const bool last_tile = schedule.is_last(linear);
      const int col0 = tile.n * Config::kBlockN;
      // Rung 05 (grouped) skips the WGMMAs of a half whose rows all lie past its expert's: they
      // would never be stored.
      bool computes = true;
      if constexpr (Config::kSkipHalvesPastExpert)
        computes = tile.m * Config::kBlockM + consumer * kWarpgroupRows < expert_tile<Config>(params, tile_index).rows;
#pragma unroll
      for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.f;
      // The TMA epilogue's first per-column operands (rung 10's bias), loaded now: their latency
      // hides behind the mainloop. With the offloaded activation only the last tile needs them.
      PassColumns<Config> first_columns{};
      if (Config::kEpilogue == EpilogueKind::tma_store || (Config::kOffloadedActivation && last_tile))
        first_columns = load_pass_columns<Config>(params, col0, 0);

      // Keep one K step of WGMMAs in flight: after issuing step k, wait until only it is running,
      // which means step k - 1 has finished reading its stage, and release that stage.
      const int held_pass_step = k_tiles / 2;
      int previous_stage = 0;
      const int k_tile_begin = Config::kSplitLastWave ? unit.k_tile_begin : 0;
      const int k_tile_end = Config::kSplitLastWave ? unit.k_tile_end : k_tiles;
      for (int k_tile = k_tile_begin; k_tile < k_tile_end; ++k_tile) {
        ring.wait_full(state);
        if (computes)
          wgmma_k_step(acc, smem_u32(tile_a(state.stage)) + consumer * kWarpgroupRows * kTileRowBytes,
                       smem_u32(tile_b(state.stage)));
        if constexpr (Config::kOffloadedActivation) {
          // The previous tile's last pass goes out while this step's WGMMAs run. holding_pass
          // and k_tile are the same in every thread of the warpgroup, as the barrier requires.
          if (holding_pass && k_tile == held_pass_step) {
            hand_over_pass<Config>(buffer, &epilogue_full[consumer], &epilogue_empty[consumer],
                                   epilogue_phase, consumer, held_pass);
            holding_pass = false;
          }
        }
        sm90::wgmma_wait_group<1>();
        if (k_tile > k_tile_begin) release(previous_stage);
        previous_stage = state.stage;
        state.advance();
      }
      sm90::wgmma_wait_group<0>();
      release(previous_stage);
      sm90::fence_accumulators(acc);
      if constexpr (Config::kSplitLastWave) {
        // A piece of a split tile: only the consumer half that adds the pieces stores. An empty
        // half is empty in every piece of its tile: none of them writes or counts.
        if (unit.split >= 0 &&
            (!computes || !add_pieces_in_last<Config, Config::kAddsFirstPieceTwice>(params, unit, consumer, acc)))
          continue;
      }

      if (tile.m < params.tiles_m) {
        if constexpr (Config::kGrouped) {
          // C at the expert's first row. TMA stores where half_stored_by_tma allows; else M = the
          // expert's rows, and the edge guards keep every store inside the expert.
          const ExpertTile expert = expert_tile<Config>(params, tile_index);
          const int expert_half_row0 = tile.m * Config::kBlockM + consumer * kWarpgroupRows;
          if constexpr (Config::kEpilogue == EpilogueKind::tma_store) {
            if (half_stored_by_tma<Config>(params, expert, expert_half_row0)) {
              store_accumulators_tma<Config>(params, buffer, consumer, expert.first_row + expert_half_row0,
                                             col0, acc, first_columns);
              continue;
            }
          }
          store_accumulators_direct(params.c_pointer + static_cast<std::size_t>(expert.first_row) * params.n,
                                    expert.rows, params.n, expert_half_row0, col0, acc, params.linear,
                                    params.activation);
          continue;
        }
        const int row0 = tile.m * Config::kBlockM + consumer * kWarpgroupRows;
        if constexpr (Config::kEpilogue == EpilogueKind::tma_store) {
          if (params.use_tma_store) {
            store_accumulators_tma<Config>(params, buffer, consumer, row0, col0, acc, first_columns);
            continue;
          }
        }
        if constexpr (Config::kOffloadedActivation) {
          if (params.use_tma_store && !last_tile) {
            holding_pass = hand_over_accumulators<Config>(
                params, buffer, &epilogue_full[consumer], &epilogue_empty[consumer], epilogue_phase,
                consumer, row0, col0, acc, held_pass);
            continue;
          }
          if (params.use_tma_store) {
            // The last tile: once the epilogue warps have released the buffer for good, the
            // consumers apply the activation themselves.
            sm90::mbarrier_wait(&epilogue_empty[consumer], epilogue_phase ^ 1);
            store_accumulators_tma<Config>(params, buffer, consumer, row0, col0, acc, first_columns);
            continue;
          }
        }
        store_accumulators_direct(params.c_pointer, params.m, params.n, row0, col0, acc, params.linear,
                                  params.activation);
      }
    }
    if constexpr (Config::kStoresThroughSmem)
      if (threadIdx.x % kWarpgroupThreads == 0) sm90::tma_store_wait_all();
  }
  // No CTA may exit while its peer can still arrive on its barriers or multicast into it.
  if constexpr (Config::kClusterM > 1) sm90::cluster_sync();
}

#else  // not the sm_90a device pass: an empty kernel the launch code never runs

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    warp_specialized_gemm_kernel(const __grid_constant__ typename Config::Params) {}

#endif  // KC_STAGE3_SM90A

// raster_band (persistent schedule only) overrides Config::kRasterBandTileRows: the tuner tries
// several bands on one compiled kernel.
template <class Config>
void launch_warp_specialized(const HgemmArgs& args, const typename Config::Activation& activation,
                             Schedule schedule, cudaStream_t stream, HopperLaunchCache& cache,
                             int raster_band = Config::kRasterBandTileRows) {
  require(raster_band >= 1, "the raster band must be at least one tile row (got {})", raster_band);
  const void* kernel = reinterpret_cast<const void*>(&warp_specialized_gemm_kernel<Config>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);

  typename Config::Params params{};
  params.a = cache.tensor_map(operand_tile_map(args.a, args.m, args.k, Config::kBlockM));
  params.b = cache.tensor_map(operand_tile_map(args.b, args.n, args.k, Config::kBSliceRows));
  params.use_tma_store = Config::kStoresThroughSmem && args.n % 8 == 0;
  if (params.use_tma_store) params.c = cache.tensor_map(tma_store_map(args.c, args.m, args.n, Config::kStoreBox));
  params.c_pointer = args.c;
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.tiles_m = ceil_div(args.m, Config::kBlockM);
  params.tiles_n = ceil_div(args.n, Config::kBlockN);
  params.cluster_tiles_m = ceil_div(params.tiles_m, Config::kClusterM);
  params.linear = linear_combination(args);
  params.activation = activation;

  const int clusters = schedule_clusters<Config>(params, schedule, raster_band, cache, kernel);
  launch_clusters<Config>(warp_specialized_gemm_kernel<Config>, clusters, stream, params);
}

// The grouped GEMM's launch (rungs 03-07, Config a GroupedConfig): A is tokens x K, B the G
// weights as one G.N x K matrix, C tokens x N, the tile table on the device (grouped_gemm_args.hpp);
// one persistent CTA per SM at most. With a TMA-store configuration C's tensor map spans every
// token, and rows of C must be 16-byte multiples (N % 8 == 0): otherwise every tile stores directly.
// Rungs 06-07 (Config::kSplitLastWave) also take the workspace their split needs.
template <class Config>
void launch_grouped_warp_specialized(const GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache,
                                     const char* rung, const GroupedSplitWorkspace* workspace = nullptr) {
  static_assert(Config::kGrouped, "a grouped configuration (GroupedConfig)");
  static_assert(Config::kBlockM == kGroupedTileRows && Config::kBlockN == kGroupedTileCols,
                "the host builds the tile table with kGroupedTileRows x kGroupedTileCols: the kernel's tile must match");
  if (args.tiles == 0) return;  // no expert has rows
  require(args.k % 8 == 0, "grouped GEMM {}: K = {} must be a multiple of 8 (TMA moves 16-byte rows)", rung, args.k);
  require(args.tokens > 0, "grouped GEMM {}: tokens (row_starts[G] on the host) must be set, got {}", rung,
          args.tokens);
  const void* kernel = reinterpret_cast<const void*>(&warp_specialized_gemm_kernel<Config>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);

  typename Config::Params params{};
  params.a = cache.tensor_map(operand_tile_map(args.a, args.tokens, args.k, Config::kBlockM));
  params.b = cache.tensor_map(operand_tile_map(args.b, args.groups * args.n, args.k, Config::kBSliceRows));
  params.use_tma_store = Config::kStoresThroughSmem && args.n % 8 == 0;
  if (params.use_tma_store)
    params.c = cache.tensor_map(tma_store_map(args.c, args.tokens, args.n, Config::kStoreBox));
  params.c_pointer = args.c;
  params.m = args.tokens;
  params.n = args.n;
  params.k = args.k;
  // Unused by the grouped walk but for the guard `tile.m < tiles_m`, which must always pass.
  params.tiles_m = args.tiles;
  params.tiles_n = 1;
  params.cluster_tiles_m = args.tiles;
  params.raster_band = 1;
  params.linear = LinearCombination{1.f, 0.f, nullptr, args.n};  // C = A.B^T: beta 0, C not read
  params.activation = Identity{};
  params.row_starts = args.row_starts;
  params.tile_starts = args.tile_starts;
  params.groups = args.groups;
  params.tiles = args.tiles;

  const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes, 1);
  int grid = std::min(args.tiles, resident);
  if constexpr (Config::kSplitLastWave)
    grid = plan_split_last_wave<Config>(params, args.tiles, resident, ceil_div(args.k, kHopperBlockK), workspace,
                                        "grouped GEMM", rung);
  if constexpr (Config::kHalfATiles)
    params.a_half = cache.tensor_map(operand_tile_map(args.a, args.tokens, args.k, kWarpgroupRows));
  warp_specialized_gemm_kernel<Config><<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
