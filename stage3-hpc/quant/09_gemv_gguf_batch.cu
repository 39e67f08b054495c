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

#include "arch/sm80/mma.cuh"
#include "gemv_batch_frame.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

// The frame (quant/gemv_batch_frame.cuh): the CTA's shape, the stage, the copies, the pipeline and
// the split-K reduction. What follows is this rung's block arithmetic.
using gemv_batch::Accumulators;
using gemv_batch::kTilesPerWarp;
using gemv_batch::Shape;
using gemv_batch::Stage;
using gemv_batch::x_piece_offset;

template <GgufBlockType kType, bool kSwapped>
struct GgufBatchFormat;

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
__device__ __forceinline__ void gguf_batch_multiply_chunk(const std::uint8_t* stage, int warp, int first_token_tile, int lane,
                                               Accumulators<kTokenTiles>& acc) {
  using S = Stage<GgufBatchFormat<kType, kSwapped>, kTokenTiles>;
  constexpr int kScaleVectors = gguf_mma::ChunkBytes<kType>::kScaleVectors;  // a row group: 1, or 2 in q4_1
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
      const std::uint8_t* entries = stage + S::kQuants + (tile * 8 + g) * kScaleVectors * 16 + W::kEntries * 4 * j;
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


// The GGUF blocks as the frame's Format: layout=3's chunk bytes, the CTAs an SM, the arithmetic.
template <GgufBlockType kType, bool kSwapped>
struct GgufBatchFormat {
  using Args = GgufGemvArgs;
  static constexpr int kQuantVectors = gguf_mma::ChunkBytes<kType>::kQuantVectors;      // 16-byte vectors a lane: 2, or 4 in q8_0
  static constexpr int kTileScaleVectors = 8 * gguf_mma::ChunkBytes<kType>::kScaleVectors;  // 8 row groups x 1, or 2 in q4_1
  // Two CTAs an SM where 128 registers a thread hold the instance without spills (ptxas -v): all
  // but q4_1 and q8_0 at 7 and 8 token tiles (their wider words and scale entries), which keep one.
  template <int kTokenTiles>
  static constexpr int kMinCtasPerSm = kType != GgufBlockType::q4_0 && kTokenTiles >= 7 ? 1 : 2;
  template <int kTokenTiles>
  __device__ __forceinline__ static void multiply_chunk(const std::uint8_t* stage, int warp, int first_token_tile,
                                                        int lane, Accumulators<kTokenTiles>& acc) {
    gguf_batch_multiply_chunk<kType, kTokenTiles, kSwapped>(stage, warp, first_token_tile, lane, acc);
  }
};

using Kernel = void (*)(GgufGemvArgs, GgufBatchPlan, GgufBatchWorkspace);

// Calls launch(kernel, smem_bytes) with the instance for the block type and M's token tiles.
template <bool kSwapped, class Launch>
void with_instance(GgufBlockType type, int m, Launch&& launch) {
  gguf_mma::dispatch_block_type(type, "rung 09", [&](auto type_constant) {
    constexpr GgufBlockType kType = decltype(type_constant)::value;
    const auto with_tiles = [&](auto tiles_constant) {
      constexpr int kTokenTiles = decltype(tiles_constant)::value;
      using Format = GgufBatchFormat<kType, kSwapped>;
      launch(gemv_batch::allowed_instance<Format, kTokenTiles>(), Stage<Format, kTokenTiles>::kSmemBytes);
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
