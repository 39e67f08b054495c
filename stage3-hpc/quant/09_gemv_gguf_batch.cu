// Rung 09 of the GGUF GEMV — a batch of rows (M up to 64): each block decoded once, used by every
// token tile.
//
// Idea: rungs 05-08 make one product per block and group of 8 rows of x, and apply the block's
// scales after each: per block, row group and lane two products against ones (the sums of x), four
// FFMA pairs and the nibble decode. At M = 1 to 16 that is one or two groups and the decode is
// most of the work; at 64 rows the per-group part is eight times over, while the weights' bytes do
// not grow. And each CTA of rung 05 reads every row of x it meets from L2, once per 16 columns.
// This rung takes the frame of stage 3's hgemm rung 14 (gemm/14_small_m_weights_as_a.cu) — a CTA
// owns 128 output columns and a split of K, each warp 2 tiles of 16 columns, a cp.async ring of K
// steps (here a chunk: 128 k of 8 tiles of quants, their scales and the 8T rows of x) shared by the
// warps, split-K partials added by the last CTA of each column block in the same launch (rung 14's
// reduction, gemm/split_k_last_cta.cuh) — and feeds it the weights of layout=3 (rung 05's: the A
// operand, 16 columns a product):
//   - a block's nibbles become bf16 weights once for a warp's token tiles: 128 + q by rung 03's
//     mask and OR, then one HSUB2 a pair to q - 8 (q4_0) or q (q4_1) — small integers, exact in
//     bf16; q8_0's bytes are exact already;
//   - every token tile (8 rows of x) then costs two mma.sync and one FFMA an output: acc += d c,
//     with c = x . (q - 8) (or x . q) over the block; q4_1 adds m s, s the block's sum of x from
//     one product against ones per token tile, shared by the warp's two tiles;
//   - x's rows reach the lanes from shared memory (one LDS.128 a lane, token tile and block: the
//     8 values of k 8t .. 8t+7 layout=3's k order pairs with the weights), copied once per CTA and
//     chunk for all 128 columns;
//   - from 3 token tiles the CTA has two token groups of 4 warps, each multiplying half the token
//     tiles with all 128 columns (each decodes every block; each holds half the accumulators), so
//     an SM holds twice the warps; each thread's copy sources are worked out once (CopyPlan); the
//     block loop is unrolled where the registers allow it (kBlockUnroll).
// The result is exact in the same sense as rungs 05-08 (FP32 sums of exact products, the scales
// applied in FP32 once a block); only the order of the additions differs.
//
// The plan (plan_gguf_batch, kc/stage3/gemv_gguf_args.hpp): 128-column blocks x splits of K
// chunks, as many splits as give the CTAs that fit an SM on every SM, no split shorter than 8
// chunks (1024 k). FLOPs 2MNK, bytes the blocks' (N x K / 32 x 18 in q4_0) plus x and y. At
// 64 x 4096 x 4096 in q4_0: 9.4 MB of blocks, 32 column blocks x 4 splits (128 CTAs), each
// streaming 8 chunks of 9.2 KB; x read from L2 once per column block (16 MB in all), the partial
// tiles 4 MB written and three quarters of them read back by the last CTAs.
//
// Expected limiter: DRAM at M <= 16 (per chunk and warp: 2 x 8 decoded pairs, 4T products, 2T FFMA
// per output); from M = 32 the tensor pipe and the issue rate — at 64 rows a chunk costs the CTA
// 512 HMMA for its 8 KB of quants (analysis). Measured, it is neither: each CTA is a serial chain
// of decode, products and FFMAs with few warps to hide it (the README's rung 09 section has the
// profile and the numbers).
//
// SASS to look for: LDGSTS.E.BYPASS.128 (the ring), LDS.128, LOP3.LUT and HADD2.BF16 (or
// HFMA2.BF16) per pair, HMMA.16816.F32.BF16, one FFMA per output and block in q4_0 / q8_0; the
// reduction's STG.E.128, ATOMG.E.ADD, LDG.E.128; no LDL/STL.
//
// Refuses: M > 64, and the other layouts.
//
// Run just this rung:
//   kc-bench --filter stage3/gemv_gguf/09_batch --shapes 64x4096x4096 --param layout=3
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "gemm/split_k_last_cta.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTiles = kGgufBatchColumns / 16;  // 8 tiles of 16 columns a CTA
constexpr int kTilesPerWarp = 2;                // a warp's tiles: 4 warps of a token group cover the CTA's 8
constexpr int kWarpsPerGroup = kTiles / kTilesPerWarp;
constexpr int kStages = 4;
constexpr int kChunkK = 4 * kGgufBlockWeights;  // 128 k a chunk
constexpr int kXRowBytes = kChunkK * 2;         // 256 bytes of one row of x a chunk
constexpr int kXPieces = kXRowBytes / 16;       // 16 pieces of 16 bytes
// The last CTA adds the split-K partials one fragment at a time (split_k_last_cta.cuh), a chain of
// L2 loads a fragment: all of a thread's (up to 8) at once would take registers that cost some
// instances a CTA an SM (q4_0 at 9-16 rows on sm_90a), and the plan's splits — so y's bits —
// follow the CTAs an SM.
constexpr int kFragmentsAtOnce = 1;

// The CTA's shape for T token tiles: kGroups token groups of 4 warps; group g multiplies token
// tiles [g x kGroupTiles, (g + 1) x kGroupTiles) (those below T) with all 8 tiles of weights, so
// two groups decode each block twice but hold half the accumulators, and the SM gets twice the
// warps (gguf_batch_token_groups in gemv_gguf_args.hpp says from which T).
template <int kTokenTiles>
struct Shape {
  static constexpr int kGroups = gguf_batch_token_groups(kTokenTiles);
  static constexpr int kGroupTiles = (kTokenTiles + kGroups - 1) / kGroups;
  static constexpr int kWarps = kWarpsPerGroup * kGroups;
  static constexpr int kThreads = 32 * kWarps;
};

// One stage: the 8 tiles' quants ([tile][vector v][lane] 16 bytes each, so that a warp's LDS of
// vector v reads 512 contiguous bytes), their scale entries ([tile][row group][vector]), then the
// 8T rows of x (row r's 16-byte piece p at p ^ 4 (r & 1): rows g and g + 1, which one LDS.128
// phase reads, on different banks).
template <GgufBlockType kType, int kTokenTiles>
struct Stage {
  using Bytes = gguf_mma::ChunkBytes<kType>;
  static constexpr int kQuantVectors = Bytes::kQuantVectors;  // 16-byte vectors a lane: 2, or 4 in q8_0
  static constexpr int kScaleVectors = Bytes::kScaleVectors;  // a row group: 1, or 2 in q4_1
  static constexpr int kQuants = kTiles * Bytes::kQuants;
  static constexpr int kScales = kTiles * Bytes::kScales;
  static constexpr int kRows = 8 * kTokenTiles;
  static constexpr int kX = kRows * kXRowBytes;
  static constexpr int kBytes = kQuants + kScales + kX;
  static constexpr int kSmemBytes = kStages * kBytes + 128;  // + alignment slack for the 128-byte start
  static constexpr int kQuantPieces = kQuants / 16, kScalePieces = kScales / 16, kXPieces = kX / 16;
  static_assert(kQuants % 128 == 0 && kScales % 128 == 0 && kBytes % 128 == 0, "pieces stay 128-byte aligned");
};

__device__ __forceinline__ int x_piece_offset(int row, int piece) {
  return row * kXRowBytes + ((piece ^ ((row & 1) << 2)) << 4);
}

// A thread's share of every chunk's copies, worked out once: for each of its 16-byte pieces the
// source at chunk 0 (a chunk further on is a fixed step away: 32 x kQuantVectors vectors of quants,
// 8 x kScaleVectors of scales, 128 k of x), the place in a stage, and whether it is read at all —
// tiles past the weight's (N's padding to 16 is in the layout) and rows of x past M are written as
// zeros (src-size 0) and add nothing; a piece of x past K (the last chunk's padding blocks) too.
template <GgufBlockType kType, int kTokenTiles>
struct CopyPlan {
  using S = Stage<kType, kTokenTiles>;
  static constexpr int kThreads = Shape<kTokenTiles>::kThreads;
  static constexpr int kQuantPasses = (S::kQuantPieces + kThreads - 1) / kThreads;
  static constexpr int kScalePasses = (S::kScalePieces + kThreads - 1) / kThreads;
  static constexpr int kXPasses = (S::kXPieces + kThreads - 1) / kThreads;
  const uint4* quants[kQuantPasses];
  const uint4* scales[kScalePasses];
  const bf16* x[kXPasses];
  std::uint32_t quant_at[kQuantPasses], scale_at[kScalePasses], x_at[kXPasses];
  int x_k[kXPasses];  // the piece's k within a chunk; x[p] == nullptr: not copied (zeros)

  __device__ __forceinline__ CopyPlan(const GgufGemvArgs& a, int first_tile, int chunks) {
    const int tiles = (a.n + 15) / 16;
    const int thread = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int pass = 0; pass < kQuantPasses; ++pass) {
      const int i = thread + pass * kThreads;
      const int tile = i / (32 * S::kQuantVectors), within = i % (32 * S::kQuantVectors);
      const int lane = within / S::kQuantVectors, v = within % S::kQuantVectors;
      const bool valid = i < S::kQuantPieces && first_tile + tile < tiles;
      quants[pass] = valid ? reinterpret_cast<const uint4*>(a.quants) +
                                 static_cast<std::size_t>(first_tile + tile) * chunks * 32 * S::kQuantVectors + within
                           : nullptr;
      quant_at[pass] = i < S::kQuantPieces ? ((tile * S::kQuantVectors + v) * 32 + lane) * 16 : ~0u;
    }
#pragma unroll
    for (int pass = 0; pass < kScalePasses; ++pass) {
      const int i = thread + pass * kThreads;
      const int tile = i / (8 * S::kScaleVectors), within = i % (8 * S::kScaleVectors);
      const bool valid = i < S::kScalePieces && first_tile + tile < tiles;
      scales[pass] = valid ? static_cast<const uint4*>(a.scales) +
                                 static_cast<std::size_t>(first_tile + tile) * chunks * 8 * S::kScaleVectors + within
                           : nullptr;
      scale_at[pass] = i < S::kScalePieces ? S::kQuants + i * 16 : ~0u;
    }
#pragma unroll
    for (int pass = 0; pass < kXPasses; ++pass) {
      const int i = thread + pass * kThreads;
      const int row = i / kXPieces, piece = i % kXPieces;
      x[pass] = i < S::kXPieces && row < a.m ? a.x + static_cast<std::size_t>(row) * a.k + piece * 8 : nullptr;
      x_k[pass] = piece * 8;
      x_at[pass] = i < S::kXPieces ? S::kQuants + S::kScales + x_piece_offset(row, piece) : ~0u;
    }
  }

  // Issues the copies of chunk `chunk` into the stage at shared address `stage`.
  __device__ __forceinline__ void copy(const GgufGemvArgs& a, int chunk, std::uint32_t stage) const {
#pragma unroll
    for (int pass = 0; pass < kQuantPasses; ++pass)
      if (quant_at[pass] != ~0u) {
        const bool valid = quants[pass] != nullptr;
        sm80::cp_async_16(stage + quant_at[pass],
                          valid ? static_cast<const void*>(quants[pass] +
                                                           static_cast<std::size_t>(chunk) * 32 * S::kQuantVectors)
                                : static_cast<const void*>(a.quants),
                          valid);
      }
#pragma unroll
    for (int pass = 0; pass < kScalePasses; ++pass)
      if (scale_at[pass] != ~0u) {
        const bool valid = scales[pass] != nullptr;
        sm80::cp_async_16(stage + scale_at[pass],
                          valid ? static_cast<const void*>(scales[pass] +
                                                           static_cast<std::size_t>(chunk) * 8 * S::kScaleVectors)
                                : a.scales,
                          valid);
      }
#pragma unroll
    for (int pass = 0; pass < kXPasses; ++pass)
      if (x_at[pass] != ~0u) {
        const int k = chunk * kChunkK + x_k[pass];
        const bool valid = x[pass] != nullptr && k < a.k;
        sm80::cp_async_16(stage + x_at[pass], valid ? x[pass] + chunk * kChunkK : a.x, valid);
      }
  }
};

// acc[mt][nt]: the 16 x 8 product of the warp's tile mt and its group's token tile nt; lane (g, t)
// holds rows (output columns) g and g + 8 of the tile x x rows 2t and 2t + 1 of the token tile:
// {y[2t][g], y[2t + 1][g], y[2t][g + 8], y[2t + 1][g + 8]}, relative to the tiles' origins.
template <int kTokenTiles>
using Accumulators = float[kTilesPerWarp][Shape<kTokenTiles>::kGroupTiles][4];

// How many words a lane reads for one block of one tile in a stage: its quants (rows g and g + 8:
// 2 words, 4 in q8_0) and its row group's scale entries (1 word, 2 in q4_1), laid out as rung
// 05's registers hold them for block 0 of a chunk (weights_as_a_fragments and block_scales read
// them at j = 0). Only one block's are loaded at a time: the loop over the blocks may stay rolled.
template <GgufBlockType kType>
struct BlockWords {
  static constexpr int kWords = kType == GgufBlockType::q8_0 ? 4 : 2;
  static constexpr int kEntries = kType == GgufBlockType::q4_1 ? 2 : 1;
};

// Blocks of a chunk the compiler may interleave: more independent work per warp between the
// shared-memory loads and the products it waits for, at the price of registers.
template <int kTokenTiles>
constexpr int kBlockUnroll = kTokenTiles <= 2 ? 4 : kTokenTiles <= 5 ? 2 : 1;

// One chunk of the warp's two tiles (`warp` counted within its token group) against its group's
// token tiles (from `first_token_tile`), from `stage`.
template <GgufBlockType kType, int kTokenTiles, bool kSwapped>
__device__ __forceinline__ void multiply_chunk(const std::uint8_t* stage, int warp, int first_token_tile, int lane,
                                               Accumulators<kTokenTiles>& acc) {
  using S = Stage<kType, kTokenTiles>;
  constexpr int kGroupTiles = Shape<kTokenTiles>::kGroupTiles;
  using W = BlockWords<kType>;
  const int g = lane >> 2, t = lane & 3;
  const std::uint8_t* x = stage + S::kQuants + S::kScales;
#pragma unroll(kBlockUnroll<kTokenTiles>)
  for (int j = 0; j < 4; ++j) {
    std::uint32_t first[kTilesPerWarp][4], second[kTilesPerWarp][4];
    float2 low[kTilesPerWarp], high[kTilesPerWarp];  // (d, m) of rows g and g + 8; m = 0 but in q4_1
#pragma unroll
    for (int mt = 0; mt < kTilesPerWarp; ++mt) {
      const int tile = warp * kTilesPerWarp + mt;
      // Block j's words: bytes W::kWords x 4 x j of the lane's quants, which the stage keeps as
      // 16-byte vectors [tile][v][lane].
      const int byte = W::kWords * 4 * j;
      const std::uint8_t* quants = stage + ((tile * S::kQuantVectors + byte / 16) * 32 + lane) * 16 + byte % 16;
      const std::uint8_t* entries = stage + S::kQuants + (tile * 8 + g) * S::kScaleVectors * 16 + W::kEntries * 4 * j;
      std::uint32_t words[W::kWords], entry_words[W::kEntries];
      if constexpr (W::kWords == 4) {
        const uint4 q = *reinterpret_cast<const uint4*>(quants);
        words[0] = q.x; words[1] = q.y; words[2] = q.z; words[3] = q.w;
      } else {
        const uint2 q = *reinterpret_cast<const uint2*>(quants);
        words[0] = q.x; words[1] = q.y;
      }
      if constexpr (W::kEntries == 2) {
        const uint2 e = *reinterpret_cast<const uint2*>(entries);
        entry_words[0] = e.x; entry_words[1] = e.y;
      } else {
        entry_words[0] = *reinterpret_cast<const std::uint32_t*>(entries);
      }
      // Block 0 of these arrays is block j of the chunk.
      gguf_mma::weights_as_a_fragments<kType, kSwapped>(words, 0, first[mt], second[mt]);
      gguf_mma::center_weights<kType>(first[mt]);
      gguf_mma::center_weights<kType>(second[mt]);
      gguf_mma::block_scales<kType>(entry_words, 0, low[mt], high[mt]);
    }
#pragma unroll
    for (int nt = 0; nt < kGroupTiles; ++nt) {
      // The last group's tiles past T (an odd T) are not there.
      if (kTokenTiles % kGroupTiles != 0 && first_token_tile + nt >= kTokenTiles) break;
      // Lane (g, t): k 8t .. 8t+7 of block j, row 8 (first + nt) + g of x; k 8t .. 8t+3 feed the
      // first k16 product, 8t+4 .. 8t+7 the second (layout=3's order).
      const uint4 xv =
          *reinterpret_cast<const uint4*>(x + x_piece_offset(8 * (first_token_tile + nt) + g, 4 * j + t));
      const float zero[4] = {0.f, 0.f, 0.f, 0.f};
      float s[4] = {0.f, 0.f, 0.f, 0.f};  // q4_1: the block's sums of x rows 2t (s[0]) and 2t + 1 (s[1])
      if constexpr (kType == GgufBlockType::q4_1) {
        const std::uint32_t ones[4] = {gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair,
                                       gguf_mma::kBf16OnePair};
        float s1[4];
        sm80::mma_m16n8k16_bf16_into(s1, ones, xv.x, xv.y, zero);
        sm80::mma_m16n8k16_bf16_into(s, ones, xv.z, xv.w, s1);
      }
#pragma unroll
      for (int mt = 0; mt < kTilesPerWarp; ++mt) {
        float c1[4], c[4];
        sm80::mma_m16n8k16_bf16_into(c1, first[mt], xv.x, xv.y, zero);
        sm80::mma_m16n8k16_bf16_into(c, second[mt], xv.z, xv.w, c1);
        float* out = acc[mt][nt];
        if constexpr (kType == GgufBlockType::q4_1) {
          out[0] = fmaf(low[mt].x, c[0], fmaf(low[mt].y, s[0], out[0]));
          out[1] = fmaf(low[mt].x, c[1], fmaf(low[mt].y, s[1], out[1]));
          out[2] = fmaf(high[mt].x, c[2], fmaf(high[mt].y, s[0], out[2]));
          out[3] = fmaf(high[mt].x, c[3], fmaf(high[mt].y, s[1], out[3]));
        } else {
          out[0] = fmaf(low[mt].x, c[0], out[0]);
          out[1] = fmaf(low[mt].x, c[1], out[1]);
          out[2] = fmaf(high[mt].x, c[2], out[2]);
          out[3] = fmaf(high[mt].x, c[3], out[3]);
        }
      }
    }
  }
}

// y[m][n] for an output inside M x N; nothing outside.
__device__ __forceinline__ void store_output(const GgufGemvArgs& a, int m, int n, float sum) {
  if (m < a.m && n < a.n) a.y[static_cast<std::size_t>(m) * a.n + n] = __float2bfloat16_rn(sum);
}

__device__ __forceinline__ void store_fragment(const GgufGemvArgs& a, int n0, int m0, float4 sum) {
  store_output(a, m0, n0, sum.x);
  store_output(a, m0 + 1, n0, sum.y);
  store_output(a, m0, n0 + 8, sum.z);
  store_output(a, m0 + 1, n0 + 8, sum.w);
}

// Two CTAs an SM where 128 registers a thread hold the instance without spills (ptxas -v): all
// but q4_1 and q8_0 at 7 and 8 token tiles (their wider words and scale entries), which keep one.
template <GgufBlockType kType, int kTokenTiles>
constexpr int kMinCtasPerSm = kType != GgufBlockType::q4_0 && kTokenTiles >= 7 ? 1 : 2;

template <GgufBlockType kType, int kTokenTiles, bool kSwapped>
__global__ void __launch_bounds__(Shape<kTokenTiles>::kThreads, (kMinCtasPerSm<kType, kTokenTiles>))
    gemv_batch_kernel(GgufGemvArgs a, GgufBatchPlan plan, GgufBatchWorkspace workspace) {
  using S = Stage<kType, kTokenTiles>;
  using C = Shape<kTokenTiles>;
  constexpr int kGroupTiles = C::kGroupTiles;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = smem_raw + ((128 - (smem_u32(smem_raw) & 127)) & 127);
  const auto stage_at = [&](int stage) { return smem + stage * S::kBytes; };

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int group_warp = warp % kWarpsPerGroup, first_token_tile = warp / kWarpsPerGroup * kGroupTiles;
  const int column_block = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int chunk_begin = plan.chunk_begin(split);
  const int steps = plan.chunk_begin(split + 1) - chunk_begin;
  const CopyPlan<kType, kTokenTiles> copies(a, column_block * kTiles, plan.chunks);

  // kStages - 1 chunks in flight before the first product; a group is committed even when empty,
  // so that wait_group counts the same on every path.
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < steps) copies.copy(a, chunk_begin + stage, smem_u32(stage_at(stage)));
    sm80::cp_async_commit_group();
  }

  Accumulators<kTokenTiles> acc = {};
#pragma unroll 1
  for (int i = 0; i < steps; ++i) {
    sm80::cp_async_wait_group<kStages - 2>();  // this thread's copies of chunk i have landed
    __syncthreads();  // everyone's have; and every warp is done with chunk i - 1, whose stage is refilled next
    const int next = i + kStages - 1;
    if (next < steps) copies.copy(a, chunk_begin + next, smem_u32(stage_at(next % kStages)));
    sm80::cp_async_commit_group();
    multiply_chunk<kType, kTokenTiles, kSwapped>(stage_at(i % kStages), group_warp, first_token_tile, lane, acc);
  }

  // Fragment f = mt x kGroupTiles + nt (the warp's tile mt, its group's token tile nt): output
  // columns n0 = 128 block + 32 group_warp + 16 mt + g (and + 8), rows of x
  // m0 = 8 (first_token_tile + nt) + 2t (and + 1); rows past M are not stored.
  constexpr int kFragments = kTilesPerWarp * kGroupTiles;
  const int warp_n0 = column_block * kGgufBatchColumns + group_warp * kTilesPerWarp * 16 + g;
  const int warp_m0 = 8 * first_token_tile + 2 * t;
  split_k::ThreadFragments<kFragments> mine;
#pragma unroll
  for (int mt = 0; mt < kTilesPerWarp; ++mt)
#pragma unroll
    for (int nt = 0; nt < kGroupTiles; ++nt)
      mine.value[mt * kGroupTiles + nt] = make_float4(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3]);
  const auto store = [&](int f, float4 sum) {
    store_fragment(a, warp_n0 + 16 * (f / kGroupTiles), warp_m0 + 8 * (f % kGroupTiles), sum);
  };
  if (!plan.needs_workspace()) {
#pragma unroll
    for (int f = 0; f < kFragments; ++f) store(f, mine.value[f]);
    return;
  }

  // hgemm rung 14's split-K reduction (split_k_last_cta.cuh): the partial tile in fragment order,
  // a slot per CTA; the last CTA of the column block to arrive adds the slots in split order (the
  // same bits whichever CTA it is), one fragment at a time, stores y and resets the counter for the
  // next launch.
  constexpr int kSlotVectors = C::kThreads * kFragments;  // float4s per slot
  float4* const block_slots = reinterpret_cast<float4*>(workspace.partials) +
                              static_cast<std::size_t>(column_block) * plan.splits * kSlotVectors;
  split_k::reduce_in_last_cta<kFragments, kSlotVectors, /*kAddsFirstSplitTwice=*/false, kFragmentsAtOnce>(
      mine, block_slots, split, plan.splits, workspace.counters + column_block, store);
}

using Kernel = void (*)(GgufGemvArgs, GgufBatchPlan, GgufBatchWorkspace);

// An instance with its shared memory allowed (the opt-in beyond 48 KiB, once per instance).
template <GgufBlockType kType, int kTokenTiles, bool kSwapped>
Kernel allowed_instance() {
  static const bool allowed = [] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(gemv_batch_kernel<kType, kTokenTiles, kSwapped>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Stage<kType, kTokenTiles>::kSmemBytes));
    return true;
  }();
  (void)allowed;
  return &gemv_batch_kernel<kType, kTokenTiles, kSwapped>;
}

// Calls launch(kernel, smem_bytes) with the instance for the block type and M's token tiles.
template <bool kSwapped, class Launch>
void with_instance(GgufBlockType type, int m, Launch&& launch) {
  gguf_mma::dispatch_block_type(type, "rung 09", [&](auto type_constant) {
    constexpr GgufBlockType kType = decltype(type_constant)::value;
    const auto with_tiles = [&](auto tiles_constant) {
      constexpr int kTokenTiles = decltype(tiles_constant)::value;
      launch(allowed_instance<kType, kTokenTiles, kSwapped>(), Stage<kType, kTokenTiles>::kSmemBytes);
    };
    gguf_mma::dispatch_token_tiles(m, with_tiles);
  });
}


template <bool kSwapped>
void launch(const GgufGemvArgs& a, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
            cudaStream_t stream) {
  check_gguf_batch_args(a, plan, workspace, "rung 09", 16);
  with_instance<kSwapped>(a.type, a.m, [&](Kernel kernel, int smem_bytes) {
    const dim3 grid(static_cast<unsigned>(plan.column_blocks), static_cast<unsigned>(plan.splits));
    kernel<<<grid, gguf_batch_threads(plan.token_tiles), static_cast<std::size_t>(smem_bytes), stream>>>(a, plan,
                                                                                                     workspace);
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_gguf_09_batch(const GgufGemvArgs& args, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                        cudaStream_t stream) {
  launch<false>(args, plan, workspace, stream);
}

void gemv_gguf_09_swapped_nibbles(const GgufGemvArgs& args, const GgufBatchPlan& plan,
                                  const GgufBatchWorkspace& workspace, cudaStream_t stream) {
  launch<true>(args, plan, workspace, stream);
}

int gemv_gguf_09_ctas_per_sm(GgufBlockType type, int m) {
  int ctas = 0;
  with_instance<false>(type, m, [&](Kernel kernel, int smem_bytes) {
    KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, gguf_batch_threads((m + 7) / 8),
                                                                static_cast<std::size_t>(smem_bytes)));
  });
  return ctas < 1 ? 1 : ctas;
}

}  // namespace kc::stage3
