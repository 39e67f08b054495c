// fp8_gemm_kernel.cuh — the kernel of the FP8 GEMM's rungs 01-06 (and of its negative controls):
// the bf16 ladder's warp-specialized persistent kernel (gemm/warp_specialized_gemm.cuh) with FP8
// operands, 128 x 128 (rung 01) or 128 x 192 (rungs 02-04) tiles, and an FP32 promotion after
// every 128-deep K step (every four with one scale per tensor in rung 04).
//
// What is the same as the bf16 ladder: the producer warp, the ring of stages and its mbarriers
// (gemm/pipeline.cuh's StageRing, unchanged), the persistent tile walk in grouped raster order
// (gemm/tile_scheduler.cuh), the 128-byte swizzle and the WGMMA descriptors; how TMA and the
// descriptors serve one-byte values is in quant/byte_operand_gemm.cuh (the INT8 GEMM shares it).
//
// What is new:
//   - the instruction: wgmma m64n128k32 e4m3 (arch/sm90/wgmma_narrow.cuh). A K step is four of them
//     per consumer warpgroup: 32 FP8 values are the same 32 bytes of the swizzled row that 16 bf16
//     are, so the descriptors advance exactly as in the bf16 ladder.
//   - promotion. Hopper's tensor cores add FP8 products into an accumulator that keeps fewer bits
//     than FP32 (DeepSeek-V3's report measured about 14). Summed over all of K, the low bits of
//     every addition are lost, and with inputs of one sign the losses pile up in one direction. So
//     each K step's four WGMMAs start from zero (`accumulate` = 0 on the first) into `partial`,
//     and once they have finished the consumer adds `partial` into `total`, 64 FP32 registers per
//     thread, with FFMAs. With block scaling the same FFMA applies the step's scales:
//     total += partial x s_A[kb][row] x s_B[n block][kb]. The price: the warpgroup waits for its
//     own WGMMAs every step (wgmma.wait_group 0), and 64 more registers. The other consumer
//     warpgroup's WGMMAs keep the tensor cores busy meanwhile.
//   - the tile is 128 x 128 (two warpgroups of m64n128) or 128 x 192, not the bf16 ladder's
//     128 x 256: with `partial` and `total` both in registers, n256 would need 256 accumulator
//     registers a thread, n192 needs 192. A 128 x 128 tile of B is exactly one block of the weight
//     scales; a 192-wide tile spans one and a half, so its columns take one of two scales.
// Rungs 01 and 02 store pairs of bf16 straight from the registers (the bf16 ladder's rung 07 way,
// its store_fragment_16x8). Rung 03 stores through shared memory and TMA (the bf16 ladder's rung
// 09 way): the tile's epilogue is time both consumers spend away from the tensor cores, and the
// direct stores write half-used 32-byte sectors. Rung 04 lets the tensor cores sum four K steps
// (512 values of K) before each promotion when there is one scale per tensor: a quarter of the
// waits and FFMAs, at the cost of a longer sum in the tensor cores' narrower accumulator.
// Rungs 06-09 walk the K steps with block scales in their own consumers (Fp8BlockScaleWalk below);
// rung 09's producer also brings each step's scales into the stage (Fp8StageScales).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

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
#include "expert_tile.cuh"
#include "hopper_common.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/fp8_gemm_args.hpp"
#include "kc/stage3/fp8_grouped_gemm_args.hpp"
#include "kc/stage3/grouped_gemm_args.hpp"
#include "pipeline.cuh"
#include "quant/byte_operand_gemm.cuh"
#include "tile_scheduler.cuh"

namespace kc::stage3 {

struct Fp8GemmParams {
  CUtensorMap a;  // A: M x K FP8, seen as M x K/2 two-byte elements, boxes of 128 x 64
  CUtensorMap b;  // B: N x K FP8, the same
  CUtensorMap c;  // C for TMA stores, boxes of 64 x 64 bf16 (rungs 03-04; used when use_tma_store)
  bf16* c_pointer;  // C (bf16), for the direct stores
  bool use_tma_store;
  const float* scale_a;
  const float* scale_b;
  int m, n, k;
  int k_blocks;           // ceil(K / 128): K steps, and scales per row of s_A's transpose
  int n_blocks;           // ceil(N / 128): rows of s_B
  int tiles_m, tiles_n;   // 128 x kBlockN output tiles
  int cluster_tiles_m;    // tiles_m (no clusters): what the tile scheduler walks
  int raster_band;        // grouped raster band height, in tile rows
  // Rung 09 only (Fp8BlockScaleWalk::scales_in_stage): s_A [K/128, M] floats seen as K/128 rows of
  // 2M two-byte elements, in boxes of one row x 256 (one tile's 128 scales, 512 bytes), unswizzled.
  // Last, so that the other rungs' parameters keep their offsets.
  CUtensorMap scale_a_rows;
  // Rung 12 only (Config::kSplitLastWave): the grid's first `whole_tiles` work units are whole tiles,
  // the rest the remaining tiles' K steps in `splits` pieces each (`units` in all; work_unit in
  // tile_scheduler.cuh). A piece's consumer writes its promoted sums to its slot of `workspace` and
  // counts itself in `counters` (one per tile and consumer half, zero before and after a launch);
  // the last to arrive adds the pieces in split order and stores (split_k_last_cta.cuh).
  int whole_tiles;
  int splits;
  int units;
  float4* workspace;
  std::uint32_t* counters;
  // The FP8 grouped GEMM only (Config::kGrouped; fp8_grouped_gemm_args.hpp): the tile table. A is
  // every token (m = tokens), B the G weights as one G.N x K matrix, s_B G experts' blocks one after
  // another; tiles_m = tiles and tiles_n = 1 (the guard `tile.m < tiles_m` always passes).
  const int* row_starts;
  const int* tile_starts;
  int groups;
  int tiles;
};

// How a consumer walks its K steps with block scales (one scale per tensor always walks
// step_by_step):
//   step_by_step   (rungs 01-05) the scales of step k + 1 loaded while step k's WGMMAs run, their
//                  products taken at once; each step waited for and promoted before the next.
//   scales_ahead   (rung 06) each step's scale factors loaded two steps ahead and multiplied at
//                  the promotion (consume_with_scales_ahead below).
//   promote_behind (rung 07) rung 06's loads with two `partial` sets, a step's WGMMAs issued
//                  before the step before it is promoted (consume_promoting_behind below).
//   scales_in_stage (rung 09) rung 07's walk, each step's scales brought into its stage by the
//                  producer (produce_tiles_and_scales below) and read by the consumers with LDS:
//                  no global loads and no address arithmetic for them in the consumers.
//   wide_scales_in_stage (rung 10) the step-by-step walk of rungs 01-05 (one `partial` set, each
//                  step waited for and promoted) on 128 x 192 tiles, its scales in the stage as in
//                  rung 09: two partial sets of 192 columns would not fit a consumer's registers.
enum class Fp8BlockScaleWalk { step_by_step, scales_ahead, promote_behind, scales_in_stage, wide_scales_in_stage };

// Rungs 09 and 10: one K step's scales, in the stage beside its A and B tiles. A's 128 row scales
// s_A[kb][row0 .. row0 + 127] arrive by TMA (512 bytes; rows past M read as zeros, and their
// results are never stored); B's s_B[n block][kb] is written by the producer thread (an n128 tile
// lies in one block of B's scales), and for rung 10's n192 tiles also the next block's, where the
// tile's last 64 or 128 columns may fall. 128-byte aligned, as TMA wants its destination: 640 bytes.
struct alignas(128) Fp8StageScales {
  float a[2 * kWarpgroupRows];  // the tile's rows, both consumers'
  float b;
  float unused[3];  // keeps b and b_next apart: each written and read by a 4-byte access of its own
  float b_next;     // rung 10 only
};

// The knobs, in the shape gemm/pipeline.cuh and gemm/tile_scheduler.cuh read them
// (quant/byte_operand_gemm.cuh). kBlockNValue: the tile's columns, 128 (rung 01) or 192 (rungs
// 02-04).
// kPromotionIntervalValue (rung 04): with one scale per tensor, the K steps the tensor cores sum
// before the promotion (1 in rungs 01 and 02). Block scales change every K step, so they always
// promote every step.
// kStorePassColumnsValue (rung 03): 0, the results leave straight from the registers; otherwise
// through a buffer of 64 rows x this many columns per consumer and TMA stores of 64 x 64 boxes.
// kStagesValue: the ring's depth (six stages of 32 KiB at n128, five of 40 KiB at n192; four at
// n192 when a 48 KiB epilogue buffer must fit beside them).
// kBlockScaleWalkValue: how a consumer walks its K steps with block scales (Fp8BlockScaleWalk).
// kClusterMValue (rung 08): 2, two CTAs of a cluster (tiles m and m + 1 of one column) share each B
// tile, each loading half of it by TMA multicast; 1, no clusters.
// With Fp8BlockScaleWalk::scales_in_stage (rung 09) the stages' scales (Fp8StageScales, one a
// stage) lie after the ring's barriers and the epilogue's buffer moves past them, to the next
// 1024-byte boundary; every other walk keeps the shape's layout.
// kSplitLastWaveValue (rung 12): the tiles past the last whole wave split along K into pieces
// (Fp8GemmParams' whole_tiles .. counters), on rung 10's walk only.
// kGroupedValue (the FP8 grouped GEMM): every expert's tiles from the tile table (Fp8GemmParams'
// row_starts .. tiles), on rung 09's walk (grouped rung 01) or rung 10's (grouped rung 02).
template <int kBlockNValue, int kPromotionIntervalValue = 1, int kStorePassColumnsValue = 0,
          int kStagesValue = (kBlockNValue == 128 ? 6 : 5),
          Fp8BlockScaleWalk kBlockScaleWalkValue = Fp8BlockScaleWalk::step_by_step, int kClusterMValue = 1,
          bool kSplitLastWaveValue = false, bool kGroupedValue = false>
struct Fp8GemmConfig : ByteOperandGemmShape<kBlockNValue, kStagesValue, Fp8GemmParams, 2, kClusterMValue> {
  using Shape = ByteOperandGemmShape<kBlockNValue, kStagesValue, Fp8GemmParams, 2, kClusterMValue>;
  static constexpr bool kSplitLastWave = kSplitLastWaveValue;
  static constexpr bool kGrouped = kGroupedValue;
  // A piece's slot per consumer half: a thread's promoted sums as float4s (split_k_last_cta.cuh).
  static constexpr int kSplitSlotVectors = kWarpgroupThreads * Shape::kAccumulators / 4;
  static constexpr int kPromotionInterval = kPromotionIntervalValue;
  static constexpr Fp8BlockScaleWalk kBlockScaleWalk = kBlockScaleWalkValue;
  static constexpr bool kStoresThroughSmem = kStorePassColumnsValue > 0;
  static constexpr int kStorePassColumns = kStoresThroughSmem ? kStorePassColumnsValue : 64;
  static constexpr int kStoreBox = 64;
  static constexpr int kStoreBoxBytes = kStoreBox * kStoreBox * 2;
  static constexpr int kEpilogueBytesPerConsumer = kWarpgroupRows * kStorePassColumns * 2;
  static constexpr bool kScalesInStage = kBlockScaleWalk == Fp8BlockScaleWalk::scales_in_stage ||
                                        kBlockScaleWalk == Fp8BlockScaleWalk::wide_scales_in_stage;
  static constexpr int kStageScalesOffset = Shape::kStages * Shape::kStageBytes + 128;  // past the barriers
  static constexpr int kStageScalesEnd =
      kStageScalesOffset + (kScalesInStage ? Shape::kStages * static_cast<int>(sizeof(Fp8StageScales)) : 0);
  static constexpr int kEpilogueOffset =
      kScalesInStage ? ceil_div(kStageScalesEnd, 1024) * 1024 : Shape::kAfterRingOffset;
  static constexpr int kSmemBytes =
      kStoresThroughSmem ? kSmemAlignment + kEpilogueOffset + Shape::kConsumers * kEpilogueBytesPerConsumer
      : kScalesInStage   ? kSmemAlignment + kStageScalesEnd
                         : Shape::kSmemBytes;
  static_assert(kSmemBytes <= kMaxDynamicSmem, "shared memory over the per-block limit");
  static_assert(Shape::kBarrierBytes <= 128, "the stages' scales start 128 bytes past the ring");
  static_assert(kBlockScaleWalk != Fp8BlockScaleWalk::scales_in_stage || Shape::kBlockN == kFp8ScaleBlock,
                "rung 09's scales in the stage: n128 tiles (one block of B's scales)");
  static_assert(!kScalesInStage || Shape::kClusterM == 1, "scales in the stage: no clusters");
  static_assert(!kSplitLastWave || kBlockScaleWalk == Fp8BlockScaleWalk::wide_scales_in_stage,
                "the split last wave: rung 10's walk");
  static_assert(!kGrouped || (kStoresThroughSmem && Shape::kBlockM == kFp8GroupedTileRows &&
                              ((kBlockScaleWalk == Fp8BlockScaleWalk::scales_in_stage &&
                                Shape::kBlockN == kFp8GroupedTileCols) ||
                               (kBlockScaleWalk == Fp8BlockScaleWalk::wide_scales_in_stage &&
                                Shape::kBlockN == kFp8GroupedWideTileCols))),
                "the grouped walk: rung 09's on n128 tiles or rung 10's on n192 (the host's tile table of that "
                "width), TMA stores");
  static_assert(sizeof(Fp8StageScales::a) == Shape::kBlockM * sizeof(float), "a scale of A for each row of the tile");
  static_assert(!kStoresThroughSmem || Shape::kBlockN % kStorePassColumns == 0, "whole passes a tile");
  static_assert(kStorePassColumns % kStoreBox == 0, "whole boxes a pass");
  static_assert(kPromotionInterval >= 1, "promote at least every K step's sum");
  static_assert(Shape::kBlockN == 128 || Shape::kBlockN == 192, "wgmma n128 or n192");
  // A tile's columns span at most two blocks of B's scales (n192 tiles start at a block or in its
  // middle).
  static_assert(Shape::kBlockN <= kFp8ScaleBlock + kFp8ScaleBlock / 2, "at most two scale blocks a tile");
  static_assert(Shape::kBlockK == kFp8ScaleBlock, "a K step is one block of A's and B's scales");
};

#if KC_STAGE3_SM90A

// The scales of one K block for the two rows a thread holds (row, row + 8), and for the one or
// two blocks of B's scales the tile's columns fall in: s_A[kb][row] s_B[nb][kb]. Rows past M read
// row M - 1, a block past N's last reads the last (their results are not stored).
struct Fp8StepScales {
  float top = 1.f, bottom = 1.f;                // columns in the tile's first block of B's scales
  float top_next = 1.f, bottom_next = 1.f;      // columns in the next block (n192 tiles only)
};

// The four factors those products are made of, as loaded.
struct Fp8StepScaleFactors {
  float a_top = 1.f, a_bottom = 1.f;  // s_A[kb][row], s_A[kb][row + 8]
  float b = 1.f, b_next = 1.f;        // s_B[nb][kb], s_B[nb + 1][kb]
};

template <Fp8Scaling kScaling, Fp8Flaw kFlaw>
__device__ __forceinline__ Fp8StepScaleFactors load_step_scale_factors(const Fp8GemmParams& params, int kb,
                                                                       int row_top, int col0) {
  Fp8StepScaleFactors f;
  if constexpr (kScaling == Fp8Scaling::block) {
    if constexpr (kFlaw == Fp8Flaw::wrong_scale_block) kb = min(kb + 1, params.k_blocks - 1);
    const float* column = params.scale_a + static_cast<std::size_t>(kb) * params.m;
    f.a_top = __ldg(column + min(row_top, params.m - 1));
    f.a_bottom = __ldg(column + min(row_top + 8, params.m - 1));
    if constexpr (kFlaw == Fp8Flaw::scale_twice) {
      f.a_top *= f.a_top;
      f.a_bottom *= f.a_bottom;
    }
    const int n_block = col0 / kFp8ScaleBlock;
    f.b = __ldg(params.scale_b + static_cast<std::size_t>(n_block) * params.k_blocks + kb);
    f.b_next =
        __ldg(params.scale_b + static_cast<std::size_t>(min(n_block + 1, params.n_blocks - 1)) * params.k_blocks + kb);
  }
  return f;
}

__device__ __forceinline__ Fp8StepScales step_scales(const Fp8StepScaleFactors& f) {
  Fp8StepScales s;
  s.top = f.a_top * f.b;
  s.bottom = f.a_bottom * f.b;
  s.top_next = f.a_top * f.b_next;
  s.bottom_next = f.a_bottom * f.b_next;
  return s;
}

template <Fp8Scaling kScaling, Fp8Flaw kFlaw>
__device__ __forceinline__ Fp8StepScales load_step_scales(const Fp8GemmParams& params, int kb, int row_top,
                                                          int col0) {
  if constexpr (kScaling == Fp8Scaling::block)
    return step_scales(load_step_scale_factors<kScaling, kFlaw>(params, kb, row_top, col0));
  return Fp8StepScales{};
}

// Rung 06's lookahead: where the scale loads have got to in the CTA's walk, tile after tile and K
// step after K step, and the thread's top row and first column in that tile. load() fetches that
// step's factors and moves one step on; past the CTA's last step it fetches that step again (the
// loads stay unconditional, so a step's factors are always the registers it loaded into).
template <class Config>
struct Fp8ScaleLookahead {
  int linear, kb, row_top, col0;

  __device__ __forceinline__ void enter_tile(const Fp8GemmParams& params, const TileSchedule<Config>& schedule,
                                             int row_in_tile) {
    const TileCoord tile = schedule.cta_tile(params, linear);
    row_top = tile.m * Config::kBlockM + row_in_tile;
    col0 = tile.n * Config::kBlockN;
  }

  template <Fp8Flaw kFlaw>
  __device__ __forceinline__ Fp8StepScaleFactors load(const Fp8GemmParams& params,
                                                      const TileSchedule<Config>& schedule, int row_in_tile) {
    const Fp8StepScaleFactors f = load_step_scale_factors<Fp8Scaling::block, kFlaw>(params, kb, row_top, col0);
    if (kb + 1 < params.k_blocks) {
      ++kb;
    } else if (linear + schedule.step < schedule.count) {
      kb = 0;
      linear += schedule.step;
      enter_tile(params, schedule, row_in_tile);
    }
    return f;
  }
};

// total += partial x scale: the promotion. Accumulator slice j holds rows (top, top, bottom,
// bottom) of column 8j + 2 (lane % 4) in d[4j .. 4j + 3]; in an n192 tile that starts in the middle
// of a block of B's scales (col0 % 128 == 64), slices from 8 on lie in the next block.
// kSplitAt (rung 10): the first slice in the next block as a constant, where the caller has
// branched on col0 % 128; 0 works it out from col0 (rungs 01-09), and there the compiler folds
// the per-slice choice of scale into a product per slice (two FMUL a slice on n192 tiles).
template <class Config, int kSplitAt = 0>
__device__ __forceinline__ void promote(float (&total)[Config::kAccumulators],
                                        const float (&partial)[Config::kAccumulators], Fp8StepScales s, int col0) {
  const int first_next_slice = kSplitAt > 0 ? kSplitAt : (kFp8ScaleBlock - col0 % kFp8ScaleBlock) / 8;  // 16 or 8
#pragma unroll
  for (int j = 0; j < Config::kAccumulators / 4; ++j) {
    float top = s.top, bottom = s.bottom;
    if constexpr (Config::kBlockN > kFp8ScaleBlock) {
      if (j >= first_next_slice) {
        top = s.top_next;
        bottom = s.bottom_next;
      }
    }
    total[4 * j + 0] = fmaf(partial[4 * j + 0], top, total[4 * j + 0]);
    total[4 * j + 1] = fmaf(partial[4 * j + 1], top, total[4 * j + 1]);
    total[4 * j + 2] = fmaf(partial[4 * j + 2], bottom, total[4 * j + 2]);
    total[4 * j + 3] = fmaf(partial[4 * j + 3], bottom, total[4 * j + 3]);
  }
}

// One K step of one warpgroup: four m64n128k32 WGMMAs along the 128-byte row, as one group.
// first_accumulate = 0 starts the step's sum from zero.
template <class Config>
__device__ __forceinline__ void fp8_wgmma_k_step(float (&acc)[Config::kAccumulators], std::uint32_t a_tile,
                                                 std::uint32_t b_tile, std::uint32_t first_accumulate) {
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Config::kBlockK / Config::kWgmmaK; ++kk) {
    constexpr std::uint32_t kStepBytes = Config::kWgmmaK;  // 32 one-byte values
    sm90::wgmma_m64nNk32_e4m3<Config::kBlockN>(acc, sm90::smem_descriptor_sw128(a_tile + kk * kStepBytes),
                                               sm90::smem_descriptor_sw128(b_tile + kk * kStepBytes),
                                               kk > 0 ? 1u : first_accumulate);
  }
  sm90::wgmma_commit_group();
}

// The tile's results: each 8-column slice j of the accumulators is one 16 x 8 fragment (rows
// warp_row0 + lane / 4 and + 8), stored as pairs of bf16 by the bf16 ladder's epilogue
// (gemm/epilogue.cuh) with alpha = the per-tensor scale (1 with block scales, already applied).
template <class Config>
__device__ __forceinline__ void store_fp8_tile(const Fp8GemmParams& params, const float (&total)[Config::kAccumulators],
                                               int warp_row0, int col0, float scale) {
  const LinearCombination linear{scale, 0.f, nullptr, params.n};
#pragma unroll
  for (int j = 0; j < Config::kAccumulators / 4; ++j)
    store_fragment_16x8(params.c_pointer, params.m, params.n, warp_row0, col0 + 8 * j, &total[4 * j], linear,
                        Identity{});
}

// Rungs 03 and 04's epilogue: the tile's results, times the per-tensor scale, as bf16 through the
// consumer's swizzled buffer and TMA stores of 64 x 64 boxes (whole lines, clipped by TMA at the
// edges of C), in passes of kStorePassColumns columns: the bf16 ladder's rung 09 pieces
// (gemm/epilogue_tma_store.cuh). Before a pass writes the buffer, the stores of the last pass must
// have read it.
template <class Config>
__device__ __forceinline__ void store_fp8_tile_tma(const Fp8GemmParams& params, const float (&total)[Config::kAccumulators],
                                                   std::uint8_t* buffer, int consumer, int row0, int col0, float scale) {
  constexpr int kPasses = Config::kBlockN / Config::kStorePassColumns;
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    PassResults<Config> results;
    pack_pass<Config>(total, pass, results,
                      [scale](int, float2 value) { return make_float2(value.x * scale, value.y * scale); });
    begin_buffer_pass(1 + consumer);
    write_pass_to_buffer<Config>(buffer, results);
    if (end_buffer_pass(1 + consumer))
      store_pass_boxes<Config>(params, buffer, row0, col0 + pass * Config::kStorePassColumns);
  }
}

// A tile's results leave: through the consumer's buffer and TMA stores (rungs 03-06, when C's rows
// are 16-byte multiples), else straight from the registers (a tile row past M's last tile stores
// nothing).
template <class Config>
__device__ __forceinline__ void store_fp8_tile_results(const Fp8GemmParams& params,
                                                       const float (&total)[Config::kAccumulators],
                                                       std::uint8_t* smem_raw, int consumer, TileCoord tile,
                                                       int warp_row0, int col0, float scale) {
  if constexpr (Config::kStoresThroughSmem) {
    if (params.use_tma_store) {
      // In a cluster the second CTA of the last strip, when the tile rows are odd, holds rows past
      // M only: it stores nothing.
      if constexpr (Config::kClusterM > 1)
        if (tile.m >= params.tiles_m) return;
      store_fp8_tile_tma<Config>(params, total,
                                 aligned_dynamic_smem(smem_raw) + Config::kEpilogueOffset +
                                     consumer * Config::kEpilogueBytesPerConsumer,
                                 consumer, tile.m * Config::kBlockM + consumer * kWarpgroupRows, col0, scale);
      return;
    }
  }
  if (tile.m < params.tiles_m) store_fp8_tile<Config>(params, total, warp_row0, col0, scale);
}

// The FP8 grouped GEMM (Config::kGrouped): tile `linear`'s results inside its expert's rows. A
// 64-row half leaves by TMA store where half_stored_by_tma allows (gemm/expert_tile.cuh: inside the
// expert, or clipped at the last token); else straight from the registers with the expert's rows as
// M, so that no store reaches the next expert's. `warp_row0`: the warp's first row in the expert.
template <class Config>
__device__ __forceinline__ void store_fp8_expert_tile_results(const Fp8GemmParams& params,
                                                              const float (&total)[Config::kAccumulators],
                                                              std::uint8_t* smem_raw, int consumer, int linear,
                                                              int warp_row0, int col0) {
  const ExpertTile expert = expert_tile<Config>(params, linear);
  const int half_row0 = expert.tile.m * Config::kBlockM + consumer * kWarpgroupRows;
  // The same answer in every thread of the warpgroup (it depends on the tile alone), which the
  // compiler cannot tell from values loaded from the tile table: the warp vote says so (FP8 rung 12's
  // lesson: a branch it takes as divergent moves the K walk's arithmetic off the uniform datapath).
  if (__all_sync(0xffffffffu, half_stored_by_tma<Config>(params, expert, half_row0))) {
    store_fp8_tile_tma<Config>(params, total,
                               aligned_dynamic_smem(smem_raw) + Config::kEpilogueOffset +
                                   consumer * Config::kEpilogueBytesPerConsumer,
                               consumer, expert.first_row + half_row0, col0, 1.f);
    return;
  }
  bf16* const expert_c = params.c_pointer + static_cast<std::size_t>(expert.first_row) * params.n;
  const LinearCombination linear_combination{1.f, 0.f, nullptr, params.n};
#pragma unroll
  for (int j = 0; j < Config::kAccumulators / 4; ++j)
    store_fragment_16x8(expert_c, expert.rows, params.n, warp_row0, col0 + 8 * j, &total[4 * j], linear_combination,
                        Identity{});
}

// Rungs 06 and 07: the end of a tile in a consumer's walk (block scales, already applied): its
// results stored, then the CTA's next tile with its accumulators zeroed; false when there is none.
template <class Config>
__device__ __forceinline__ bool finish_tile_of_walk(const Fp8GemmParams& params, const TileSchedule<Config>& schedule,
                                                    float (&total)[Config::kAccumulators], std::uint8_t* smem_raw,
                                                    int consumer, int lane, int row_in_tile, int col0, int& linear,
                                                    TileCoord& tile, int& k_tile) {
  if constexpr (Config::kGrouped)
    store_fp8_expert_tile_results<Config>(params, total, smem_raw, consumer, linear,
                                          tile.m * Config::kBlockM + row_in_tile - lane / 4, col0);
  else
    store_fp8_tile_results<Config>(params, total, smem_raw, consumer, tile,
                                   tile.m * Config::kBlockM + row_in_tile - lane / 4, col0, 1.f);
  linear += schedule.step;
  if (linear >= schedule.count) return false;
  tile = consumer_tile<Config>(schedule, params, linear);
  k_tile = 0;
#pragma unroll
  for (int i = 0; i < Config::kAccumulators; ++i) total[i] = 0.f;
  return true;
}

// Rung 09: the stages' scales in the kernel's shared memory (Fp8GemmConfig's kStageScalesOffset).
template <class Config>
__device__ __forceinline__ Fp8StageScales* fp8_stage_scales(std::uint8_t* smem_raw) {
  return reinterpret_cast<Fp8StageScales*>(aligned_dynamic_smem(smem_raw) + Config::kStageScalesOffset);
}

// Rungs 09 and 10: a step's scale factors, read from its stage once it has landed: LDS at offsets
// fixed for the thread (its rows row_in_tile and + 8, then B's scale, and on n192 tiles the next
// block's). On n128 tiles b_next stays unused: the tile lies in one block of B's scales.
// On n192 tiles (rung 10) and in the grouped walk B's scales, the same for the whole warp, are read
// by lane 0 alone — the lane whose arrive frees the stage (StageRing::release), so its reads come
// before that arrive in its own program order — and passed to the other lanes by broadcast_b_scales. The compiler
// places those shuffles among the step's WGMMAs wherever the source has them, and a shuffle waits
// for lane 0's LDS: so rung 10 reads the stage before issuing the WGMMAs, not after.
template <class Config>
__device__ __forceinline__ Fp8StepScaleFactors stage_scale_factors(const Fp8StageScales& scales, int row_in_tile) {
  Fp8StepScaleFactors f;
  f.a_top = scales.a[row_in_tile];
  f.a_bottom = scales.a[row_in_tile + 8];
  if constexpr (Config::kBlockN > kFp8ScaleBlock || Config::kGrouped) {
    f.b = 0.f;
    f.b_next = 0.f;
    if (threadIdx.x % 32 == 0) {
      f.b = scales.b;
      f.b_next = scales.b_next;
    }
  } else {
    f.b = scales.b;
  }
  return f;
}

// Rung 10: lane 0's two scales of B (stage_scale_factors) to the whole warp.
__device__ __forceinline__ Fp8StepScaleFactors broadcast_b_scales(Fp8StepScaleFactors f) {
  f.b = __shfl_sync(0xffffffffu, f.b, 0);
  f.b_next = __shfl_sync(0xffffffffu, f.b_next, 0);
  return f;
}

// Rung 09's producer: the ring's loads of StageRing::load_tile (no clusters here) plus each K step's
// scales into the stage, on the same full barrier. One thread, per K step: B's scale loaded from
// global memory before the wait for the free stage (the wait hides the load), written into the
// stage once it is free and published by the arrive (an mbarrier arrive releases the thread's
// earlier writes to whoever waits for the phase); the arrive announces the A and B tiles' bytes
// plus the 512 of A's scales, whose TMA box then lands with the tiles.
// The FP8 grouped GEMM (Config::kGrouped) walks the experts' tiles: A's rows from the expert's first
// token, B's from its weight, s_B from its blocks (the next expert's with the flaw
// neighbours_weight_scales); A's scales are every token's, found at the tile's first token as above.
template <class Config, Fp8Flaw kFlaw = Fp8Flaw::none>
__device__ __forceinline__ void produce_tiles_and_scales(const StageRing<Config>& ring, const Fp8GemmParams& params,
                                                         const TileSchedule<Config>& schedule,
                                                         Fp8StageScales* stage_scales) {
  sm90::setmaxnreg_decrease<Config::kProducerRegisters>();
  if (threadIdx.x != 0) return;
  constexpr std::uint32_t kStageBytesWithScales = Config::kStageBytes + sizeof(Fp8StageScales::a);
  PipelineState<Config::kStages> state;
  for (int linear = schedule.first; linear < schedule.count; linear += schedule.step) {
    // A whole tile but in rung 12's last wave (work_unit: always, without Config::kSplitLastWave).
    const WorkUnit unit = work_unit<Config>(params, linear, params.k_blocks);
    constexpr bool kTwoBlocks = Config::kBlockN > kFp8ScaleBlock;
    int a_row, b_row;
    const float* b_scales;
    const float* b_scales_next;
    if constexpr (Config::kGrouped) {
      // The tile's expert (the table's answer itself: the scales need the expert's index).
      const GroupedTile tile =
          grouped_tile_at(unit.tile, params.tile_starts, params.row_starts, params.groups, Config::kBlockM);
      a_row = params.row_starts[tile.group] + tile.m * Config::kBlockM;
      b_row = tile.group * params.n + tile.n * Config::kBlockN;
      const int scale_group =
          kFlaw == Fp8Flaw::neighbours_weight_scales ? min(tile.group + 1, params.groups - 1) : tile.group;
      if constexpr (kTwoBlocks) {
        // Grouped rung 02's n192 tiles: the expert's block of B's scales the tile's first column lies
        // in and the next (its last where there is none: those columns are not stored), as below.
        const float* const expert_scales =
            params.scale_b + static_cast<std::size_t>(scale_group) * params.n_blocks * params.k_blocks;
        const int n_block = tile.n * Config::kBlockN / kFp8ScaleBlock;
        b_scales = expert_scales + static_cast<std::size_t>(n_block) * params.k_blocks;
        b_scales_next =
            expert_scales + static_cast<std::size_t>(min(n_block + 1, params.n_blocks - 1)) * params.k_blocks;
      } else {
        b_scales =
            params.scale_b + (static_cast<std::size_t>(scale_group) * params.n_blocks + tile.n) * params.k_blocks;
        b_scales_next = b_scales;  // n128 tiles: one block of B's scales
      }
    } else {
      const TileCoord tile = schedule.cta_tile(params, unit.tile);
      a_row = tile.m * Config::kBlockM;  // without clusters a tile starts inside A and B
      b_row = tile.n * Config::kBlockN;
      // s_B's row of the block the tile's first column lies in (tile.n on n128 tiles) and, on rung
      // 10's n192 tiles, of the next block (the last where there is none: its columns are not stored).
      const int n_block = kTwoBlocks ? b_row / kFp8ScaleBlock : tile.n;
      b_scales = params.scale_b + static_cast<std::size_t>(n_block) * params.k_blocks;
      b_scales_next =
          params.scale_b + static_cast<std::size_t>(min(n_block + 1, params.n_blocks - 1)) * params.k_blocks;
    }
    for (int k_tile = unit.k_tile_begin; k_tile < unit.k_tile_end; ++k_tile) {
      const float b_scale = __ldg(b_scales + k_tile);
      float b_scale_next = 0.f;
      if constexpr (kTwoBlocks) b_scale_next = __ldg(b_scales_next + k_tile);
      const int stage = state.stage;
      sm90::mbarrier_wait(&ring.empty[stage], state.phase ^ 1);
      stage_scales[stage].b = b_scale;
      if constexpr (kTwoBlocks) stage_scales[stage].b_next = b_scale_next;
      sm90::mbarrier_arrive_expect_tx(&ring.full[stage], kStageBytesWithScales);
      const int k0 = k_tile * kHopperBlockK;
      sm90::tma_load_2d(ring.tile_a(stage), &params.a, &ring.full[stage], k0, a_row);
      sm90::tma_load_2d(ring.tile_b(stage), &params.b, &ring.full[stage], k0, b_row);
      // Row k_tile of s_A, from float a_row on: element 2 a_row of the two-byte view.
      sm90::tma_load_2d(stage_scales[stage].a, &params.scale_a_rows, &ring.full[stage], 2 * a_row, k_tile);
      state.advance();
    }
  }
}

// Rung 06's consumer with block scales: one walk over the CTA's K steps, tile after tile, two
// steps a trip, so that each of the two steps has registers of its own for its scale factors.
// A step promotes with the factors it loaded two steps earlier and then loads, into the same
// registers, those of the step two ahead (in this tile or the next): no register copies between
// steps, so nothing waits for a load before the promotion that needs it. (Rotating three sets
// through one step a trip compiles to register moves at the top of the loop, and a move waits for
// its load as an FMUL would.)
template <class Config, Fp8Flaw kFlaw>
__device__ __forceinline__ void consume_with_scales_ahead(const Fp8GemmParams& params, const StageRing<Config>& ring,
                                                          const TileSchedule<Config>& schedule,
                                                          std::uint8_t* smem_raw, int consumer, int lane,
                                                          int warp_in_group) {
  int linear = schedule.first;
  if (linear >= schedule.count) return;
  const int row_in_tile = consumer * kWarpgroupRows + 16 * warp_in_group + lane / 4;
  Fp8ScaleLookahead<Config> ahead{linear, 0, 0, 0};
  ahead.enter_tile(params, schedule, row_in_tile);
  Fp8StepScaleFactors even = ahead.template load<kFlaw>(params, schedule, row_in_tile);
  Fp8StepScaleFactors odd = ahead.template load<kFlaw>(params, schedule, row_in_tile);

  PipelineState<Config::kStages> state;
  float partial[Config::kAccumulators];
  float total[Config::kAccumulators];
#pragma unroll
  for (int i = 0; i < Config::kAccumulators; ++i) total[i] = 0.f;
  TileCoord tile = schedule.cta_tile(params, linear);
  int k_tile = 0;
  // One K step with `factors` (its own); false once the CTA's last tile is stored.
  const auto step = [&](Fp8StepScaleFactors& factors) -> bool {
    ring.wait_full(state);
    fp8_wgmma_k_step<Config>(partial, smem_u32(ring.tile_a(state.stage)) + consumer * kWarpgroupRows * kTileRowBytes,
                             smem_u32(ring.tile_b(state.stage)), 0u);
    sm90::wgmma_wait_group<0>();
    sm90::fence_accumulators(partial);
    ring.release(state.stage, lane);
    state.advance();
    const int col0 = tile.n * Config::kBlockN;
    promote<Config>(total, partial, step_scales(factors), col0);
    factors = ahead.template load<kFlaw>(params, schedule, row_in_tile);
    if (++k_tile < params.k_blocks) return true;
    return finish_tile_of_walk<Config>(params, schedule, total, smem_raw, consumer, lane, row_in_tile, col0, linear,
                                       tile, k_tile);
  };
  while (step(even) && step(odd)) {
  }
  if constexpr (Config::kStoresThroughSmem)
    if (params.use_tma_store && threadIdx.x % kWarpgroupThreads == 0) sm90::tma_store_wait_all();
}

// Rung 07's consumer with block scales: rung 06's walk with two `partial` sets, one a copy of the
// step. A step issues its WGMMAs into its own set, then waits only for the step before
// (wgmma.wait_group 1) and promotes that one's set while its own WGMMAs run; a tile's last step then
// waits for its own and promotes it before the epilogue. The scale factors are rung 06's, each set
// reloaded once its step is promoted.
// Rung 09 (Config::kScalesInStage) walks the same way, but a step reads its factors from its stage
// (stage_scale_factors) right after issuing its WGMMAs, before the stage can be freed, instead of
// loading them from global memory two steps ahead.
template <class Config, Fp8Flaw kFlaw>
__device__ __forceinline__ void consume_promoting_behind(const Fp8GemmParams& params, const StageRing<Config>& ring,
                                                         const TileSchedule<Config>& schedule,
                                                         std::uint8_t* smem_raw, int consumer, int lane,
                                                         int warp_in_group) {
  int linear = schedule.first;
  if (linear >= schedule.count) return;
  const int row_in_tile = consumer * kWarpgroupRows + 16 * warp_in_group + lane / 4;
  Fp8ScaleLookahead<Config> ahead{linear, 0, 0, 0};
  ahead.enter_tile(params, schedule, row_in_tile);
  Fp8StepScaleFactors even, odd;
  if constexpr (!Config::kScalesInStage) {
    even = ahead.template load<kFlaw>(params, schedule, row_in_tile);
    odd = ahead.template load<kFlaw>(params, schedule, row_in_tile);
  }
  const Fp8StageScales* const stage_scales = fp8_stage_scales<Config>(smem_raw);
  // Frees a stage. With the scales in the stage, every lane has read them (LDS) before lane 0's
  // arrive lets the producer overwrite them.
  const auto release = [&](int stage) {
    if constexpr (Config::kScalesInStage) __syncwarp();
    ring.release(stage, lane);
  };

  PipelineState<Config::kStages> state;
  float partial_even[Config::kAccumulators];
  float partial_odd[Config::kAccumulators];
  float total[Config::kAccumulators];
#pragma unroll
  for (int i = 0; i < Config::kAccumulators; ++i) total[i] = 0.f;
  TileCoord tile = consumer_tile<Config>(schedule, params, linear);  // the expert's, grouped
  int k_tile = 0;
  int previous_stage = 0;
  using Accumulators = float[Config::kAccumulators];
  // One K step into `mine` (its factors `my_factors`); the step before is `theirs`. False once the
  // CTA's last tile is stored.
  const auto step = [&](Accumulators& mine, Fp8StepScaleFactors& my_factors, Accumulators& theirs,
                        Fp8StepScaleFactors& their_factors) -> bool {
    ring.wait_full(state);
    fp8_wgmma_k_step<Config>(mine, smem_u32(ring.tile_a(state.stage)) + consumer * kWarpgroupRows * kTileRowBytes,
                             smem_u32(ring.tile_b(state.stage)), 0u);
    if constexpr (Config::kScalesInStage)
      my_factors = stage_scale_factors<Config>(stage_scales[state.stage], row_in_tile);
    // The grouped walk: lane 0 alone reads B's scale (stage_scale_factors) and passes it on, so that
    // every read of the producer-written word comes before the same thread's release arrive. With
    // every lane reading it, as rung 09 does, racecheck reported hazards against the producer's next
    // write to that stage (the order through __syncwarp and lane 0's arrive is one it does not see).
    if constexpr (Config::kGrouped) my_factors = broadcast_b_scales(my_factors);
    const int col0 = tile.n * Config::kBlockN;
    if (k_tile > 0) {
      sm90::wgmma_wait_group<1>();
      sm90::fence_accumulators(theirs);
      release(previous_stage);
      promote<Config>(total, theirs, step_scales(their_factors), col0);
      if constexpr (!Config::kScalesInStage)
        their_factors = ahead.template load<kFlaw>(params, schedule, row_in_tile);
    }
    previous_stage = state.stage;
    state.advance();
    if (++k_tile < params.k_blocks) return true;
    sm90::wgmma_wait_group<0>();
    sm90::fence_accumulators(mine);
    release(previous_stage);
    promote<Config>(total, mine, step_scales(my_factors), col0);
    if constexpr (!Config::kScalesInStage) my_factors = ahead.template load<kFlaw>(params, schedule, row_in_tile);
    return finish_tile_of_walk<Config>(params, schedule, total, smem_raw, consumer, lane, row_in_tile, col0, linear,
                                       tile, k_tile);
  };
  while (step(partial_even, even, partial_odd, odd) && step(partial_odd, odd, partial_even, even)) {
  }
  if constexpr (Config::kStoresThroughSmem)
    if (params.use_tma_store && threadIdx.x % kWarpgroupThreads == 0) sm90::tma_store_wait_all();
}

template <class Config, Fp8Scaling kScaling, Fp8Flaw kFlaw>
__global__ void __launch_bounds__(Config::kThreads, 1) fp8_gemm_kernel(const __grid_constant__ Fp8GemmParams params) {
  extern __shared__ std::uint8_t smem_raw[];
  const StageRing<Config> ring = byte_operand_ring<Config>(smem_raw);
  const TileSchedule<Config> schedule = tile_schedule<Config>(params);
  const int k_tiles = params.k_blocks;
  const int warpgroup = threadIdx.x / kWarpgroupThreads;
  if constexpr (Config::kClusterM > 1) {
    // Rung 08: rung 06's producer and consumers in a cluster. Every thread of both CTAs reaches
    // the cluster barrier at the end: no CTA may exit while its peer can still multicast into it
    // or arrive on its barriers.
    static_assert(kScaling == Fp8Scaling::block && Config::kBlockScaleWalk == Fp8BlockScaleWalk::scales_ahead,
                  "clusters run rung 06's block-scaled walk");
    if (warpgroup == 0) {
      produce_byte_operand_tiles<Config>(ring, params, schedule, k_tiles);
    } else {
      sm90::setmaxnreg_increase<Config::kConsumerRegisters>();
      consume_with_scales_ahead<Config, kFlaw>(params, ring, schedule, smem_raw, warpgroup - 1,
                                               static_cast<int>(threadIdx.x % 32),
                                               static_cast<int>((threadIdx.x % kWarpgroupThreads) / 32));
    }
    sm90::cluster_sync();
    return;
  }
  static_assert(!Config::kScalesInStage || kScaling == Fp8Scaling::block, "scales in the stage: block scales");
  if (warpgroup == 0) {
    // ---- producer: one thread issues every TMA copy ----
    if constexpr (Config::kScalesInStage)
      produce_tiles_and_scales<Config, kFlaw>(ring, params, schedule, fp8_stage_scales<Config>(smem_raw));
    else
      produce_byte_operand_tiles<Config>(ring, params, schedule, k_tiles);
    return;
  }

  // ---- consumers: 64 rows each ----
  sm90::setmaxnreg_increase<Config::kConsumerRegisters>();
  const int consumer = warpgroup - 1;
  const int lane = threadIdx.x % 32;
  const int warp_in_group = (threadIdx.x % kWarpgroupThreads) / 32;
  if constexpr (kScaling == Fp8Scaling::block && Config::kBlockScaleWalk == Fp8BlockScaleWalk::scales_ahead) {
    consume_with_scales_ahead<Config, kFlaw>(params, ring, schedule, smem_raw, consumer, lane, warp_in_group);
    return;
  }
  if constexpr (kScaling == Fp8Scaling::block && (Config::kBlockScaleWalk == Fp8BlockScaleWalk::promote_behind ||
                                                  Config::kBlockScaleWalk == Fp8BlockScaleWalk::scales_in_stage)) {
    consume_promoting_behind<Config, kFlaw>(params, ring, schedule, smem_raw, consumer, lane, warp_in_group);
    return;
  }
  float per_tensor_scale = 1.f;
  if constexpr (kScaling == Fp8Scaling::per_tensor) per_tensor_scale = __ldg(params.scale_a) * __ldg(params.scale_b);

  PipelineState<Config::kStages> state;
  float partial[Config::kAccumulators];
  float total[Config::kAccumulators];
  for (int linear = schedule.first; linear < schedule.count; linear += schedule.step) {
    const WorkUnit unit = work_unit<Config>(params, linear, k_tiles);  // a whole tile but in rung 12's last wave
    const TileCoord tile = consumer_tile<Config>(schedule, params, unit.tile);  // the expert's, grouped
    const int row_top = tile.m * Config::kBlockM + consumer * kWarpgroupRows + 16 * warp_in_group + lane / 4;
    const int col0 = tile.n * Config::kBlockN;
#pragma unroll
    for (int i = 0; i < Config::kAccumulators; ++i) total[i] = 0.f;

    if constexpr (kFlaw == Fp8Flaw::no_promotion) {
      // The flaw: one sum over all of K in the tensor cores' accumulator, one K step in flight.
      int previous_stage = 0;
      for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
        ring.wait_full(state);
        fp8_wgmma_k_step<Config>(partial, smem_u32(ring.tile_a(state.stage)) + consumer * kWarpgroupRows * kTileRowBytes,
                                 smem_u32(ring.tile_b(state.stage)), k_tile > 0 ? 1u : 0u);
        sm90::wgmma_wait_group<1>();
        if (k_tile > 0) ring.release(previous_stage, lane);
        previous_stage = state.stage;
        state.advance();
      }
      sm90::wgmma_wait_group<0>();
      ring.release(previous_stage, lane);
      sm90::fence_accumulators(partial);
      promote<Config>(total, partial, load_step_scales<kScaling, kFlaw>(params, 0, row_top, col0), col0);
    } else {
      // A promotion window: kInterval K steps summed on the tensor cores, one step's WGMMAs in
      // flight while the consumer waits for the step before (as the flaw above, but for a window
      // only), then the wait for the last and the promotion. kInterval = 1: every step waited for
      // and promoted (rungs 01 and 02).
      constexpr int kInterval = kScaling == Fp8Scaling::per_tensor ? Config::kPromotionInterval : 1;
      const auto starts_window = [](int k_tile) {
        if constexpr (kFlaw == Fp8Flaw::window_not_restarted) return k_tile == 0;  // the flaw
        return k_tile % kInterval == 0;
      };
      int previous_stage = -1;  // a stage whose WGMMAs may still run, not yet released
      Fp8StepScales scales;
      if constexpr (!Config::kScalesInStage) scales = load_step_scales<kScaling, kFlaw>(params, 0, row_top, col0);
      for (int k_tile = unit.k_tile_begin; k_tile < unit.k_tile_end; ++k_tile) {
        ring.wait_full(state);
        // Rung 10: this step's scales from its stage, read before its WGMMAs are issued.
        Fp8StepScaleFactors stage_factors;
        if constexpr (Config::kScalesInStage)
          stage_factors = stage_scale_factors<Config>(fp8_stage_scales<Config>(smem_raw)[state.stage],
                                                      row_top - tile.m * Config::kBlockM);
        fp8_wgmma_k_step<Config>(partial, smem_u32(ring.tile_a(state.stage)) + consumer * kWarpgroupRows * kTileRowBytes,
                                 smem_u32(ring.tile_b(state.stage)), starts_window(k_tile) ? 0u : 1u);
        if (k_tile % kInterval != kInterval - 1 && k_tile + 1 < unit.k_tile_end) {
          // Inside the window: wait for the previous step only, and free its stage.
          sm90::wgmma_wait_group<1>();
          if (previous_stage >= 0) ring.release(previous_stage, lane);
          previous_stage = state.stage;
          state.advance();
          continue;
        }
        // The next step's scales load while this step's WGMMAs run (rungs 01-05).
        Fp8StepScales next = scales;
        if constexpr (!Config::kScalesInStage)
          if (k_tile + 1 < unit.k_tile_end) next = load_step_scales<kScaling, kFlaw>(params, k_tile + 1, row_top, col0);
        sm90::wgmma_wait_group<0>();
        sm90::fence_accumulators(partial);
        // Rung 10: B's scales passed on from lane 0; every lane has read the stage's scales before
        // lane 0's arrive frees it.
        if constexpr (Config::kScalesInStage) {
          scales = step_scales(broadcast_b_scales(stage_factors));
          __syncwarp();
        }
        if (previous_stage >= 0) ring.release(previous_stage, lane);
        previous_stage = -1;
        ring.release(state.stage, lane);
        state.advance();
        if constexpr (Config::kBlockScaleWalk == Fp8BlockScaleWalk::wide_scales_in_stage) {
          // Rung 10: the tile's split between B's blocks as a constant in each of two copies.
          if (col0 % kFp8ScaleBlock == 0)
            promote<Config, kFp8ScaleBlock / 8>(total, partial, scales, col0);
          else
            promote<Config, kFp8ScaleBlock / 16>(total, partial, scales, col0);
        } else {
          promote<Config>(total, partial, scales, col0);
        }
        if constexpr (!Config::kScalesInStage) scales = next;  // rung 10 reads each step's from its stage
      }
    }
    // Rung 12: a piece of a split tile; only the consumer half that adds the pieces stores. Whether
    // this half is the last comes from its named barrier (BAR.RED.OR), the same for all its threads,
    // which the compiler cannot tell: the warp vote says so. Without it the branch counts as
    // divergent and the walk's stage and descriptor arithmetic leaves the uniform datapath (the K
    // loop's SASS: no U* instructions, twice the R2UR of rung 10's, even for whole tiles).
    if constexpr (Config::kSplitLastWave)
      if (unit.split >= 0) {
        const bool stores =
            add_pieces_in_last<Config, kFlaw == Fp8Flaw::split_piece_added_twice>(params, unit, consumer, total);
        if (!__all_sync(0xffffffffu, stores)) continue;
      }
    if constexpr (Config::kGrouped)
      store_fp8_expert_tile_results<Config>(params, total, smem_raw, consumer, unit.tile, row_top - lane / 4, col0);
    else
      store_fp8_tile_results<Config>(params, total, smem_raw, consumer, tile, row_top - lane / 4, col0,
                                     per_tensor_scale);
  }
  if constexpr (Config::kStoresThroughSmem)
    if (params.use_tma_store && threadIdx.x % kWarpgroupThreads == 0) sm90::tma_store_wait_all();
}

#else  // not the sm_90a device pass: an empty kernel the launch code never runs

template <class Config, Fp8Scaling kScaling, Fp8Flaw kFlaw>
__global__ void __launch_bounds__(Config::kThreads, 1) fp8_gemm_kernel(const __grid_constant__ Fp8GemmParams) {}

#endif  // KC_STAGE3_SM90A

// Rung 09: s_A [K/128, row_length] as K/128 rows of 2 row_length two-byte elements (TMA's tensor
// maps here are of two-byte elements), in boxes of one row x 256: one tile's 128 scales of one K
// block. row_length: M for the FP8 GEMM, the padded stride for the grouped one.
inline TmaMatrix2d fp8_scale_a_rows_map(const float* scale_a, int k, int row_length) {
  TmaMatrix2d map;
  map.base = scale_a;
  map.rows = static_cast<std::uint64_t>(fp8_k_blocks(k));
  map.cols = 2 * static_cast<std::uint64_t>(row_length);
  map.box_rows = 1;
  map.box_cols = 2 * kFp8ScaleBlock;
  map.swizzle_128b = false;
  return map;
}
inline TmaMatrix2d fp8_scale_a_rows_map(const Fp8GemmArgs& args) {
  return fp8_scale_a_rows_map(args.scale_a, args.k, args.m);
}

// Whether TMA can read s_A's rows (rung 09): each must start 16-byte aligned, so s_A itself must and
// M % 4 == 0 (a row is M floats). Rung 09 runs rung 07 where not.
inline bool fp8_scale_a_rows_take_tma(const Fp8GemmArgs& args) {
  return fp8_scale_a_rows_fit_tma(args.m) && reinterpret_cast<std::uintptr_t>(args.scale_a) % 16 == 0;
}

// Rung 12 (Config::kSplitLastWave) also takes the workspace of its split (the grouped GEMM's kind:
// grouped_split_workspace_vectors / _counters for the GPU's SMs are enough, an FP8 piece's slot being
// smaller than a grouped one's).
template <class Config, Fp8Scaling kScaling, Fp8Flaw kFlaw>
void launch_fp8_gemm(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache,
                     const GroupedSplitWorkspace* workspace = nullptr) {
  check_fp8_gemm_args(args);
  const void* kernel = reinterpret_cast<const void*>(&fp8_gemm_kernel<Config, kScaling, kFlaw>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);

  Fp8GemmParams params{};
  params.a = cache.tensor_map(byte_operand_tile_map(args.a, args.m, args.k, Config::kBlockM));
  params.b = cache.tensor_map(byte_operand_tile_map(args.b, args.n, args.k, Config::kBSliceRows));
  params.c_pointer = args.c;
  params.use_tma_store = Config::kStoresThroughSmem && args.n % 8 == 0;  // TMA needs 16-byte row strides
  if (params.use_tma_store) params.c = cache.tensor_map(tma_store_map(args.c, args.m, args.n, Config::kStoreBox));
  params.scale_a = args.scale_a;
  params.scale_b = args.scale_b;
  if constexpr (Config::kScalesInStage) params.scale_a_rows = cache.tensor_map(fp8_scale_a_rows_map(args));
  params.m = args.m;
  params.n = args.n;
  params.k = args.k;
  params.k_blocks = fp8_k_blocks(args.k);
  params.n_blocks = fp8_n_blocks(args.n);
  params.tiles_m = ceil_div(args.m, Config::kBlockM);
  params.tiles_n = ceil_div(args.n, Config::kBlockN);
  params.cluster_tiles_m = ceil_div(params.tiles_m, Config::kClusterM);
  int clusters = schedule_clusters<Config>(params, Schedule::persistent, Config::kRasterBandTileRows, cache, kernel);
  if constexpr (Config::kSplitLastWave) {
    // Whole tiles in whole waves, then the last wave's tiles in K pieces (plan_grouped_split_last_wave:
    // only where that wave would leave half the grid or more idle, at least 16 K steps a piece).
    const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes, 1);
    clusters = plan_split_last_wave<Config>(params, params.tiles_m * params.tiles_n, resident, params.k_blocks,
                                            workspace, "FP8 GEMM", "rung 12");
  }
  launch_clusters<Config>(fp8_gemm_kernel<Config, kScaling, kFlaw>, clusters, stream, params);
}

// The FP8 grouped rungs' two configurations, one definition each for every rung that launches them:
// FP8 rung 09's on 128 x 128 tiles (grouped rung 01) and rung 10's on 128 x 192 tiles (grouped rung
// 02), both walking the tile table; grouped rung 03 runs one or the other.
using Fp8GroupedNarrowTiles = Fp8GemmConfig<kFp8GroupedTileCols, /*promotion interval*/ 4, /*store pass columns*/ 64,
                                            /*stages*/ 6, Fp8BlockScaleWalk::scales_in_stage, /*cluster*/ 1,
                                            /*split last wave*/ false, /*grouped*/ true>;
using Fp8GroupedWideTiles = Fp8GemmConfig<kFp8GroupedWideTileCols, /*promotion interval*/ 4, /*store pass columns*/ 192,
                                          /*stages*/ 4, Fp8BlockScaleWalk::wide_scales_in_stage, /*cluster*/ 1,
                                          /*split last wave*/ false, /*grouped*/ true>;

// The FP8 grouped GEMM's launch (Config::kGrouped, block scales; fp8_grouped_gemm_args.hpp): A is
// every token, B the G weights as one G.N x K matrix, s_A's rows of the padded stride, C's tensor map
// over every token (TMA stores where rows of C are 16-byte multiples, N % 8 == 0; otherwise every
// tile stores directly); one persistent CTA per SM at most, walking the tile table.
template <class Config, Fp8Flaw kFlaw>
void launch_fp8_grouped_gemm(const Fp8GroupedGemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  static_assert(Config::kGrouped, "a grouped configuration");
  check_fp8_grouped_gemm_args(args);
  // The tile table of the configuration's width (rung 01's 128 columns or rung 02's 192).
  constexpr bool kWide = Config::kBlockN == kFp8GroupedWideTileCols;
  const int tiles = kWide ? args.wide_tiles : args.tiles;
  if (tiles == 0) return;  // no expert has rows
  const void* kernel = reinterpret_cast<const void*>(&fp8_gemm_kernel<Config, Fp8Scaling::block, kFlaw>);
  cache.prepare_kernel(kernel, Config::kSmemBytes);

  Fp8GemmParams params{};
  params.a = cache.tensor_map(byte_operand_tile_map(args.a, args.tokens, args.k, Config::kBlockM));
  params.b = cache.tensor_map(byte_operand_tile_map(args.b, args.groups * args.n, args.k, Config::kBSliceRows));
  params.c_pointer = args.c;
  params.use_tma_store = args.n % 8 == 0;  // TMA needs 16-byte row strides
  if (params.use_tma_store) params.c = cache.tensor_map(tma_store_map(args.c, args.tokens, args.n, Config::kStoreBox));
  params.scale_a = args.scale_a;
  params.scale_b = args.scale_b;
  params.scale_a_rows =
      cache.tensor_map(fp8_scale_a_rows_map(args.scale_a, args.k,
                                            static_cast<int>(fp8_grouped_scale_a_stride(args.tokens))));
  params.m = args.tokens;
  params.n = args.n;
  params.k = args.k;
  params.k_blocks = fp8_k_blocks(args.k);
  params.n_blocks = fp8_n_blocks(args.n);
  params.tiles_m = tiles;
  params.tiles_n = 1;
  params.cluster_tiles_m = tiles;
  params.raster_band = 1;
  params.row_starts = args.row_starts;
  params.tile_starts = kWide ? args.wide_tile_starts : args.tile_starts;
  params.groups = args.groups;
  params.tiles = tiles;
  const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes, 1);
  launch_clusters<Config>(fp8_gemm_kernel<Config, Fp8Scaling::block, kFlaw>, std::min(tiles, resident), stream,
                          params);
}

// How many waves the tiles of `Config` take on the CTAs of its kernel that fit the GPU at once (rungs
// 05 and 11 weigh two tile widths by it).
template <class Config, Fp8Scaling kScaling>
int fp8_persistent_waves(const Fp8GemmArgs& args, HopperLaunchCache& cache) {
  const void* kernel = reinterpret_cast<const void*>(&fp8_gemm_kernel<Config, kScaling, Fp8Flaw::none>);
  const int resident = cache.resident_blocks(kernel, Config::kThreads, Config::kSmemBytes, 1);  // prepares it
  const long long tiles =
      static_cast<long long>(ceil_div(args.m, Config::kBlockM)) * ceil_div(args.n, Config::kBlockN);
  return static_cast<int>((tiles + resident - 1) / resident);
}

// Rung 11's choice, which rung 12 makes too: whether rung 09's 128 x 128 tiles (true) or rung 10's
// 128 x 192 ones take the shorter estimated time, by the persistent waves each width's tiles take
// (11_scales_in_stage_per_shape.cu). Block scales that TMA brings into the stage; checks the arguments.
bool fp8_scales_in_stage_narrow_tiles_win(const Fp8GemmArgs& args, HopperLaunchCache& cache);

// The scaling is a run-time choice of the caller; each is its own kernel.
template <class Config, Fp8Flaw kFlaw>
void launch_fp8_gemm_scaled(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling == Fp8Scaling::block)
    launch_fp8_gemm<Config, Fp8Scaling::block, kFlaw>(args, stream, cache);
  else
    launch_fp8_gemm<Config, Fp8Scaling::per_tensor, kFlaw>(args, stream, cache);
}

}  // namespace kc::stage3
