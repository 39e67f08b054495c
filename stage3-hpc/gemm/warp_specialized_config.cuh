// warp_specialized_config.cuh — the knobs of the warp-specialized kernel of rungs 06-10
// (warp_specialized_gemm.cuh) as one compile-time type, everything they imply (tile sizes, shared
// memory, barrier counts, register split), its kernel parameters, and the configurations rungs 09
// and 10 run with (TmaStoreConfig, OffloadedActivationConfig).
//
// The kernel and its parts (pipeline.cuh, tile_scheduler.cuh, the epilogue_*.cuh files) take the
// configuration as `class Config` and read everything from it, so one set of knobs is one kernel:
// kc-hgemm-tune (gemm/tune/hgemm_tune.cu) compiles several and times them against each other.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "arch/util.hpp"
#include "epilogue.cuh"
#include "hgemm.hpp"
#include "hopper_common.cuh"

namespace kc::stage3 {

enum class EpilogueKind {
  direct_store,  // registers -> global, per-thread 4-byte stores (rungs 06-08)
  tma_store,     // registers -> swizzled shared tile -> one TMA store per 64 x 64 box (09)
  // As tma_store, but the consumers only write alpha.acc + beta.C (as BF16) into the buffer and
  // go on; warps 1-3 of the producer warpgroup apply the activation there and issue the TMA
  // stores (10). The consumers' tensor cores then never wait for the activation's MUFU work.
  tma_store_offloaded,
};

template <class ActivationT>
struct WarpSpecializedParams {
  CUtensorMap a;   // A: M x K in boxes of 128 x 64
  CUtensorMap b;   // B: N x K in boxes of (256 / cluster_m) x 64
  CUtensorMap c;   // C: M x N in boxes of 64 x 64 (only when use_tma_store)
  bf16* c_pointer;
  int m, n, k;
  int tiles_m, tiles_n;   // 128 x 256 output tiles
  int cluster_tiles_m;    // tile rows handled together by one cluster: ceil(tiles_m / cluster_m)
  int raster_band;        // grouped raster band height, in cluster tile rows
  bool use_tma_store;     // C rows are 16-byte multiples (N % 8 == 0): TMA can store them
  LinearCombination linear;  // alpha.acc + beta.C
  ActivationT activation;    // then this, element by element (epilogue.cuh)
};

// The knobs of the kernel. kc-hgemm-tune (gemm/tune/hgemm_tune.cu) times combinations of them;
// TmaStoreConfig below is what rungs 09 and 10 use.
//   kClusterM            1, or 2 CTAs along M sharing each B tile through TMA multicast (rung 08)
//   kEpilogue            direct stores from registers, or through shared memory and TMA (rung 09),
//                        with the activation run by the producer warpgroup's idle warps (rung 10)
//   Activation           what follows alpha.acc + beta.C: Identity, or BiasGelu (rung 10)
//   kStages              depth of the shared-memory ring; a stage (A 128 x 64 + B 256 x 64) is
//                        48 KiB, and 4 stages plus a 2-pass epilogue buffer fill the 227 KiB
//   kStorePassColumns    TMA epilogue only: a consumer's 64 x 256 result leaves in passes of this
//                        many columns through a 64-row buffer of that width (128: two passes,
//                        16 KiB per consumer; 256: one pass and no wait for the first pass's stores
//                        to leave the buffer, but 32 KiB per consumer, which costs a stage)
//   kRasterBandTileRows  persistent schedule: height, in tiles, of the bands of the grouped raster
//                        order (gemm_layout.hpp)
template <int kClusterMValue, EpilogueKind kEpilogueValue, class ActivationT, int kStagesValue = 4,
          int kStorePassColumnsValue = 128, int kRasterBandTileRowsValue = 8>
struct WarpSpecializedConfig {
  using Activation = ActivationT;
  using Params = WarpSpecializedParams<ActivationT>;
  static constexpr int kClusterM = kClusterMValue;
  static constexpr EpilogueKind kEpilogue = kEpilogueValue;
  static constexpr int kStages = kStagesValue;
  static constexpr int kStorePassColumns = kStorePassColumnsValue;
  static constexpr int kRasterBandTileRows = kRasterBandTileRowsValue;
  // The grouped GEMM's rungs 03-07 (GroupedConfig below) walk every expert's tiles; from rung 05
  // the consumers skip the WGMMAs of a 64-row half that lies wholly past its expert's rows.
  static constexpr bool kGrouped = false;
  static constexpr bool kSkipHalvesPastExpert = false;
  // Grouped rung 06: the tiles of the last, partial wave are split along K (work_unit in
  // warp_specialized_gemm.cuh), their partial sums added by the last consumer to finish.
  static constexpr bool kSplitLastWave = false;
  // Grouped rung 07: a tile whose second half is empty loads 64 rows of A, not 128.
  static constexpr bool kHalfATiles = false;

  static constexpr int kConsumers = 2;  // warpgroups 1 and 2; warpgroup 0 produces
  static constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumers * kWarpgroupThreads / 32;
  static constexpr int kBlockM = kConsumers * kWarpgroupRows;  // 128
  static constexpr int kBlockN = kHopperBlockN;                // 256
  static constexpr int kTileBytesA = kBlockM * kTileRowBytes;  // 16 KiB
  static constexpr int kTileBytesB = kBlockN * kTileRowBytes;  // 32 KiB
  static constexpr int kStageBytes = kTileBytesA + kTileBytesB;
  // With multicast each CTA of a cluster loads 1/kClusterM of the B tile into every CTA.
  static constexpr int kBSliceRows = kBlockN / kClusterM;
  static constexpr int kBSliceBytes = kBSliceRows * kTileRowBytes;
  // The epilogue buffer: per consumer, 64 rows x kStorePassColumns as 64 x 64 swizzled boxes.
  static constexpr int kStoreBox = 64;
  static constexpr int kStoreBoxBytes = kStoreBox * kStoreBox * 2;
  static constexpr bool kStoresThroughSmem = kEpilogue != EpilogueKind::direct_store;
  static constexpr bool kOffloadedActivation = kEpilogue == EpilogueKind::tma_store_offloaded;
  static constexpr int kEpilogueBytesPerConsumer = kWarpgroupRows * kStorePassColumns * 2;
  static constexpr int kEpilogueBytes = kStoresThroughSmem ? kConsumers * kEpilogueBytesPerConsumer : 0;
  // tma_store_offloaded: warps 1-3 of the producer warpgroup (warp 0 issues the TMA loads) apply
  // the activation, in place, to 16-byte chunks of 8 columns: each thread keeps one chunk column
  // of a pass (and its 8 column operands, loaded once per pass) and walks down the rows.
  static constexpr int kEpilogueWarps = 3;
  static constexpr int kEpilogueThreads = kEpilogueWarps * 32;
  static constexpr int kChunksPerPassRow = kStorePassColumns / 8;
  static constexpr int kEpilogueBarrierId = 1 + kConsumers;  // ids 1 and 2 belong to the consumers
  // Barriers: full[] and empty[] per stage; with the offloaded activation also epilogue_full[]
  // and epilogue_empty[] per consumer buffer.
  static constexpr int kBarrierBytes = (2 * kStages + (kOffloadedActivation ? 2 * kConsumers : 0)) * 8;
  static constexpr int kSmemBytes =
      kSmemAlignment + kStages * kStageBytes + kEpilogueBytes + kBarrierBytes;
  // setmaxnreg: 384 threads start with 168 registers each (65536 / 384, rounded down to 8);
  // the producer needs few, the consumers hold 128 accumulators each. 128 x 40 + 256 x 232 = 64512.
  static constexpr int kProducerRegisters = 40;
  static constexpr int kConsumerRegisters = 232;

  static_assert(kStages >= 2, "a pipeline needs at least two stages");
  static_assert(kSmemBytes <= kMaxDynamicSmem,
                "shared memory over the per-block limit: fewer stages or a narrower store pass");
  static_assert(kClusterM == 1 || kClusterM == 2, "clusters of 1 or 2 CTAs along M");
  static_assert(kBSliceBytes % kSmemAlignment == 0, "B slices must stay 1024-byte aligned");
  static_assert(kBlockN % kStorePassColumns == 0 && kStorePassColumns % kStoreBox == 0,
                "store passes are whole boxes");
  static_assert(kRasterBandTileRows >= 1, "a raster band is at least one tile row");
  static_assert(kEpilogueThreads % kChunksPerPassRow == 0,
                "the epilogue warps must split a pass into whole chunk columns, one per thread");
  static_assert(kEpilogueBarrierId < 16, "the hardware has 16 named barriers");
};

// Rungs 09 and 10: the TMA-store epilogue with the knobs they run with. kc-hgemm-tune measures the
// alternatives on the GPU at hand and prints this line for its winner; adopting it is this edit.
// The committed run (docs/benchmarks/h200/hgemm_tune.json, its figures in tuning.md beside it):
// no cluster, 4 stages (which leave room for 128-column store passes, not for 256-column ones);
// bands of 4, 8 and 16 within noise of each other, so rung 09 keeps rung 07's band of 8 and
// differs from it by the epilogue alone (rung 07's own configuration, timed in the same run as a
// reference, is the epilogue's share).
template <class Activation>
using TmaStoreConfig = WarpSpecializedConfig</*kClusterM=*/1, EpilogueKind::tma_store, Activation,
                                             /*kStages=*/4, /*kStorePassColumns=*/128,
                                             /*kRasterBandTileRows=*/8>;

// The grouped GEMM's rungs 03-07 (gemm/grouped/): the GEMM ladder's rung 07 kernel over the output
// tiles of every expert of a mixture-of-experts layer. Its parameters are that rung's (A the
// tokens x K activations, B the G N x K weights as one G.N x K matrix, n and k an expert's, C the
// tokens x N output; with TMA stores, its tensor map spans all the tokens) plus the tile table of
// grouped_gemm_args.hpp.
struct GroupedWarpSpecializedParams : WarpSpecializedParams<Identity> {
  const int* row_starts;   // G + 1: the first row of each expert (row_starts[G] = tokens)
  const int* tile_starts;  // G + 1: the first 128 x 256 tile of each expert (tile_starts[G] = tiles)
  int groups;              // G
  int tiles;               // tile_starts[G]
};

// Rung 06 adds the split of the last wave: the grid's first `whole_tiles` work units are whole
// tiles, the rest are the remaining tiles' K steps in `splits` pieces each (`units` in all). Each
// piece's consumer writes its partial sums to its slot of `workspace` and counts itself in the
// tile's `counters` (one per consumer half; zero before the launch, zero again after it); the last
// to arrive adds the pieces in split order and stores the tile (split_k_last_cta.cuh).
struct GroupedSplitLastWaveParams : GroupedWarpSpecializedParams {
  int whole_tiles;            // work units 0 .. whole_tiles - 1 are whole tiles
  int splits;                 // K pieces of each later tile (1: no split)
  int units;                  // whole_tiles + (tiles - whole_tiles) * splits
  float4* workspace;          // (tiles - whole_tiles) x kConsumers x splits slots of kSplitSlotVectors
  std::uint32_t* counters;    // (tiles - whole_tiles) x kConsumers
  CUtensorMap a_half;         // rung 07: A in boxes of 64 x 64, for tiles whose second half is empty
};

//   kEpilogueValue                direct stores (rung 03), or rung 09's TMA stores for every 64-row
//                                 half that lies inside its expert's rows (rungs 04-07)
//   kSkipHalvesPastExpertValue    a consumer whose 64 rows all lie past its expert's last row
//                                 waits for and releases each stage but issues no WGMMA (rungs 05-07)
//   kSplitLastWaveValue           the tiles past the last whole wave are split along K (rungs 06, 07)
//   kHalfATilesValue              a tile whose second half is empty loads only the 64 rows of A its
//                                 first half reads (rung 07; needs kSkipHalvesPastExpert)
//   kAddsFirstPieceTwiceValue     a flaw, for the negative control nc_split_pieces_added_twice: the
//                                 half that adds the pieces adds piece 0 twice (false in the rungs)
template <EpilogueKind kEpilogueValue, bool kSkipHalvesPastExpertValue, bool kSplitLastWaveValue = false,
          bool kHalfATilesValue = false, bool kAddsFirstPieceTwiceValue = false>
struct GroupedConfig : WarpSpecializedConfig<1, kEpilogueValue, Identity> {
  using Params = std::conditional_t<kSplitLastWaveValue, GroupedSplitLastWaveParams, GroupedWarpSpecializedParams>;
  static constexpr bool kGrouped = true;
  static constexpr bool kSkipHalvesPastExpert = kSkipHalvesPastExpertValue;
  static constexpr bool kSplitLastWave = kSplitLastWaveValue;
  static constexpr bool kHalfATiles = kHalfATilesValue;
  static constexpr bool kAddsFirstPieceTwice = kAddsFirstPieceTwiceValue;
  static_assert(!kHalfATiles || (kSkipHalvesPastExpert && kSplitLastWave),
                "half A tiles: the second consumer must skip the rows it no longer gets (and the map is in "
                "rung 06's parameters)");
  // One consumer's partial tile in the split workspace: 128 threads x 32 float4 (its 128 accumulators).
  static constexpr int kSplitSlotVectors = kWarpgroupThreads * kAccumulators / 4;
  static_assert(kEpilogueValue != EpilogueKind::tma_store_offloaded,
                "the grouped GEMM has no activation to hand to the epilogue warps");
};

using GroupedWarpSpecializedConfig = GroupedConfig<EpilogueKind::direct_store, false>;  // rung 03
using GroupedTmaStoreConfig = GroupedConfig<EpilogueKind::tma_store, false>;            // rung 04
using GroupedSkipHalvesConfig = GroupedConfig<EpilogueKind::tma_store, true>;           // rung 05
using GroupedSplitLastWaveConfig = GroupedConfig<EpilogueKind::tma_store, true, true>;  // rung 06
using GroupedHalfATilesConfig = GroupedConfig<EpilogueKind::tma_store, true, true, true>;  // rung 07
using GroupedPieceAddedTwiceConfig = GroupedConfig<EpilogueKind::tma_store, true, true, true, true>;  // its control

// Rung 10: rung 09's knobs, with the activation run by the producer warpgroup's idle warps.
template <class Activation>
using OffloadedActivationConfig =
    WarpSpecializedConfig<TmaStoreConfig<Activation>::kClusterM, EpilogueKind::tma_store_offloaded,
                          Activation, TmaStoreConfig<Activation>::kStages,
                          TmaStoreConfig<Activation>::kStorePassColumns,
                          TmaStoreConfig<Activation>::kRasterBandTileRows>;

}  // namespace kc::stage3
