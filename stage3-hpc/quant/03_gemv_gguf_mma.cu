// Rung 03 of the GGUF GEMV — the weights laid out for the tensor cores' fragments (Marlin-style),
// the dot products on mma.sync, the GGUF scales applied in FP32 once a block.
//
// Idea: rung 02 decodes each weight into an FP32 value and multiplies it on the CUDA cores: a
// shift, a mask, a conversion, an FMA for the scale and an FMA for x, per weight and per row of x.
// At 0.56-0.63 bytes a weight (q4) the DRAM delivers weights faster than an SM can issue those
// instructions, and the count grows with M. The tensor cores take the multiply-adds off the issue
// port (mma.sync m16n8k16: 16 rows of x by 8 output columns by 16 k in one instruction, so M = 1
// and M = 16 cost the same), and what is left per weight is turning the quant into a bf16 the
// tensor core accepts:
//   * a nibble q becomes the bf16 128 + q with one LOP3 a pair: (word >> s) & 0x000F000F |
//     0x43004300 — 0x4300 is bf16 128.0, whose mantissa step is exactly 1, so the nibble lands in
//     the mantissa as an integer, no conversion instruction (q8_0's signed bytes go through FP32:
//     two conversions and a pack a pair, affordable at twice the bytes a weight);
//   * the scale is not applied per weight: a block's weights share d (and m), so with c = the
//     tensor core's sum of x . (128 + q) over the block's 32 k and s = the block's sum of x (one
//     more mma against a B of ones, shared by every column),
//         sum_k x w = d (c - 128 s) + off s = d c + (off - 128 d) s,
//     off = m (q4_1), -8 d (q4_0), 0 (q8_0, no bias, so no s): two FFMA a column and row per block,
//     with d and m read as the file's halves — exact, as rung 01's.
//
// The layout (layout=2, repack_gguf_blocks_for_mma in kc/stage3/gemv_gguf.hpp, the picture in
// kc/stage3/gemv_gguf_args.hpp): the weights go in tiles of 8 output columns (rows of w) by 128 k
// (4 GGUF blocks), 512 bytes of quants each, lane l's 16 bytes holding exactly the nibbles its B
// fragments need for those 4 blocks — one LDG.128 per lane and tile, 512 contiguous bytes a warp.
// The k order inside a block is permuted the same way for x and w (a dot product does not care in
// which order it adds): mma slots {2t, 2t+1, 2t+8, 2t+9} of the first k16 and the same of the second
// hold the block's k 8t ... 8t+7, so lane (g, t) reads its 8 values of x for a block with one
// LDG.128 (row g) instead of four 32-bit loads. N pads to a multiple of 8 and K to a multiple of 128
// with zero blocks (scale 0: they add nothing), the only bytes the layout adds.
//
// What changed from rung 02: the layout, mma.sync for the products, the scale factored out of the
// block; and the split of the work: a CTA of 8 warps owns 1 or 2 tiles of 8 columns, its warps take
// the 128-k chunks of K in turn (prefetching the next chunk's quants and scales into registers
// while the tensor cores work on this one) and add their partial sums in shared memory at the end.
// M <= 8 uses the fragments' first 8 rows (x rows g), 9..16 the second 8 too.
//
// Expected limiter: DRAM — per 8 weights a lane issues about 7 integer instructions, two mma and
// a few FFMA, within an SM's issue rate at the copy bandwidth; the rows of x are L1/L2 hits.
// Small matrices (N x K of a 1B model's layers, a few MB) end before the DRAM pipeline is full.
//
// SASS to look for: LDG.E.128 for quants, scales and x; LOP3.LUT and SHF.R per pair of nibbles;
// HMMA.16816.F32.BF16; FFMA in the block epilogue; no I2F in the q4 loops.
//
// Run just this rung: kc-bench --filter stage3/gemv_gguf/03_mma
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "gemv_gguf_mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 8;

// One chunk (4 blocks) of one tile, as a lane holds it: its quants and the scales of columns 2t and
// 2t + 1 for the chunk's 4 blocks, (block j, parity p) at entry 2j + p.
template <GgufBlockType kType>
struct ChunkRegisters {
  static constexpr int kQuantVectors = gguf_mma::kLaneQuantBytes<kType> / 16;
  static constexpr int kScaleVectors = kType == GgufBlockType::q4_1 ? 2 : 1;
  uint4 quants[kQuantVectors];
  uint4 scales[kScaleVectors];
};

template <GgufBlockType kType>
__device__ __forceinline__ void load_chunk(ChunkRegisters<kType>& r, const uint4* quants, const uint4* scales,
                                           std::size_t tile_chunk, int lane, bool valid) {
  using R = ChunkRegisters<kType>;
#pragma unroll
  for (int v = 0; v < R::kQuantVectors; ++v)
    r.quants[v] = valid ? __ldg(quants + (tile_chunk * 32 + lane) * R::kQuantVectors + v) : make_uint4(0, 0, 0, 0);
  const int t = lane & 3;
#pragma unroll
  for (int v = 0; v < R::kScaleVectors; ++v)
    r.scales[v] = valid ? __ldg(scales + (tile_chunk * 4 + t) * R::kScaleVectors + v) : make_uint4(0, 0, 0, 0);
}

// __launch_bounds__(256, 1): given only the thread count, ptxas held some instances to 64
// registers and spilled 8-24 bytes inside the block loop (LDL/STL around the HMMAs; the SASS
// contracts refuse any spill in stage 3). A stated minimum of one CTA an SM lets it take the 53-102
// registers they need; 256 threads of up to 102 registers still fit two CTAs an SM.
template <GgufBlockType kType, int kTiles, bool kUpperRows, bool kSwapped>
__global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                    const uint4* __restrict__ quants, const uint4* __restrict__ scales,
                    __nv_bfloat16* __restrict__ y) {
  constexpr bool kBiased = kType != GgufBlockType::q8_0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n_tiles = (n_cols + 7) / 8;
  const int k_blocks = k_len / kGgufBlockWeights;
  const int chunks = (k_blocks + 3) / 4;
  const int first_tile = blockIdx.x * kTiles;

  float acc[kTiles][4];
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;

  // x rows g and g + 8 of this lane (rows past M read nothing and stay 0).
  const bool row_low = g < m_rows, row_high = kUpperRows && g + 8 < m_rows;
  const __nv_bfloat16* x_low = x + static_cast<std::size_t>(g) * k_len + 8 * t;
  const __nv_bfloat16* x_high = x + static_cast<std::size_t>(g + 8) * k_len + 8 * t;

  ChunkRegisters<kType> current[kTiles], next[kTiles];
  int chunk = warp;
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
    load_chunk(current[i], quants, scales, static_cast<std::size_t>(first_tile + i) * chunks + chunk, lane,
               chunk < chunks && first_tile + i < n_tiles);
  for (; chunk < chunks; chunk += kWarps) {
    const int next_chunk = chunk + kWarps;
#pragma unroll
    for (int i = 0; i < kTiles; ++i)
      load_chunk(next[i], quants, scales, static_cast<std::size_t>(first_tile + i) * chunks + next_chunk, lane,
                 next_chunk < chunks && first_tile + i < n_tiles);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int block = 4 * chunk + j;
      if (block >= k_blocks) break;  // the padding blocks of the last chunk: scale 0, x not read
      const gguf_mma::BlockA a = gguf_mma::load_block_a(x_low, x_high, row_low, row_high, block);
      float s[4] = {0.f, 0.f, 0.f, 0.f};  // the block's sum of x (not needed without a bias: q8_0)
      if constexpr (kBiased) gguf_mma::block_sums(a, s);
#pragma unroll
      for (int i = 0; i < kTiles; ++i) {
        std::uint32_t lane_quants[4 * ChunkRegisters<kType>::kQuantVectors];
        std::memcpy(lane_quants, current[i].quants, sizeof lane_quants);
        std::uint32_t b[4];
        gguf_mma::b_fragments<kType, kSwapped>(lane_quants, j, b);
        std::uint32_t entries[4 * ChunkRegisters<kType>::kScaleVectors];
        std::memcpy(entries, current[i].scales, sizeof entries);
        float2 f0, f1;
        gguf_mma::block_factors<kType>(entries, j, f0, f1);
        gguf_mma::block_product<kUpperRows>(a, b, s, f0, f1, acc[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kTiles; ++i) current[i] = next[i];
  }
  __shared__ float partial[kWarps * kTiles * 32 * 4];
  gguf_mma::reduce_and_store<kWarps, kTiles>(acc, partial, m_rows, n_cols, first_tile, y);
}

template <GgufBlockType kType, int kTiles, bool kUpperRows, bool kSwapped>
void launch_instance(const GgufGemvArgs& a, int tiles, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((tiles + kTiles - 1) / kTiles)), block(kWarps * 32);
  gemv_mma_kernel<kType, kTiles, kUpperRows, kSwapped><<<grid, block, 0, stream>>>(
      a.m, a.n, a.k, a.x, reinterpret_cast<const uint4*>(a.quants), static_cast<const uint4*>(a.scales), a.y);
}

template <bool kSwapped>
void launch(const GgufGemvArgs& a, cudaStream_t stream) {
  gguf_mma::launch_tile_rung(a, "mma", [&](auto type, auto tiles_per_cta, auto upper_rows, int tiles) {
    launch_instance<decltype(type)::value, decltype(tiles_per_cta)::value, decltype(upper_rows)::value, kSwapped>(
        a, tiles, stream);
  });
}

}  // namespace

void gemv_gguf_03_mma(const GgufGemvArgs& args, cudaStream_t stream) { launch<false>(args, stream); }

void gemv_gguf_03_swapped_nibbles(const GgufGemvArgs& args, cudaStream_t stream) { launch<true>(args, stream); }

}  // namespace kc::stage3
