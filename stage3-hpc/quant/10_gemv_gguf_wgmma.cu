// Rung 10 of the GGUF GEMV — a batch of rows (M up to 64) on WGMMA: the decoded weights are the
// A operand from registers, x the B operand from shared memory, and the products run
// asynchronously while the warps decode the next block.
//
// Idea: rung 09 is a serial chain in every warp — decode a block, two mma.sync a token tile, the
// FFMAs that wait for them — with one or two warps a scheduler to hide it (its profile, in the
// stage-3 README: the issue slots mostly empty, the memory idle). Hopper's WGMMA can take its A operand from
// registers, in mma.sync's A layout for each warp's 16 rows: exactly what layout=3 already gives a
// warp after the decode. So a warpgroup (4 warps, 64 output columns) multiplies a block of its
// weights with all M <= 64 rows of x in two instructions (m64nNk16, N = 8 x token tiles), which
// run on the tensor cores while the warps decode the next block; up to 6 token tiles the scales are
// applied one block behind (the FFMAs of block j - 1 under the products of block j, two
// accumulator sets in turn), from 7 right after each block's products (kProductsOverlap).
// What changed from rung 09:
//   - products: two wgmma.mma_async (m64nNk16, A from registers) a block for every token tile at
//     once, instead of two mma.sync a token tile; a CTA of two warpgroups owns the 128 columns,
//     each warp one tile of 16 (no token groups: N grows with M instead);
//   - x in shared memory as WGMMA's B operand: rows of 128 bytes with the 128-byte swizzle (the
//     layout the ladder's TMA writes, so the ladder's descriptor reads it), and layout=3's k order:
//     the pair of k a lane's weights put at a fragment position is not the pair WGMMA's k order puts
//     there, so each 4-byte pair of x is copied (cp.async of 4 bytes) to the place that matches —
//     the weights stay as the file's repack left them, for every rung of the op;
//   - q4_1's block sums of x from ldmatrix and one mma.sync against ones a token tile (x is in
//     ldmatrix's 8x8 layout already);
//   - a fence.proxy.async after each stage lands: cp.async writes through the generic proxy, WGMMA
//     reads through the async one;
//   - every copy's place and source worked out once (CopyPlan), and plain copies wherever all
//     bytes are there: ptxas pads a zero-fill copy (src-size in a register) with instructions that
//     never run but take issue slots.
// Unchanged: layout=3, the split-K plan and workspace (plan_gguf_batch: 128-column blocks, splits
// of 128-k chunks, the last CTA of a column block adds the partials: gemm/split_k_last_cta.cuh),
// the 4-stage cp.async ring, the exact decode (q - 8, q or the byte in bf16) and the scales
// applied in FP32 once a block.
//
// FLOPs 2MNK, bytes the blocks' plus x and y, as rung 09. Per block a warpgroup issues two WGMMA
// of 64 x N x 16 (2 x 64 x N x 16 x 2 FLOPs) and each warp about 20 instructions of decode and
// N / 2 FFMA; at N = 64 the tensor cores need ~60 cycles an SM for a warpgroup's block and the
// issue slots about as many (analysis).
//
// Expected limiter: DRAM for M <= 32 if the ring keeps enough bytes in flight; at 64 rows the
// tensor pipe and the issue slots about level.
//
// SASS to look for: HGMMA.64xNx16.F32.BF16 with its A from registers (R operands, no "gdesc" for A),
// WARPGROUP.ARRIVE / WARPGROUP.DEPBAR, LDGSTS.E.BYPASS.128 (quants, scales) and LDGSTS.E (the 4-byte
// pairs of x), FENCE.VIEW.ASYNC.S, one FFMA an output and block; no LDL/STL.
//
// Refuses: M > 64, the other layouts; Hopper only (sm_90a code): kc::Error elsewhere.
//
// Run just this rung:
//   kc-bench --filter stage3/gemv_gguf/10_wgmma --shapes 64x4096x4096 --param layout=3
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/wgmma.cuh"
#include "arch/sm90/wgmma_narrow.cuh"
#include "arch/util.hpp"
#include "gemm/split_k_last_cta.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kTiles = kGgufBatchColumns / 16;  // 8 tiles of 16 columns a CTA, one a warp
constexpr int kThreads = 32 * kTiles;           // two warpgroups
constexpr int kStages = 4;

constexpr int round_up(int value, int step) { return (value + step - 1) / step * step; }

// A stage's bytes (Stage below) and the ring's, for the launch.
template <GgufBlockType kType, int kTokenTiles>
constexpr int stage_bytes() {
  using Bytes = gguf_mma::ChunkBytes<kType>;
  return round_up(round_up(kTiles * (Bytes::kQuants + Bytes::kScales), 1024) + 2 * 8 * kTokenTiles * 128, 1024);
}
template <GgufBlockType kType, int kTokenTiles>
constexpr int kSmemBytes = kStages * stage_bytes<kType, kTokenTiles>() + 1024;  // + slack to align to 1024

// The device code exists in the sm_90a pass only (WGMMA); elsewhere the kernel is empty.
#if KC_STAGE3_SM90A

constexpr int kChunkK = 4 * kGgufBlockWeights;  // 128 k a chunk
constexpr int kXPairs = kChunkK / 2;            // 4-byte pairs of one row of x a chunk
// As in rung 09, the last CTA adds the split-K partials one fragment at a time: all of a thread's
// (up to 8) at once would spill where two CTAs an SM leave 128 registers a thread (q4_0 at 41-48
// rows).
constexpr int kFragmentsAtOnce = 1;

// One stage: the 8 tiles' quants ([tile][vector v][lane] 16 bytes each), their scale entries
// ([tile][row group][vector]), then x: two swizzle atoms (k 0-63 and 64-127 of the chunk in WGMMA's
// k order, below), each kRows rows of 128 bytes, 1024-byte aligned as the 128-byte swizzle wants.
template <GgufBlockType kType, int kTokenTiles>
struct Stage {
  using Bytes = gguf_mma::ChunkBytes<kType>;
  static constexpr int kQuantVectors = Bytes::kQuantVectors;
  static constexpr int kScaleVectors = Bytes::kScaleVectors;
  static constexpr int kQuants = kTiles * Bytes::kQuants;
  static constexpr int kScales = kTiles * Bytes::kScales;
  static constexpr int kRows = 8 * kTokenTiles;  // N of the WGMMA
  static constexpr int kXAtom = kRows * 128;
  static constexpr int kX = round_up(kQuants + kScales, 1024);  // offset of x in the stage
  static constexpr int kBytes = stage_bytes<kType, kTokenTiles>();
  static_assert(kBytes == round_up(kX + 2 * kXAtom, 1024), "stage_bytes counts what Stage lays out");
  static constexpr int kQuantPieces = kQuants / 16, kScalePieces = kScales / 16;
  static constexpr int kXCopies = kRows * kXPairs;  // 4-byte copies of x a chunk
};

// Where x's pair of values k 2 pair, 2 pair + 1 of a chunk (pair < 64) goes in WGMMA's k order.
// Layout=3 gives lane (g, t) of the first k16 product of block j the weights k 8t, 8t + 1
// (fragment k 2t, 2t + 1) and 8t + 2, 8t + 3 (fragment k 2t + 8, + 9), of the second product
// 8t + 4 .. 8t + 7 the same way, and WGMMA reads B in fragment order. So with r = pair % 16,
// t = r / 4, p = r / 2 % 2 (the product) and h = r % 2 (the fragment's half), the pair's position
// among the chunk's 128 is 32 j + 16 p + 8 h + 2 t.
__device__ __forceinline__ int x_position(int pair) {
  const int j = pair / 16, r = pair % 16;
  return 32 * j + 16 * (r / 2 % 2) + 8 * (r % 2) + 2 * (r / 4);
}

// The byte offset in a stage of x's row `row` at WGMMA k position `position` (0..127): 64
// positions make a 128-byte row of a swizzle atom, whose 16-byte pieces sit at piece ^ (row % 8).
template <GgufBlockType kType, int kTokenTiles>
__device__ __forceinline__ int x_offset(int row, int position) {
  using S = Stage<kType, kTokenTiles>;
  return S::kX + (position / 64) * S::kXAtom + row * 128 + ((((position % 64) / 8) ^ (row % 8)) << 4) +
         (position % 8) * 2;
}

// A thread's share of every chunk's copies, worked out once so that a copy costs the loop little
// more than its LDGSTS: the places in a stage are registers plus constants, a source pointer moves
// by a fixed step. Quants and scale entries in 16-byte pieces (tiles past the weight's are zeros);
// x in 4-byte pairs to their WGMMA places: thread i copies pair i % 64 of rows i / 64 + 4 pass
// (one row's 256 bytes read by 64 neighbouring threads). Rows of x past M are never copied: they
// are zeroed once in every stage (zero_rows_past_m), and the passes that would reach them are
// skipped (a whole warp's rows are past M together). Pairs past K (the last chunk's padding
// blocks) are written as zeros (src-size 0).
template <GgufBlockType kType, int kTokenTiles>
struct CopyPlan {
  using S = Stage<kType, kTokenTiles>;
  static constexpr int kQuantPasses = S::kQuantPieces / kThreads;
  static_assert(S::kQuantPieces % kThreads == 0 && S::kScalePieces <= kThreads, "one pass pattern a stage");
  static constexpr int kTilesAPass = kThreads / (32 * S::kQuantVectors);  // a quant pass moves this many tiles on
  static constexpr int kXPasses = S::kXCopies / kThreads;
  static_assert(S::kXCopies % kThreads == 0, "every thread copies the same number of pairs of x");
  static constexpr int kRowsAPass = kThreads / kXPairs;
  const uint4* quants;        // pass 0 at chunk 0; pass p is `quant_pass_step` vectors on
  std::size_t quant_pass_step;
  unsigned quant_valid;       // bit p: pass p's tile is inside the weight
  std::uint32_t quant_at;     // pass 0's place in a stage; pass p is p x kThreads x 16 bytes on
  const uint4* scales;        // null: no scale piece for this thread, or its tile is past the weight
  std::uint32_t scale_at;
  bool copies_scales;
  const __nv_bfloat16* x_row0;  // pair x_pair of row x_row0_index at chunk 0; pass p is 4 p rows on
  std::size_t x_pass_step;      // 4 rows of x, in elements
  int x_pair, x_row0_index;
  bool x_every_pass;            // every pass's row is below M
  std::uint32_t x_at[2];        // the pair's place in row x_row0_index (even passes) and + 4 (odd)

  __device__ __forceinline__ CopyPlan(const GgufGemvArgs& a, int first_tile, int chunks) {
    const int tiles = (a.n + 15) / 16;
    const int thread = static_cast<int>(threadIdx.x);
    {
      const int tile = thread / (32 * S::kQuantVectors), within = thread % (32 * S::kQuantVectors);
      const int lane = within / S::kQuantVectors, v = within % S::kQuantVectors;
      quants = reinterpret_cast<const uint4*>(a.quants) +
               static_cast<std::size_t>(first_tile + tile) * chunks * 32 * S::kQuantVectors + within;
      quant_pass_step = static_cast<std::size_t>(kTilesAPass) * chunks * 32 * S::kQuantVectors;
      quant_valid = 0;
#pragma unroll
      for (int pass = 0; pass < kQuantPasses; ++pass)
        if (first_tile + tile + pass * kTilesAPass < tiles) quant_valid |= 1u << pass;
      quant_at = static_cast<std::uint32_t>(((tile * S::kQuantVectors + v) * 32 + lane) * 16);
    }
    {
      const int tile = thread / (8 * S::kScaleVectors), within = thread % (8 * S::kScaleVectors);
      copies_scales = thread < S::kScalePieces;
      scales = copies_scales && first_tile + tile < tiles
                   ? static_cast<const uint4*>(a.scales) +
                         static_cast<std::size_t>(first_tile + tile) * chunks * 8 * S::kScaleVectors + within
                   : nullptr;
      scale_at = static_cast<std::uint32_t>(S::kQuants + thread * 16);
    }
    x_pair = thread % kXPairs;
    x_row0_index = thread / kXPairs;
    x_row0 = a.x + static_cast<std::size_t>(x_row0_index) * a.k + 2 * x_pair;
    x_pass_step = static_cast<std::size_t>(kRowsAPass) * a.k;
    x_every_pass = x_row0_index + (kXPasses - 1) * kRowsAPass < a.m;
    const int position = x_position(x_pair);
    x_at[0] = static_cast<std::uint32_t>(x_offset<kType, kTokenTiles>(x_row0_index, position));
    x_at[1] = static_cast<std::uint32_t>(x_offset<kType, kTokenTiles>(x_row0_index + kRowsAPass, position));
  }

  // Zeros rows M .. kRows - 1 of x in every stage, once before the first copy (no copy writes them).
  __device__ __forceinline__ void zero_rows_past_m(const GgufGemvArgs& a, std::uint8_t* ring) const {
    for (int i = static_cast<int>(threadIdx.x); i < kStages * (S::kRows - a.m) * 16; i += kThreads) {
      const int stage = i / ((S::kRows - a.m) * 16), rest = i % ((S::kRows - a.m) * 16);
      const int row = a.m + rest / 16, piece = rest % 16;  // 16 pieces of 16 bytes a row: both atoms
      *reinterpret_cast<uint4*>(ring + stage * S::kBytes + S::kX + (piece / 8) * S::kXAtom + row * 128 +
                                (piece % 8) * 16) = make_uint4(0u, 0u, 0u, 0u);
    }
  }

  __device__ __forceinline__ void copy(const GgufGemvArgs& a, int chunk, std::uint32_t stage) const {
    // Zero-fill copies (src-size 0 past the weight or K) cost ptxas's padding around each one, so
    // every copy whose bytes are all there is a plain one.
    const uint4* chunk_quants = quants + static_cast<std::size_t>(chunk) * 32 * S::kQuantVectors;
    if (quant_valid == (1u << kQuantPasses) - 1) {
#pragma unroll
      for (int pass = 0; pass < kQuantPasses; ++pass)
        sm80::cp_async_16(stage + quant_at + pass * kThreads * 16, chunk_quants + pass * quant_pass_step);
    } else {
#pragma unroll
      for (int pass = 0; pass < kQuantPasses; ++pass) {
        const bool valid = (quant_valid >> pass) & 1u;
        sm80::cp_async_16(stage + quant_at + pass * kThreads * 16,
                          valid ? static_cast<const void*>(chunk_quants + pass * quant_pass_step) : a.quants, valid);
      }
    }
    if (scales != nullptr)
      sm80::cp_async_16(stage + scale_at, scales + static_cast<std::size_t>(chunk) * 8 * S::kScaleVectors);
    else if (copies_scales)
      sm80::cp_async_16(stage + scale_at, a.scales, false);
    const auto x_place = [&](int pass) {
      return stage + x_at[pass % 2] + static_cast<std::uint32_t>((pass / 2) * 2 * kRowsAPass * 128);
    };
    if (x_every_pass && (chunk + 1) * kChunkK <= a.k) {
      // Every chunk but a last one past K when M fills the token tiles: plain copies, no tests.
      const __nv_bfloat16* source = x_row0 + chunk * kChunkK;
#pragma unroll
      for (int pass = 0; pass < kXPasses; ++pass) sm80::cp_async_4(x_place(pass), source + pass * x_pass_step);
      return;
    }
    // Pairs past K: src-size 0 from x's first rows (an address inside x for every pass below M).
    const bool k_valid = chunk * kChunkK + 2 * x_pair < a.k;
    const __nv_bfloat16* source = k_valid ? x_row0 + chunk * kChunkK : a.x;
#pragma unroll
    for (int pass = 0; pass < kXPasses; ++pass) {
      if (x_row0_index + pass * kRowsAPass >= a.m) break;  // this and later passes: rows past M
      sm80::cp_async_4(x_place(pass), source + pass * x_pass_step, k_valid);
    }
  }
};

// The WGMMA descriptor of product q (0..7: block q / 2, its k16 half q % 2) of a stage's x: WGMMA
// k positions 16q .. 16q + 15, 32 bytes into a 128-byte swizzled row (the hardware applies the XOR).
template <GgufBlockType kType, int kTokenTiles>
__device__ __forceinline__ std::uint64_t x_descriptor(std::uint32_t stage, int q) {
  return sm90::smem_descriptor_sw128(stage + static_cast<std::uint32_t>(x_offset<kType, kTokenTiles>(0, 16 * q)));
}

// q4_1: the sums of x over block j for rows 8s + 2t and 8s + 2t + 1 of token tile s — one
// ldmatrix.x4 (the block's 32 k of 8 rows, in 8x8 layout already) and two mma.sync against ones.
template <GgufBlockType kType, int kTokenTiles>
__device__ __forceinline__ float2 block_sums_of_x(std::uint32_t stage, int j, int s, int lane) {
  const std::uint32_t ones[4] = {gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair,
                                 gguf_mma::kBf16OnePair};
  const float zero[4] = {0.f, 0.f, 0.f, 0.f};
  const int position = 32 * j + 8 * (lane / 8);  // matrix lane / 8: WGMMA k 8 (lane / 8) .. + 7 of block j
  std::uint32_t b[4];
  sm80::ldmatrix_x4(b, stage + static_cast<std::uint32_t>(x_offset<kType, kTokenTiles>(8 * s + lane % 8, position)));
  float half[4], sum[4];
  sm80::mma_m16n8k16_bf16_into(half, ones, b[0], b[1], zero);
  sm80::mma_m16n8k16_bf16_into(sum, ones, b[2], b[3], half);
  return make_float2(sum[0], sum[1]);
}

// Block j's product (c, the accumulator layout of m64nN) into acc with the scales of rows g and
// g + 8: acc[4s + 0..1] (row g, x rows 8s + 2t, + 1) += d_low c, acc[4s + 2..3] += d_high c; q4_1
// adds m times the block's sums of x, formed here (from the stage, still in place) so that they
// hold registers only for a moment.
template <GgufBlockType kType, int kTokenTiles>
__device__ __forceinline__ void apply_scales(const float (&c)[4 * kTokenTiles], float2 low, float2 high,
                                             std::uint32_t stage, int j, int lane, float (&acc)[4 * kTokenTiles]) {
#pragma unroll
  for (int s = 0; s < kTokenTiles; ++s) {
    if constexpr (kType == GgufBlockType::q4_1) {
      const float2 sums = block_sums_of_x<kType, kTokenTiles>(stage, j, s, lane);
      acc[4 * s + 0] = fmaf(low.x, c[4 * s + 0], fmaf(low.y, sums.x, acc[4 * s + 0]));
      acc[4 * s + 1] = fmaf(low.x, c[4 * s + 1], fmaf(low.y, sums.y, acc[4 * s + 1]));
      acc[4 * s + 2] = fmaf(high.x, c[4 * s + 2], fmaf(high.y, sums.x, acc[4 * s + 2]));
      acc[4 * s + 3] = fmaf(high.x, c[4 * s + 3], fmaf(high.y, sums.y, acc[4 * s + 3]));
    } else {
      (void)stage, (void)j, (void)lane;
      acc[4 * s + 0] = fmaf(low.x, c[4 * s + 0], acc[4 * s + 0]);
      acc[4 * s + 1] = fmaf(low.x, c[4 * s + 1], acc[4 * s + 1]);
      acc[4 * s + 2] = fmaf(high.x, c[4 * s + 2], acc[4 * s + 2]);
      acc[4 * s + 3] = fmaf(high.x, c[4 * s + 3], acc[4 * s + 3]);
    }
  }
}

// Whether a block's products stay in flight while the warps decode the next block (two sets of c
// in turn): up to 6 token tiles. From 7 the second set would push the instance past 128
// registers a thread, and two CTAs an SM (16 warps to issue from) are worth more than the overlap
// inside one warp; there each block's products are waited for before the next block's decode.
template <GgufBlockType kType, int kTokenTiles>
constexpr bool kProductsOverlap = kTokenTiles < 7;

// One chunk of the warp's tile (`warp` 0..7: tile `warp` of the CTA, rows 16 (warp % 4) of its
// warpgroup's 64) against every token tile. Block j's two WGMMAs go into c[j % 2]; the scales of
// block j - 1 are applied once the wait leaves only block j's in flight.
template <GgufBlockType kType, int kTokenTiles, bool kSwapped>
__device__ __forceinline__ void multiply_chunk(const std::uint8_t* stage, int warp, int lane,
                                               float (&acc)[4 * kTokenTiles]) {
  using S = Stage<kType, kTokenTiles>;
  constexpr bool kOverlap = kProductsOverlap<kType, kTokenTiles>;
  constexpr int kWords = kType == GgufBlockType::q8_0 ? 4 : 2;  // a lane's words of a block (rows g, g + 8)
  constexpr int kEntries = kType == GgufBlockType::q4_1 ? 2 : 1;
  const int g = lane >> 2;
  const std::uint32_t stage_address = smem_u32(stage);
  float c[2][4 * kTokenTiles];
  std::uint32_t first[2][4], second[2][4];
  float2 low[2] = {}, high[2] = {};
  // Block `block`'s products are done: its scales into acc.
  const auto finish = [&](int set, int block) {
    sm90::fence_accumulators(c[set]);
    sm90::fence_operands(first[set]);
    sm90::fence_operands(second[set]);
    apply_scales<kType, kTokenTiles>(c[set], low[set], high[set], stage_address, block, lane, acc);
  };
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int b = kOverlap ? j % 2 : 0;
    const int byte = kWords * 4 * j;
    const std::uint8_t* quants = stage + ((warp * S::kQuantVectors + byte / 16) * 32 + lane) * 16 + byte % 16;
    const std::uint8_t* entries = stage + S::kQuants + (warp * 8 + g) * S::kScaleVectors * 16 + kEntries * 4 * j;
    std::uint32_t words[kWords], entry_words[kEntries];
    if constexpr (kWords == 4) {
      const uint4 q = *reinterpret_cast<const uint4*>(quants);
      words[0] = q.x; words[1] = q.y; words[2] = q.z; words[3] = q.w;
    } else {
      const uint2 q = *reinterpret_cast<const uint2*>(quants);
      words[0] = q.x; words[1] = q.y;
    }
    if constexpr (kEntries == 2) {
      const uint2 e = *reinterpret_cast<const uint2*>(entries);
      entry_words[0] = e.x; entry_words[1] = e.y;
    } else {
      entry_words[0] = *reinterpret_cast<const std::uint32_t*>(entries);
    }
    gguf_mma::weights_as_a_fragments<kType, kSwapped>(words, 0, first[b], second[b]);
    gguf_mma::center_weights<kType>(first[b]);
    gguf_mma::center_weights<kType>(second[b]);
    gguf_mma::block_scales<kType>(entry_words, 0, low[b], high[b]);
    sm90::wgmma_fence();  // the fragments and c[b] (read by the FFMAs of block j - 2) before the products
    sm90::wgmma_m64nNk16_rs_bf16<8 * kTokenTiles>(c[b], first[b], x_descriptor<kType, kTokenTiles>(stage_address, 2 * j),
                                                  0);
    sm90::wgmma_m64nNk16_rs_bf16<8 * kTokenTiles>(c[b], second[b],
                                                  x_descriptor<kType, kTokenTiles>(stage_address, 2 * j + 1), 1);
    sm90::wgmma_commit_group();
    if constexpr (kOverlap) {
      if (j > 0) {
        sm90::wgmma_wait_group<1>();  // block j - 1's products are done (block j's may still run)
        finish(1 - b, j - 1);
      }
    } else {
      sm90::wgmma_wait_group<0>();
      finish(b, j);
    }
  }
  if constexpr (kOverlap) {
    sm90::wgmma_wait_group<0>();
    finish(1, 3);
  }
}

__device__ __forceinline__ void store_output(const GgufGemvArgs& a, int m, int n, float sum) {
  if (m < a.m && n < a.n) a.y[static_cast<std::size_t>(m) * a.n + n] = __float2bfloat16_rn(sum);
}

__device__ __forceinline__ void store_fragment(const GgufGemvArgs& a, int n0, int m0, float4 sum) {
  store_output(a, m0, n0, sum.x);
  store_output(a, m0 + 1, n0, sum.y);
  store_output(a, m0, n0 + 8, sum.z);
  store_output(a, m0 + 1, n0 + 8, sum.w);
}

#endif  // KC_STAGE3_SM90A

// Two CTAs an SM where 128 registers a thread hold the instance without spills (ptxas -v): every
// instance but q4_1's from 4 token tiles (its block sums take more), which keep one.
template <GgufBlockType kType, int kTokenTiles>
constexpr int kMinCtasPerSm = kType == GgufBlockType::q4_1 && kTokenTiles >= 4 ? 1 : 2;

template <GgufBlockType kType, int kTokenTiles, bool kSwapped>
__global__ void __launch_bounds__(kThreads, (kMinCtasPerSm<kType, kTokenTiles>))
    gemv_wgmma_kernel(GgufGemvArgs a, GgufBatchPlan plan, GgufBatchWorkspace workspace) {
#if KC_STAGE3_SM90A
  using S = Stage<kType, kTokenTiles>;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const auto stage_at = [&](int stage) { return smem + stage * S::kBytes; };

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int column_block = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int chunk_begin = plan.chunk_begin(split);
  const int steps = plan.chunk_begin(split + 1) - chunk_begin;
  const CopyPlan<kType, kTokenTiles> copies(a, column_block * kTiles, plan.chunks);
  copies.zero_rows_past_m(a, smem);  // ordered before the first WGMMA by the first barrier and fence

#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < steps) copies.copy(a, chunk_begin + stage, smem_u32(stage_at(stage)));
    sm80::cp_async_commit_group();
  }

  float acc[4 * kTokenTiles] = {};
#pragma unroll 1
  for (int i = 0; i < steps; ++i) {
    sm80::cp_async_wait_group<kStages - 2>();  // this thread's copies of chunk i have landed
    sm90::fence_proxy_async_shared();          // and are visible to the WGMMAs (the async proxy)
    __syncthreads();  // everyone's have; every warp is done with chunk i - 1, whose stage is refilled next
    const int next = i + kStages - 1;
    if (next < steps) copies.copy(a, chunk_begin + next, smem_u32(stage_at(next % kStages)));
    sm80::cp_async_commit_group();
    multiply_chunk<kType, kTokenTiles, kSwapped>(stage_at(i % kStages), warp, lane, acc);
  }

  // Fragment s: output columns n0 = 128 block + 16 warp + g (and + 8), rows of x m0 = 8s + 2t (+ 1).
  const int warp_n0 = column_block * kGgufBatchColumns + warp * 16 + g;
  split_k::ThreadFragments<kTokenTiles> mine;
#pragma unroll
  for (int s = 0; s < kTokenTiles; ++s)
    mine.value[s] = make_float4(acc[4 * s], acc[4 * s + 1], acc[4 * s + 2], acc[4 * s + 3]);
  const auto store = [&](int s, float4 sum) { store_fragment(a, warp_n0, 8 * s + 2 * t, sum); };
  if (!plan.needs_workspace()) {
#pragma unroll
    for (int s = 0; s < kTokenTiles; ++s) store(s, mine.value[s]);
    return;
  }

  // Rung 09's split-K reduction (split_k_last_cta.cuh): the partial tile in fragment order, a slot
  // per CTA; the last CTA of the column block to arrive adds the slots in split order, one fragment
  // at a time, stores y, resets the counter.
  constexpr int kSlotVectors = kThreads * kTokenTiles;  // float4s per slot
  float4* const block_slots = reinterpret_cast<float4*>(workspace.partials) +
                              static_cast<std::size_t>(column_block) * plan.splits * kSlotVectors;
  split_k::reduce_in_last_cta<kTokenTiles, kSlotVectors, /*kAddsFirstSplitTwice=*/false, kFragmentsAtOnce>(
      mine, block_slots, split, plan.splits, workspace.counters + column_block, store);
#endif
}

using Kernel = void (*)(GgufGemvArgs, GgufBatchPlan, GgufBatchWorkspace);

template <GgufBlockType kType, int kTokenTiles, bool kSwapped>
Kernel allowed_instance() {
  static const bool allowed = [] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(gemv_wgmma_kernel<kType, kTokenTiles, kSwapped>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kSmemBytes<kType, kTokenTiles>));
    return true;
  }();
  (void)allowed;
  return &gemv_wgmma_kernel<kType, kTokenTiles, kSwapped>;
}

template <bool kSwapped, class Launch>
void with_instance(GgufBlockType type, int m, Launch&& launch) {
  gguf_mma::dispatch_block_type(type, "rung 10", [&](auto type_constant) {
    constexpr GgufBlockType kType = decltype(type_constant)::value;
    const auto with_tiles = [&](auto tiles_constant) {
      constexpr int kTokenTiles = decltype(tiles_constant)::value;
      launch(allowed_instance<kType, kTokenTiles, kSwapped>(), kSmemBytes<kType, kTokenTiles>);
    };
    gguf_mma::dispatch_token_tiles(m, with_tiles);
  });
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
            cudaStream_t stream) {
  require(gemv_gguf_06_runs_here(),
          "GGUF GEMV (rung 10): WGMMA needs sm_90a code and a Hopper GPU; this build or GPU has none: run rung 09");
  check_gguf_batch_args(a, plan, workspace, "rung 10", 4);
  with_instance<kSwapped>(a.type, a.m, [&](Kernel kernel, int smem_bytes) {
    const dim3 grid(static_cast<unsigned>(plan.column_blocks), static_cast<unsigned>(plan.splits));
    kernel<<<grid, kThreads, static_cast<std::size_t>(smem_bytes), stream>>>(a, plan, workspace);
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_gguf_10_wgmma(const GgufGemvArgs& args, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                        cudaStream_t stream) {
  launch<false>(args, plan, workspace, stream);
}

void gemv_gguf_10_swapped_nibbles(const GgufGemvArgs& args, const GgufBatchPlan& plan,
                                  const GgufBatchWorkspace& workspace, cudaStream_t stream) {
  launch<true>(args, plan, workspace, stream);
}

int gemv_gguf_10_ctas_per_sm(GgufBlockType type, int m) {
  int ctas = 0;
  with_instance<false>(type, m, [&](Kernel kernel, int smem_bytes) {
    KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, kThreads,
                                                                static_cast<std::size_t>(smem_bytes)));
  });
  return ctas < 1 ? 1 : ctas;
}

}  // namespace kc::stage3
