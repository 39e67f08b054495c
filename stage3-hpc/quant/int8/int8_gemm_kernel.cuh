// int8_gemm_kernel.cuh — the kernel of the INT8 GEMM's rungs 01 and 02 (and of its negative
// controls): the bf16 ladder's warp-specialized persistent kernel (gemm/warp_specialized_gemm.cuh,
// rung 07) with s8 operands and s32 accumulators, 128 x 256 tiles; rung 02 stores its results
// through shared memory and TMA as the bf16 ladder's rung 09 does.
//
// What is the same as the bf16 ladder: the producer warp and the ring of stages (gemm/pipeline.cuh),
// the persistent tile walk in grouped raster order (gemm/tile_scheduler.cuh), one K step of WGMMAs
// kept in flight while the next is issued, and the tile: two consumer warpgroups of m64n256, 128
// accumulators a thread. How TMA and the descriptors serve one-byte values is in
// quant/byte_operand_gemm.cuh (shared with the FP8 GEMM).
//
// What is new:
//   - the instruction: wgmma m64n256k32 s8.s8 -> s32 (arch/sm90/wgmma_narrow.cuh), four per
//     128-byte K step, at the FP8 rate: twice the multiply-adds of bf16 per instruction time.
//   - nothing to promote: unlike FP8's accumulator (fewer bits than FP32, quant/fp8/), the integer
//     sum is exact, so the mainloop is the bf16 ladder's and the tile keeps its full 256 columns.
//   - the epilogue: the s32 sums go out as they are (int8_gemm), or are dequantized on the way
//     (int8_gemm_dequant): FP32 value x s_A[row] x s_B[col], rounded to bf16, stored in pairs by
//     the bf16 ladder's store_fragment_16x8 (gemm/epilogue.cuh) with a column-scale "activation".
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/sm90/wgmma_narrow.cuh"
#include "arch/util.hpp"
#include "epilogue.cuh"
#include "epilogue_tma_store.cuh"
#include "hopper_common.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/int8_gemm_args.hpp"
#include "pipeline.cuh"
#include "quant/byte_operand_gemm.cuh"
#include "quant/int8/int8_epilogue.cuh"
#include "tile_scheduler.cuh"

namespace kc::stage3 {

struct Int8GemmParams {
  CUtensorMap a;  // A: M x K s8, seen as M x K/2 two-byte elements, boxes of 128 x 64
  CUtensorMap b;  // B: N x K s8, boxes of 256 x 64
  // Rung 02, when use_tma_store: C32 seen as M x 2N two-byte elements, or C (bf16), in boxes of
  // 64 rows x 128 bytes (32 s32 or 64 bf16 values).
  CUtensorMap c_store;
  bool use_tma_store;
  std::int32_t* c32;
  bf16* c;
  const float* scale_a;
  const float* scale_b;
  int m, n, k;
  int k_tiles;            // ceil(K / 128)
  int tiles_m, tiles_n;   // 128 x 256 output tiles
  int cluster_tiles_m;    // tiles_m (no clusters): what the tile scheduler walks
  int raster_band;        // grouped raster band height, in tile rows
};

// 128 x 256 tiles, four stages of 48 KiB (16 KiB of A, 32 KiB of B): the bf16 ladder's ring.
struct Int8GemmConfig : ByteOperandGemmShape<256, 4, Int8GemmParams> {
  static_assert(kAccumulators == 128, "m64n256: 128 accumulators a thread");
};

// Rung 04: each consumer warpgroup computes 128 x 128 tiles of its own (two m64n128 halves, 64 + 64
// accumulators a thread), the two taking alternate tiles of the CTA's walk; six stages of 32 KiB,
// each read by one consumer.
struct Int8PingPongConfig : ByteOperandGemmShape<128, 6, Int8GemmParams, /*stage readers*/ 1> {
  static constexpr int kHalves = kBlockM / kWarpgroupRows;  // m64 halves of a consumer's tile: 2
  static_assert(kAccumulators == 64, "m64n128: 64 accumulators a thread and half");
};

// Rung 02's epilogue buffer, after the ring (at Int8GemmConfig::kAfterRingOffset): per
// consumer one pass of two 64-row boxes of 128-byte swizzled rows — 64 s32 or 128 bf16 columns a
// pass, so a 64 x 256 result leaves in four passes (s32) or two (bf16). The names are the ones
// gemm/epilogue_tma_store.cuh's write_pass_to_buffer reads (for the bf16 output).
struct Int8TmaStore {
  static constexpr int kStoreBox = 64;                      // bf16 columns of a box (128 bytes)
  static constexpr int kStoreBoxBytes = 64 * kTileRowBytes;  // 64 rows of 128 bytes: 8 KiB
  static constexpr int kBoxesPerPass = 2;
  static constexpr int kStorePassColumns = kBoxesPerPass * kStoreBox;  // bf16 columns a pass
  static constexpr int kS32PassColumns = kBoxesPerPass * kTileRowBytes / 4;  // s32 columns a pass
  static constexpr int kPassBytes = kBoxesPerPass * kStoreBoxBytes;          // 16 KiB a consumer
  static constexpr int kSmemBytes =
      kSmemAlignment + Int8GemmConfig::kAfterRingOffset + Int8GemmConfig::kConsumers * kPassBytes;
  static_assert(kSmemBytes <= kMaxDynamicSmem, "shared memory over the per-block limit");
};

#if KC_STAGE3_SM90A

// One K step of one warpgroup: four m64n256k32 WGMMAs along the 128-byte row, as one group.
__device__ __forceinline__ void int8_wgmma_k_step(std::int32_t (&acc)[Int8GemmConfig::kAccumulators],
                                                  std::uint32_t a_tile, std::uint32_t b_tile) {
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Int8GemmConfig::kBlockK / Int8GemmConfig::kWgmmaK; ++kk) {
    constexpr std::uint32_t kStepBytes = Int8GemmConfig::kWgmmaK;  // 32 one-byte values
    sm90::wgmma_m64n256k32_s8(acc, sm90::smem_descriptor_sw128(a_tile + kk * kStepBytes),
                              sm90::smem_descriptor_sw128(b_tile + kk * kStepBytes), 1u);
  }
  sm90::wgmma_commit_group();
}

// A warp's 16 rows of sums (kAccumulators a thread: 16 x 2 kAccumulators columns) stored straight
// from the registers, s32 pairs or dequantized bf16 pairs.
template <Int8Output kOutput, Int8Flaw kFlaw, int kAccumulators = Int8GemmConfig::kAccumulators>
__device__ __forceinline__ void store_int8_tile(const Int8GemmParams& params, const std::int32_t (&acc)[kAccumulators],
                                                int warp_row0, int col0) {
  constexpr int kSlices = kAccumulators / 4;
  if constexpr (kOutput == Int8Output::s32) {
#pragma unroll
    for (int j = 0; j < kSlices; ++j)
      store_s32_fragment(params.c32, params.m, params.n, warp_row0, col0 + 8 * j, &acc[4 * j]);
  } else {
    // The row scales of the thread's two rows (clamped past M: those rows are not stored).
    const int lane = threadIdx.x % 32;
    const bool swapped = kFlaw == Int8Flaw::scales_swapped;
    const float* row_scales = swapped ? params.scale_b : params.scale_a;
    const float* col_scales = swapped ? params.scale_a : params.scale_b;
    const int row_limit = swapped ? params.n : params.m;
    const int col_limit = swapped ? params.m : params.n;
    const float top = __ldg(row_scales + min(warp_row0 + lane / 4, row_limit - 1));
    const float bottom = __ldg(row_scales + min(warp_row0 + lane / 4 + 8, row_limit - 1));
    // The column scales eight slices (16 values) at a time, each group's loads issued together
    // and then its stores. Plain (coherent) loads on purpose: ptxas moves a read-only (__ldg) load
    // above any store, and would issue all 64 of a thread's scale loads first: 64 registers on
    // top of the 128 sums, and spills. A coherent load stays behind the stores before it (they
    // might alias it), so only one group's scales are ever live.
    constexpr int kSlicesAGroup = 8;
#pragma unroll
    for (int group = 0; group < kSlices; group += kSlicesAGroup) {
      float2 scales[kSlicesAGroup];
#pragma unroll
      for (int j = 0; j < kSlicesAGroup; ++j) {
        const int col = col0 + 8 * (group + j) + 2 * (lane % 4);
        scales[j] = make_float2(col_scales[min(col, col_limit - 1)], col_scales[min(col + 1, col_limit - 1)]);
      }
#pragma unroll
      for (int j = 0; j < kSlicesAGroup; ++j)
        store_dequantized_fragment(params.c, params.m, params.n, warp_row0, col0 + 8 * (group + j),
                                   &acc[4 * (group + j)], top, bottom, scales[j]);
    }
  }
}

// Rung 02's epilogue: the consumer's 64 x 256 result through its buffer and TMA stores, pass by
// pass (the bf16 ladder's rung 09 way, gemm/epilogue_tma_store.cuh): write the pass into the
// swizzled boxes (s32 pairs, or bf16 pairs dequantized as rung 01 does), fence, one thread stores
// the boxes (TMA clips them at the edges of C); before a pass writes the buffer, the stores of the
// last pass must have read it (the bf16 ladder's begin_buffer_pass / end_buffer_pass).
template <Int8Output kOutput, Int8Flaw kFlaw>
__device__ __forceinline__ void store_int8_tile_tma(const Int8GemmParams& params,
                                                    const std::int32_t (&acc)[Int8GemmConfig::kAccumulators],
                                                    std::uint8_t* buffer, int consumer, int row0, int col0) {
  constexpr bool kS32 = kOutput == Int8Output::s32;
  constexpr int kPassColumns = kS32 ? Int8TmaStore::kS32PassColumns : Int8TmaStore::kStorePassColumns;
  constexpr int kPasses = Int8GemmConfig::kBlockN / kPassColumns;
  constexpr int kSlicesAPass = kPassColumns / 8;
  const int thread = threadIdx.x % kWarpgroupThreads;
  const int lane = threadIdx.x % 32;
  const int warp = thread / 32;
  const int barrier_id = 1 + consumer;

  float top = 1.f, bottom = 1.f;  // the dequantizing output's row scales (clamped past M)
  const bool swapped = kFlaw == Int8Flaw::scales_swapped;
  const float* col_scales = swapped ? params.scale_a : params.scale_b;
  const int col_limit = swapped ? params.m : params.n;
  if constexpr (!kS32) {
    const float* row_scales = swapped ? params.scale_b : params.scale_a;
    const int row_limit = swapped ? params.n : params.m;
    top = __ldg(row_scales + min(row0 + 16 * warp + lane / 4, row_limit - 1));
    bottom = __ldg(row_scales + min(row0 + 16 * warp + lane / 4 + 8, row_limit - 1));
  }

#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    PassResults<Int8TmaStore> results;  // the bf16 output's pairs (unused for s32)
    if constexpr (!kS32) {
      // Plain (coherent) loads of the column scales, as in store_int8_tile: they stay behind the
      // stores before them, so only one pass's scales are live.
#pragma unroll
      for (int slice = 0; slice < kSlicesAPass; ++slice) {
        const int j = pass * kSlicesAPass + slice;
        const int col = col0 + 8 * j + 2 * (lane % 4);
        const float2 scale = make_float2(col_scales[min(col, col_limit - 1)], col_scales[min(col + 1, col_limit - 1)]);
        results[slice][0] = __floats2bfloat162_rn(static_cast<float>(acc[4 * j + 0]) * top * scale.x,
                                                  static_cast<float>(acc[4 * j + 1]) * top * scale.y);
        results[slice][1] = __floats2bfloat162_rn(static_cast<float>(acc[4 * j + 2]) * bottom * scale.x,
                                                  static_cast<float>(acc[4 * j + 3]) * bottom * scale.y);
      }
    }
    begin_buffer_pass(barrier_id);
    if constexpr (kS32) {
      // s32 pairs: column c of a box is byte 4c of its 128-byte row (16-byte chunk c / 4).
#pragma unroll
      for (int slice = 0; slice < kSlicesAPass; ++slice) {
        const int j = pass * kSlicesAPass + slice;
        const int pass_col = 8 * slice + 2 * (lane % 4);
        const int box = pass_col / (kTileRowBytes / 4);
        const int col = pass_col % (kTileRowBytes / 4);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = 16 * warp + lane / 4 + 8 * half;
          std::uint8_t* destination =
              buffer + box * Int8TmaStore::kStoreBoxBytes + swizzle_128b_offset(row, col / 4) + (col % 4) * 4;
          *reinterpret_cast<int2*>(destination) = make_int2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
        }
      }
    } else {
      write_pass_to_buffer<Int8TmaStore>(buffer, results);
    }
    if (end_buffer_pass(barrier_id) && row0 < params.m) {
#pragma unroll
      for (int box = 0; box < Int8TmaStore::kBoxesPerPass; ++box) {
        const int box_col0 = col0 + pass * kPassColumns + box * (kPassColumns / Int8TmaStore::kBoxesPerPass);
        // The s32 map counts two-byte elements: column c of C32 is element 2c (the flaw forgets it).
        constexpr bool kDouble = kS32 && kFlaw != Int8Flaw::s32_box_column_halved;
        if (box_col0 < params.n)
          sm90::tma_store_2d(&params.c_store, buffer + box * Int8TmaStore::kStoreBoxBytes, kDouble ? 2 * box_col0 : box_col0,
                             row0);
      }
      sm90::tma_store_commit_group();
    }
  }
}

template <Int8Output kOutput, Int8Flaw kFlaw, bool kTmaStore>
__global__ void __launch_bounds__(Int8GemmConfig::kThreads, 1)
    int8_gemm_kernel(const __grid_constant__ Int8GemmParams params) {
  using Config = Int8GemmConfig;
  extern __shared__ std::uint8_t smem_raw[];
  const StageRing<Config> ring = byte_operand_ring<Config>(smem_raw);
  const TileSchedule<Config> schedule = tile_schedule<Config>(params);
  const int k_tiles = params.k_tiles;
  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  if (warpgroup == 0) {
    // ---- producer: one thread issues every TMA copy ----
    produce_byte_operand_tiles<Config>(ring, params, schedule, k_tiles);
    return;
  }

  // ---- consumers: 64 rows each ----
  sm90::setmaxnreg_increase<Config::kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int lane = threadIdx.x % 32;
  const int warp_in_group = (threadIdx.x % kWarpgroupThreads) / 32;

  PipelineState<Config::kStages> state;
  std::int32_t acc[Config::kAccumulators];
  for (int linear = schedule.first; linear < schedule.count; linear += schedule.step) {
    const TileCoord tile = schedule.cta_tile(params, linear);
#pragma unroll
    for (int i = 0; i < Config::kAccumulators; ++i) acc[i] = 0;

    // One K step of WGMMAs in flight, as in the bf16 ladder: after issuing step k, wait until only
    // it runs (step k - 1 has finished reading its stage) and release that stage.
    int previous_stage = 0;
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      ring.wait_full(state);
      // The flaw: the stage of the last K step is waited for and released, never multiplied.
      const bool multiply = kFlaw != Int8Flaw::k_step_dropped || k_tile + 1 < k_tiles || k_tiles == 1;
      if (multiply)
        int8_wgmma_k_step(acc, smem_u32(ring.tile_a(state.stage)) + consumer * kWarpgroupRows * kTileRowBytes,
                          smem_u32(ring.tile_b(state.stage)));
      sm90::wgmma_wait_group<1>();
      if (k_tile > 0) ring.release(previous_stage, lane);
      previous_stage = state.stage;
      state.advance();
    }
    sm90::wgmma_wait_group<0>();
    ring.release(previous_stage, lane);
    sm90::fence_accumulators(acc);

    if constexpr (kTmaStore) {
      if (params.use_tma_store) {
        store_int8_tile_tma<kOutput, kFlaw>(
            params, acc, aligned_dynamic_smem(smem_raw) + Config::kAfterRingOffset + consumer * Int8TmaStore::kPassBytes,
            consumer, tile.m * Config::kBlockM + consumer * kWarpgroupRows, tile.n * Config::kBlockN);
        continue;
      }
    }
    if (tile.m < params.tiles_m) {
      const int warp_row0 = tile.m * Config::kBlockM + consumer * kWarpgroupRows + 16 * warp_in_group;
      store_int8_tile<kOutput, kFlaw>(params, acc, warp_row0, tile.n * Config::kBlockN);
    }
  }
  if constexpr (kTmaStore)
    if (params.use_tma_store && threadIdx.x % kWarpgroupThreads == 0) sm90::tma_store_wait_all();
}

// One K step of a rung-04 consumer: its 128 x 128 tile as two m64 halves, four m64n128k32 WGMMAs
// each along the 128-byte row, as one group.
__device__ __forceinline__ void int8_pingpong_k_step(std::int32_t (&acc)[Int8PingPongConfig::kHalves][64],
                                                     std::uint32_t a_tile, std::uint32_t b_tile) {
  using Config = Int8PingPongConfig;
  sm90::wgmma_fence();
#pragma unroll
  for (int half = 0; half < Config::kHalves; ++half)
#pragma unroll
    for (int kk = 0; kk < Config::kBlockK / Config::kWgmmaK; ++kk) {
      constexpr std::uint32_t kStepBytes = Config::kWgmmaK;
      sm90::wgmma_m64n128k32_s8(
          acc[half], sm90::smem_descriptor_sw128(a_tile + half * kWarpgroupRows * kTileRowBytes + kk * kStepBytes),
          sm90::smem_descriptor_sw128(b_tile + kk * kStepBytes), 1u);
    }
  sm90::wgmma_commit_group();
}

// Rung 04: the producer loads the K steps of the CTA's tiles in walk order, as in rungs 01-02;
// consumer c computes tiles c, c + 2, c + 4, ... of the walk and steps its pipeline state over the
// other's stages. The two K loops take turns, in walk order: a consumer starts waiting for its
// tile's stages only once the other has waited for all of its previous tile's (two named
// barriers, one a direction). Without the turn a consumer could wait for a stage two or more uses
// ahead of the stage's barrier, whose phase parity then reads as already complete: a K loop of
// at least 12 steps skipped over (K >= 1536), or a CTA with two tiles and 8 steps, read stages
// before they landed. With it, one consumer's epilogue runs while the other's WGMMAs keep the
// tensor cores busy.
template <Int8Output kOutput>
__global__ void __launch_bounds__(Int8PingPongConfig::kThreads, 1)
    int8_gemm_pingpong_kernel(const __grid_constant__ Int8GemmParams params) {
  using Config = Int8PingPongConfig;
  extern __shared__ std::uint8_t smem_raw[];
  const StageRing<Config> ring = byte_operand_ring<Config>(smem_raw);
  const TileSchedule<Config> schedule = tile_schedule<Config>(params);
  const int k_tiles = params.k_tiles;
  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  if (warpgroup == 0) {
    produce_byte_operand_tiles<Config>(ring, params, schedule, k_tiles);
    return;
  }

  sm90::setmaxnreg_increase<Config::kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int lane = threadIdx.x % 32;
  const int warp_in_group = (threadIdx.x % kWarpgroupThreads) / 32;

  // The turn barriers: consumer c waits at 1 + c for the other's K loop to end, and signals the
  // other at 2 - c when its own has (both consumers' 256 threads counted).
  const int my_turn = 1 + consumer, other_turn = 2 - consumer;
  constexpr int kBothConsumers = Config::kConsumers * kWarpgroupThreads;

  PipelineState<Config::kStages> state;
  std::int32_t acc[Config::kHalves][64];
  int walk_index = 0;
  for (int linear = schedule.first; linear < schedule.count; linear += schedule.step, ++walk_index) {
    if (walk_index % Config::kConsumers != consumer) {  // the other consumer's tile: skip its stages
      for (int k_tile = 0; k_tile < k_tiles; ++k_tile) state.advance();
      continue;
    }
    const TileCoord tile = schedule.cta_tile(params, linear);
    if (walk_index > 0) sm90::named_barrier_sync(my_turn, kBothConsumers);
#pragma unroll
    for (int half = 0; half < Config::kHalves; ++half)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[half][i] = 0;

    int previous_stage = 0;
    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      ring.wait_full(state);
      int8_pingpong_k_step(acc, smem_u32(ring.tile_a(state.stage)), smem_u32(ring.tile_b(state.stage)));
      sm90::wgmma_wait_group<1>();
      if (k_tile > 0) ring.release(previous_stage, lane);
      previous_stage = state.stage;
      state.advance();
    }
    // This K loop has waited for all its stages: the other consumer's turn, if the walk has a
    // next tile.
    if (linear + schedule.step < schedule.count) sm90::named_barrier_arrive(other_turn, kBothConsumers);
    sm90::wgmma_wait_group<0>();
    ring.release(previous_stage, lane);
#pragma unroll
    for (int half = 0; half < Config::kHalves; ++half) sm90::fence_accumulators(acc[half]);

    if (tile.m < params.tiles_m) {
#pragma unroll
      for (int half = 0; half < Config::kHalves; ++half)
        store_int8_tile<kOutput, Int8Flaw::none, 64>(
            params, acc[half], tile.m * Config::kBlockM + half * kWarpgroupRows + 16 * warp_in_group,
            tile.n * Config::kBlockN);
    }
  }
}

#else  // not the sm_90a device pass: an empty kernel the launch code never runs

template <Int8Output kOutput>
__global__ void __launch_bounds__(Int8PingPongConfig::kThreads, 1)
    int8_gemm_pingpong_kernel(const __grid_constant__ Int8GemmParams) {}

template <Int8Output kOutput, Int8Flaw kFlaw, bool kTmaStore>
__global__ void __launch_bounds__(Int8GemmConfig::kThreads, 1) int8_gemm_kernel(const __grid_constant__ Int8GemmParams) {}

#endif  // KC_STAGE3_SM90A

// The parameters every INT8 launch fills alike for `Config`'s tiles: the operands' tensor maps, the
// outputs and scales, the sizes and the tile counts; no TMA store (rung 02's launch adds it).
template <class Config>
Int8GemmParams int8_gemm_params(const Int8GemmArgs& args, HopperLaunchCache& cache) {
  Int8GemmParams params{};
  params.a = cache.tensor_map(byte_operand_tile_map(args.a, args.m, args.k, Config::kBlockM));
  params.b = cache.tensor_map(byte_operand_tile_map(args.b, args.n, args.k, Config::kBlockN));
  params.use_tma_store = false;
  params.c32 = args.c32;
  params.c = args.c;
  params.scale_a = args.scale_a;
  params.scale_b = args.scale_b;
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.k_tiles = ceil_div(args.k, Config::kBlockK);
  params.tiles_m = ceil_div(args.m, Config::kBlockM);
  params.tiles_n = ceil_div(args.n, Config::kBlockN);
  params.cluster_tiles_m = params.tiles_m;
  return params;
}

template <Int8Output kOutput, Int8Flaw kFlaw, bool kTmaStore>
void launch_int8_gemm_output(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = Int8GemmConfig;
  const void* kernel = reinterpret_cast<const void*>(&int8_gemm_kernel<kOutput, kFlaw, kTmaStore>);
  constexpr int kSmemBytes = kTmaStore ? Int8TmaStore::kSmemBytes : Config::kSmemBytes;
  cache.prepare_kernel(kernel, kSmemBytes);

  Int8GemmParams params = int8_gemm_params<Config>(args, cache);
  // TMA needs 16-byte row strides: N % 4 == 0 for s32, N % 8 == 0 for bf16; other N store directly.
  params.use_tma_store = kTmaStore && args.n % (kOutput == Int8Output::s32 ? 4 : 8) == 0;
  if (params.use_tma_store) {
    params.c_store = cache.tensor_map(kOutput == Int8Output::s32
                                          ? tma_store_map(args.c32, args.m, 2 * args.n, Int8TmaStore::kStoreBox)
                                          : tma_store_map(args.c, args.m, args.n, Int8TmaStore::kStoreBox));
  }
  const int ctas = schedule_clusters<Config>(params, Schedule::persistent, Config::kRasterBandTileRows, cache, kernel);
  int8_gemm_kernel<kOutput, kFlaw, kTmaStore><<<ctas, Config::kThreads, kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

template <Int8Output kOutput>
void launch_int8_gemm_pingpong_output(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = Int8PingPongConfig;
  const void* kernel = reinterpret_cast<const void*>(&int8_gemm_pingpong_kernel<kOutput>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);
  Int8GemmParams params = int8_gemm_params<Config>(args, cache);
  const int ctas = schedule_clusters<Config>(params, Schedule::persistent, Config::kRasterBandTileRows, cache, kernel);
  int8_gemm_pingpong_kernel<kOutput><<<ctas, Config::kThreads, Config::kSmemBytes, stream>>>(params);
  KC_CUDA_CHECK(cudaGetLastError());
}

// Validates the arguments, then calls launch(output) with the output they ask for as a
// compile-time constant: s32 where c32 is given, bf16 dequantized otherwise.
template <class Launch>
void dispatch_int8_gemm_output(const Int8GemmArgs& args, Launch&& launch) {
  check_int8_gemm_args(args);
  if (args.c32 != nullptr)
    launch(std::integral_constant<Int8Output, Int8Output::s32>{});
  else
    launch(std::integral_constant<Int8Output, Int8Output::dequantized_bf16>{});
}

// Validates the arguments, then runs rung 01's kernel (rung 02's with kTmaStore) for their output.
template <Int8Flaw kFlaw, bool kTmaStore = false>
void launch_int8_gemm(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  dispatch_int8_gemm_output(args, [&](auto output) {
    launch_int8_gemm_output<decltype(output)::value, kFlaw, kTmaStore>(args, stream, cache);
  });
}

}  // namespace kc::stage3
