// warp_specialized_gemm.cuh — the kernel of rungs 06-10: a producer warpgroup feeding two consumer
// warpgroups through a ring of shared-memory stages, with a tile loop, optional clusters with TMA
// multicast, and a choice of epilogue. Each rung file picks one configuration and says what it adds:
//
//   06 warp specialization   one tile per block                   direct stores
//   07 persistent            one block per SM, grouped raster     direct stores
//   08 clusters + multicast  as 07, 2 CTAs share each B tile      direct stores
//   09 TMA store epilogue    as 07 (knobs: TmaStoreConfig)        smem + TMA store
//   10 fused bias + GELU     as 09, gelu(acc + bias) computed by  smem + TMA store
//                            the producer warpgroup's idle warps
//
// The pipeline. Stage s has two mbarriers: full[s] (1 arrival: the producer's arrive.expect_tx,
// plus the TMA bytes) and empty[s] (one arrival per consumer warp of every CTA that reads the stage).
// The producer thread waits for empty[s], announces the bytes and issues the TMA copies into s;
// the consumers wait for full[s], run the WGMMAs, and arrive on empty[s] once those WGMMAs have
// finished reading (wgmma.wait_group). Both sides walk the stages in the same order, flipping the
// parity they wait for at each wrap-around, across K steps and across tiles alike.
//
// Rung 10's epilogue is a second pipeline of the same kind, with one slot per consumer: the
// consumer's store buffer. See tma_store_offloaded below and run_offloaded_activation.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "hopper_common.cuh"
#include "kc/common/error.hpp"

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

#if KC_STAGE3_SM90A

template <int kStages>
struct PipelineState {
  int stage = 0;
  std::uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The tile of C that cluster tile `linear` gives to CTA `cta_rank`: clusters split a 2-tile-high
// strip along M, and both CTAs share its B tile (multicast).
template <class Config>
__device__ __forceinline__ TileCoord cta_tile(const typename Config::Params& params, int linear,
                                              std::uint32_t cta_rank) {
  const TileCoord cluster_tile =
      grouped_tile(linear, params.cluster_tiles_m, params.tiles_n, params.raster_band);
  return {cluster_tile.m * Config::kClusterM + static_cast<int>(cta_rank), cluster_tile.n};
}

// What the activation needs per column (rung 10's bias) for the 16 (or 32) column pairs a thread
// writes in one store pass of the TMA epilogue. Identity needs nothing: then this is empty.
template <class Config>
struct PassColumns {
  typename Config::Activation::ColumnPair pair[Config::kStorePassColumns / 8];
};

template <class Config>
__device__ __forceinline__ PassColumns<Config> load_pass_columns(
    const typename Config::Params& params, int col0, int pass) {
  PassColumns<Config> columns;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int slice = 0; slice < Config::kStorePassColumns / 8; ++slice)
    columns.pair[slice] = params.activation.column_pair(
        col0 + pass * Config::kStorePassColumns + 8 * slice + 2 * (lane % 4), params.n);
  return columns;
}

// A warpgroup's BF16 results of one store pass, as its threads hold them: slice j of the pass is
// an 8-column slice of the accumulator layout, [0] the upper row of the thread's pair, [1] the lower.
template <class Config>
using PassResults = __nv_bfloat162[Config::kStorePassColumns / 8][2];

// Pass `pass` of a thread's accumulators (alpha.acc + beta.C already applied), as BF16 pairs:
// finish(slice, value) maps each pair of neighbouring outputs first (the activation of rung 09's
// epilogue, or nothing when the epilogue warps apply it later).
template <class Config, class Finish>
__device__ __forceinline__ void pack_pass(const float (&acc)[kAccumulators], int pass,
                                          PassResults<Config>& results, Finish finish) {
  constexpr int kSlicesPerPass = Config::kStorePassColumns / 8;
#pragma unroll
  for (int slice = 0; slice < kSlicesPerPass; ++slice) {
    const int j = pass * kSlicesPerPass + slice;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float2 value = finish(slice, make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]));
      results[slice][half] = __floats2bfloat162_rn(value.x, value.y);
    }
  }
}

// Writes one pass of results into a consumer's buffer of 64 x 64 boxes in the 128-byte swizzle:
// a warp's column of 8 rows x 16 bytes lands on 32 distinct banks.
template <class Config>
__device__ __forceinline__ void write_pass_to_buffer(std::uint8_t* buffer,
                                                     const PassResults<Config>& results) {
  const int thread = threadIdx.x % kWarpgroupThreads;
  const int lane = threadIdx.x % 32;
  const int warp = thread / 32;
#pragma unroll
  for (int slice = 0; slice < Config::kStorePassColumns / 8; ++slice) {
    const int pass_col = 8 * slice + 2 * (lane % 4);
    const int box = pass_col / Config::kStoreBox;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * warp + lane / 4 + 8 * half;
      std::uint8_t* destination = buffer + box * Config::kStoreBoxBytes +
                                  swizzle_128b_element_offset(row, pass_col % Config::kStoreBox);
      *reinterpret_cast<__nv_bfloat162*>(destination) = results[slice][half];
    }
  }
}

// Hands a buffer holding one pass (rows row0.., columns pass_col0..) to TMA, one store per 64 x 64
// box, as one bulk group. Boxes wholly past M or N are not issued; TMA clips the others.
template <class Config>
__device__ __forceinline__ void store_pass_boxes(const typename Config::Params& params,
                                                 const std::uint8_t* buffer, int row0,
                                                 int pass_col0) {
  if (row0 >= params.m) return;
#pragma unroll
  for (int box = 0; box < Config::kStorePassColumns / Config::kStoreBox; ++box) {
    const int box_col0 = pass_col0 + box * Config::kStoreBox;
    if (box_col0 < params.n)
      sm90::tma_store_2d(&params.c, buffer + box * Config::kStoreBoxBytes, box_col0, row0);
  }
  sm90::tma_store_commit_group();
}

// Epilogue through shared memory (rung 09): every thread writes its fragment pairs, as BF16, into
// the consumer's buffer, then one thread stores each box with TMA, which writes whole lines and
// clips at the edges of C. The 64 x 256 result goes out in passes of kStorePassColumns columns;
// before writing into the buffer, a pass waits until the stores issued from it last time have
// finished reading it.
// The values: alpha.acc + beta.C first, for the whole tile (one uniform test of beta), then the
// activation per element pair as straight-line code — no bounds test either, since whatever lies
// outside C is clipped by TMA, and an activation reads no memory — so the compiler can overlap
// one element's MUFU latency with the next elements' work, and all of it with the barrier wait
// before the shared stores. The per-column operands arrive one pass ahead: the first pass's were
// loaded before the tile's mainloop (`columns`), and each pass loads the next pass's while its
// own results wait for the barrier, so no load latency is exposed. (All 32 pairs at once would
// add 16 registers to the 128 accumulators and the elements in flight, and spill.)
template <class Config>
__device__ __forceinline__ void store_accumulators_tma(const typename Config::Params& params,
                                                       std::uint8_t* buffer, int consumer,
                                                       int row0, int col0,
                                                       float (&acc)[kAccumulators],
                                                       PassColumns<Config> columns) {
  constexpr int kPasses = kHopperBlockN / Config::kStorePassColumns;
  const int thread = threadIdx.x % kWarpgroupThreads;
  const int barrier_id = 1 + consumer;  // one named barrier per consumer warpgroup

  apply_linear_combination(acc, params.linear, params.m, params.n, row0, col0);

#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    PassResults<Config> results;
    pack_pass<Config>(acc, pass, results, [&](int slice, float2 value) {
      return params.activation(value, columns.pair[slice]);
    });
    if (pass + 1 < kPasses) columns = load_pass_columns<Config>(params, col0, pass + 1);

    if (thread == 0) sm90::tma_store_wait_smem_read();
    sm90::named_barrier_sync(barrier_id, kWarpgroupThreads);
    write_pass_to_buffer<Config>(buffer, results);
    sm90::fence_proxy_async_shared();  // the TMA engine reads through the async proxy
    sm90::named_barrier_sync(barrier_id, kWarpgroupThreads);
    if (thread == 0)
      store_pass_boxes<Config>(params, buffer, row0, col0 + pass * Config::kStorePassColumns);
  }
}

// ---- rung 10: the activation runs beside the next tile's mainloop ----------------------------------
// Each consumer's store buffer becomes a one-slot pipeline between the consumer and the epilogue
// warps (warps 1-3 of the producer warpgroup), with two mbarriers: epilogue_full[c] (all 128
// threads of the consumer have written their part of a pass) and epilogue_empty[c] (all 96
// epilogue threads are done with it, and TMA has finished reading it). Every thread arrives after
// its own accesses instead of one thread arriving for its warpgroup after a named barrier:
// equivalent under the PTX memory model, and each write is then ordered before the other side's
// accesses by its own thread's arrive, which is what compute-sanitizer's racecheck follows (with
// one arrival after a named barrier it reported the handoff as a race). The buffer is used once per store pass of
// every handed-over tile, in the same order on both sides; each side flips the parity it waits
// for after every use, like PipelineState for the stages. A fresh barrier is in phase 0, so the
// consumer's first wait on epilogue_empty (parity 1) passes at once.
//
// Which tiles are handed over: those with rows inside C (tile.m < tiles_m; not so for the second
// CTA of an odd cluster strip), when TMA can store C (use_tma_store; otherwise the consumers store
// directly, activation included), except the CTA's last tile. Nothing follows the last tile whose
// mainloop could hide its activation, so the consumers, idle by then, apply it themselves as rung
// 09's epilogue does (store_accumulators_tma), after one more wait on epilogue_empty: from then on
// the buffer is theirs.
//
// Within a handed-over tile the passes go out one after the other through the one buffer, so the
// second pass would wait for the epilogue warps to finish the first. Instead the consumer keeps
// the last pass, packed to BF16 (32 registers for 128-column passes), and writes it halfway
// through the next tile's mainloop (k step k_tiles / 2, while that step's WGMMAs run); by then
// the epilogue warps have long released the buffer, and they have the second half of the
// mainloop for this pass. The next tile exists, since the last tile is never handed over.
//
// Every wait has its arrival: both sides walk the same persistent schedule (cta_tile of the same
// `linear` sequence) and hand over the same tiles by the same rule, computed from values every
// thread of the CTA shares (kernel parameters and the schedule), so per buffer the k-th write is
// followed by the k-th epilogue_full wait, and the k-th epilogue_empty arrival precedes the
// (k+1)-th write and the last tile's wait. A CTA without tiles, or without handed-over tiles,
// waits for nothing. No cycle can form: the epilogue warps wait only for consumer writes, in the
// order (tile, pass, consumer); a consumer waits only for uses written before its own, whose
// writers (itself, or the other consumer at an earlier point of the same schedule) need nothing
// but stages of the ring, and the ring never makes the consumer that is behind wait for the one
// ahead (a stage is refilled only after both have released it). Each consumer is at most one
// use ahead of the epilogue warps on its buffer.

// One use of a consumer's buffer: wait until the epilogue warps have released it, write the
// pass, and arrive on epilogue_full — every thread, after its own writes (the barrier counts the
// warpgroup's 128 threads), so that each write is ordered before the readers' wait by its own
// thread's release-arrive, with no warpgroup barrier in between.
template <class Config>
__device__ __forceinline__ void hand_over_pass(std::uint8_t* buffer, std::uint64_t* buffer_full,
                                               std::uint64_t* buffer_empty, std::uint32_t& phase,
                                               int /*consumer*/, const PassResults<Config>& results) {
  sm90::mbarrier_wait(buffer_empty, phase ^ 1);
  write_pass_to_buffer<Config>(buffer, results);
  sm90::mbarrier_arrive(buffer_full);
  phase ^= 1;
}

// The consumer side of a handed-over tile: alpha.acc + beta.C, rounded to BF16 — the unfused
// baseline's numerics, where cuBLAS writes a BF16 C that the separate kernel reads — handed over
// pass by pass, except the last pass of several, which is packed into `held` for the next tile's
// mainloop. Returns whether it did so.
template <class Config>
__device__ __forceinline__ bool hand_over_accumulators(const typename Config::Params& params,
                                                       std::uint8_t* buffer,
                                                       std::uint64_t* buffer_full,
                                                       std::uint64_t* buffer_empty,
                                                       std::uint32_t& phase, int consumer,
                                                       int row0, int col0,
                                                       float (&acc)[kAccumulators],
                                                       PassResults<Config>& held) {
  constexpr int kPasses = kHopperBlockN / Config::kStorePassColumns;
  constexpr bool kHoldLastPass = kPasses > 1;
  const auto unchanged = [](int, float2 value) { return value; };  // the epilogue warps apply it

  apply_linear_combination(acc, params.linear, params.m, params.n, row0, col0);

#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    if (kHoldLastPass && pass == kPasses - 1) {
      pack_pass<Config>(acc, pass, held, unchanged);
    } else {
      PassResults<Config> results;
      pack_pass<Config>(acc, pass, results, unchanged);
      hand_over_pass<Config>(buffer, buffer_full, buffer_empty, phase, consumer, results);
    }
  }
  return kHoldLastPass;
}

// Eight BF16 values: one 16-byte chunk of a swizzled buffer row.
union Bf16Chunk {
  uint4 raw;
  __nv_bfloat162 pairs[4];
};

// The epilogue warps' side, run by the 96 threads of warps 1-3 of the producer warpgroup under its
// 40-register cap. Per tile, per pass, per consumer buffer: wait for epilogue_full, apply the
// activation in place (16-byte shared loads and stores through the same swizzle, FP32 math,
// BF16 results), fence the generic proxy against the async proxy, meet at a named barrier of the
// 96 threads, and let one thread issue the pass's TMA stores and wait until they have read the
// buffer; every thread arrives on epilogue_empty (the storing one after that wait). Thread t owns the 16-byte chunk column t % 16 of a
// 128-column pass (its 8 columns' operands are loaded once per pass, before the wait) and every
// 6th row from t / 16: the 8 threads of a quarter warp read one 128-byte row, so the shared
// accesses are conflict-free. The row loop stays rolled: eight independent GELUs per row are
// what 40 registers allow in flight. The CTA's last tile is the consumers' (see above).
template <class Config>
__device__ __forceinline__ void run_offloaded_activation(const typename Config::Params& params,
                                                         std::uint8_t* epilogue_buffer,
                                                         std::uint64_t* epilogue_full,
                                                         std::uint64_t* epilogue_empty,
                                                         int cluster, int clusters,
                                                         std::uint32_t cta_rank) {
  using ColumnPair = typename Config::Activation::ColumnPair;
  constexpr int kPasses = kHopperBlockN / Config::kStorePassColumns;
  constexpr int kRowStep = Config::kEpilogueThreads / Config::kChunksPerPassRow;
  constexpr int kChunksPerBoxRow = Config::kStoreBox / 8;
  const int thread = static_cast<int>(threadIdx.x) - 32;  // 0 .. 95: warps 1-3
  const int chunk_column = thread % Config::kChunksPerPassRow;
  const int first_row = thread / Config::kChunksPerPassRow;
  const int box_offset = (chunk_column / kChunksPerBoxRow) * Config::kStoreBoxBytes;
  const int chunk_in_box_row = chunk_column % kChunksPerBoxRow;
  const bool stores = thread == 0;  // issues, and so must wait for, every bulk store group

  if (!params.use_tma_store) return;  // the consumers store directly: there is no handoff
  const int cluster_tiles = params.cluster_tiles_m * params.tiles_n;
  std::uint32_t phase = 0;  // both buffers are used once per pass, so their parities agree
  for (int linear = cluster; linear < cluster_tiles; linear += clusters) {
    const TileCoord tile = cta_tile<Config>(params, linear, cta_rank);
    const bool last_tile = linear + clusters >= cluster_tiles;  // the consumers store it
    if (tile.m >= params.tiles_m || last_tile) continue;
#pragma unroll 1
    for (int pass = 0; pass < kPasses; ++pass) {
      const int pass_col0 = tile.n * Config::kBlockN + pass * Config::kStorePassColumns;
      const int col = pass_col0 + 8 * chunk_column;
      ColumnPair columns[4];
#pragma unroll
      for (int pair = 0; pair < 4; ++pair)
        columns[pair] = params.activation.column_pair(col + 2 * pair, params.n);
#pragma unroll 1
      for (int consumer = 0; consumer < Config::kConsumers; ++consumer) {
        std::uint8_t* buffer = epilogue_buffer + consumer * Config::kEpilogueBytesPerConsumer;
        sm90::mbarrier_wait(&epilogue_full[consumer], phase);
#pragma unroll 1
        for (int row = first_row; row < kWarpgroupRows; row += kRowStep) {
          auto* chunk = reinterpret_cast<uint4*>(buffer + box_offset +
                                                 swizzle_128b_offset(row, chunk_in_box_row));
          Bf16Chunk values;
          values.raw = *chunk;
#pragma unroll
          for (int pair = 0; pair < 4; ++pair) {
            const float2 value =
                params.activation(__bfloat1622float2(values.pairs[pair]), columns[pair]);
            values.pairs[pair] = __floats2bfloat162_rn(value.x, value.y);
          }
          *chunk = values.raw;
        }
        sm90::fence_proxy_async_shared();  // the TMA engine reads through the async proxy
        sm90::named_barrier_sync(Config::kEpilogueBarrierId, Config::kEpilogueThreads);
        // All 96 threads release the buffer (epilogue_empty counts them), each after its own
        // accesses; the storing thread only once TMA has finished reading the buffer, so the
        // phase completes with its arrival.
        if (stores) {
          store_pass_boxes<Config>(params, buffer,
                                   tile.m * Config::kBlockM + consumer * kWarpgroupRows, pass_col0);
          sm90::tma_store_wait_smem_read();
        }
        sm90::mbarrier_arrive(&epilogue_empty[consumer]);
      }
      phase ^= 1;
    }
  }
  if (stores) sm90::tma_store_wait_all();  // the CTA's shared memory must outlive the stores
}

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    warp_specialized_gemm_kernel(const __grid_constant__ typename Config::Params params) {
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* smem = aligned_dynamic_smem(smem_raw);
  const auto tile_a = [&](int stage) { return smem + stage * Config::kTileBytesA; };
  const auto tile_b = [&](int stage) {
    return smem + Config::kStages * Config::kTileBytesA + stage * Config::kTileBytesB;
  };
  std::uint8_t* epilogue_buffer = smem + Config::kStages * Config::kStageBytes;
  auto* full = reinterpret_cast<std::uint64_t*>(epilogue_buffer + Config::kEpilogueBytes);
  std::uint64_t* empty = full + Config::kStages;
  // tma_store_offloaded only: the handoff of each consumer's store buffer (run_offloaded_activation).
  std::uint64_t* epilogue_full = empty + Config::kStages;
  std::uint64_t* epilogue_empty = epilogue_full + Config::kConsumers;

  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  const std::uint32_t cta_rank = Config::kClusterM > 1 ? sm90::cluster_cta_rank() : 0;
  const int cluster = Config::kClusterM > 1 ? static_cast<int>(sm90::cluster_id_x()) : blockIdx.x;
  const int clusters = Config::kClusterM > 1 ? static_cast<int>(sm90::cluster_count_x()) : gridDim.x;
  const int cluster_tiles = params.cluster_tiles_m * params.tiles_n;
  const int k_tiles = ceil_div(params.k, kHopperBlockK);

  if (threadIdx.x == 0) {
    for (int stage = 0; stage < Config::kStages; ++stage) {
      sm90::mbarrier_init(&full[stage], 1);
      sm90::mbarrier_init(&empty[stage], Config::kConsumerWarps * Config::kClusterM);
    }
    if constexpr (Config::kOffloadedActivation) {
      for (int consumer = 0; consumer < Config::kConsumers; ++consumer) {
        sm90::mbarrier_init(&epilogue_full[consumer], kWarpgroupThreads);             // the consumer's threads
        sm90::mbarrier_init(&epilogue_empty[consumer], Config::kEpilogueThreads);     // the epilogue threads
      }
    }
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
                                         cluster, clusters, cta_rank);
    }
    if (threadIdx.x == 0) {
      PipelineState<Config::kStages> state;
      for (int linear = cluster; linear < cluster_tiles; linear += clusters) {
        const TileCoord tile = cta_tile<Config>(params, linear, cta_rank);
        // A box may hang over the edge of its matrix (the overhang reads as zeros), but it always
        // starts inside it. Only in a cluster can a start fall outside: the second CTA of the last
        // strip when the tile rows are odd (it still takes part in the B multicast and discards
        // its results), or the second B slice when N ends within the first half of the tile
        // (those rows only feed columns past N, which are never stored).
        const int a_row = min(tile.m * Config::kBlockM, params.m - 1);
        const int b_row = min(tile.n * Config::kBlockN + static_cast<int>(cta_rank) * Config::kBSliceRows,
                              params.n - 1);
        for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
          const int k0 = k_tile * kHopperBlockK;
          sm90::mbarrier_wait(&empty[state.stage], state.phase ^ 1);
          sm90::mbarrier_arrive_expect_tx(&full[state.stage], Config::kStageBytes);
          sm90::tma_load_2d(tile_a(state.stage), &params.a, &full[state.stage], k0, a_row);
          if constexpr (Config::kClusterM == 1) {
            sm90::tma_load_2d(tile_b(state.stage), &params.b, &full[state.stage], k0, b_row);
          } else {
            constexpr std::uint16_t kAllCtas = (1u << Config::kClusterM) - 1;
            sm90::tma_load_2d_multicast(tile_b(state.stage) + cta_rank * Config::kBSliceBytes,
                                        &params.b, &full[state.stage], k0, b_row, kAllCtas);
          }
          state.advance();
        }
      }
    }
  } else {
    // ---- consumers: WGMMA on their 64-row half, then the epilogue ----
    sm90::setmaxnreg_increase<Config::kConsumerRegisters>();
    const int consumer = warpgroup - 1;
    const int lane = threadIdx.x % 32;
    const auto release = [&](int stage) {
      if (lane != 0) return;
      if constexpr (Config::kClusterM == 1) {
        sm90::mbarrier_arrive(&empty[stage]);
      } else {
        // Both CTAs' producers write into this stage (each its B slice): free it for both.
        for (int rank = 0; rank < Config::kClusterM; ++rank)
          sm90::mbarrier_arrive_cluster(&empty[stage], static_cast<std::uint32_t>(rank));
      }
    };

    std::uint8_t* const buffer = epilogue_buffer + consumer * Config::kEpilogueBytesPerConsumer;
    // tma_store_offloaded: uses of this consumer's buffer (mod 2), and the last pass of the
    // previous tile while it waits for this tile's mainloop (see the rung 10 notes above).
    std::uint32_t epilogue_phase = 0;
    PassResults<Config> held_pass;
    bool holding_pass = false;

    PipelineState<Config::kStages> state;
    float acc[kAccumulators];
    for (int linear = cluster; linear < cluster_tiles; linear += clusters) {
      const TileCoord tile = cta_tile<Config>(params, linear, cta_rank);
      const bool last_tile = linear + clusters >= cluster_tiles;
      const int col0 = tile.n * Config::kBlockN;
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
      for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
        sm90::mbarrier_wait(&full[state.stage], state.phase);
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
        if (k_tile > 0) release(previous_stage);
        previous_stage = state.stage;
        state.advance();
      }
      sm90::wgmma_wait_group<0>();
      release(previous_stage);
      sm90::fence_accumulators(acc);

      if (tile.m < params.tiles_m) {
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

// How the output tiles are handed out.
enum class Schedule {
  one_tile_per_block,  // grid = number of tiles, plain column-major order
  persistent,          // grid = what fits on the GPU at once, grouped raster order
};

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
  if (params.use_tma_store) {
    TmaMatrix2d c_map;
    c_map.base = args.c;
    c_map.rows = static_cast<std::uint64_t>(args.m);
    c_map.cols = static_cast<std::uint64_t>(args.n);
    c_map.box_rows = Config::kStoreBox;
    c_map.box_cols = Config::kStoreBox;
    c_map.swizzle_128b = true;
    params.c = cache.tensor_map(c_map);
  }
  params.c_pointer = args.c;
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.tiles_m = ceil_div(args.m, Config::kBlockM);
  params.tiles_n = ceil_div(args.n, Config::kBlockN);
  params.cluster_tiles_m = ceil_div(params.tiles_m, Config::kClusterM);
  params.linear = linear_combination(args);
  params.activation = activation;

  const int cluster_tiles = params.cluster_tiles_m * params.tiles_n;
  int clusters = cluster_tiles;
  if (schedule == Schedule::persistent) {
    params.raster_band = std::max(1, raster_band / Config::kClusterM);  // in cluster tile rows
    const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes,
                                               Config::kClusterM) / Config::kClusterM;
    clusters = std::min(clusters, resident);
  } else {
    params.raster_band = params.cluster_tiles_m;  // one band: m fastest, like a plain grid
  }

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
  KC_CUDA_CHECK(cudaLaunchKernelEx(&config, warp_specialized_gemm_kernel<Config>, params));
}

// Rungs 09 and 10: the TMA-store epilogue with the knobs they run with. kc-hgemm-tune measures the
// alternatives on the GPU at hand and prints this line for its winner; adopting it is this edit.
// These knobs won over the tuner's five shapes (2048³, 4096³, 8192³ and the two Llama MLP shapes;
// the runs and their margins are in stage3-hpc/README.md, "Tuning"): no cluster, 4 stages
// (which leave room for 128-column store passes, not for 256-column ones), raster bands of 16
// tile rows.
template <class Activation>
using TmaStoreConfig = WarpSpecializedConfig</*kClusterM=*/1, EpilogueKind::tma_store, Activation,
                                             /*kStages=*/4, /*kStorePassColumns=*/128,
                                             /*kRasterBandTileRows=*/16>;

// Rung 10: rung 09's knobs, with the activation run by the producer warpgroup's idle warps.
template <class Activation>
using OffloadedActivationConfig =
    WarpSpecializedConfig<TmaStoreConfig<Activation>::kClusterM, EpilogueKind::tma_store_offloaded,
                          Activation, TmaStoreConfig<Activation>::kStages,
                          TmaStoreConfig<Activation>::kStorePassColumns,
                          TmaStoreConfig<Activation>::kRasterBandTileRows>;

}  // namespace kc::stage3
