// quant/gemv_gguf_mma.cuh — the block arithmetic of the GGUF GEMV's tensor-core rungs (03-08):
// how a lane turns its quants of a fragment layout (layout=2 for rungs 03 and 04, layout=3 for 05
// to 07: kc/stage3/gemv_gguf_args.hpp) into bf16 fragments, multiplies one GGUF block with
// mma.sync and applies the block's scales, and how the warps' partial sums become y, and on the
// host the argument rules and the dispatch on the block type their launches share. The rungs
// differ in how the quants, scales and x reach the lane (rung 03: registers, one chunk ahead; rung
// 04: a cp.async pipeline in shared memory; 05: as 03 with the operands swapped; 06: bulk copies
// into a shared-memory ring; 07: the same ring for the weights, x resident in shared memory; 08:
// rung 07 with x in fp16 and its own block arithmetic, the "fp16" section below).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "arch/sm80/mma.cuh"
#include "gemm_layout.hpp"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3::gguf_mma {

constexpr std::uint32_t kBf16OnePair = 0x3F803F80u;   // bf16 (1.0, 1.0)
constexpr std::uint32_t kBf16BiasPair = 0x43004300u;  // bf16 (128.0, 128.0): exponent of [128, 256)

// Bytes of one tile of 8 rows x 4 blocks: a lane's quants (32 lanes of them) and the scales.
template <GgufBlockType kType>
constexpr int kLaneQuantBytes = kType == GgufBlockType::q8_0 ? 32 : 16;
template <GgufBlockType kType>
constexpr int kTileScaleBytes = 32 * gguf_scale_bytes(kType);

// Pair i (0..3) of a lane's word of nibbles as bf16 (128 + q_lo, 128 + q_hi): nibble positions i
// and i + 4 (bits 4i and 16 + 4i) hold the block's k 8t + 2i and 8t + 2i + 1. kSwapped: the
// negative control's decode, the two nibbles of each pair exchanged.
// (a & b) | c in one LOP3.LUT (lookup table 0xEA): written in C++, the compiler emits an AND and an
// OR, because a SASS LOP3 takes one immediate and the mask and the bias are two.
__device__ __forceinline__ std::uint32_t and_or(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  std::uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(out) : "r"(a), "r"(b), "r"(c));
  return out;
}

// The two 16-bit halves of a pair exchanged: the negative control's nibble order.
__device__ __forceinline__ std::uint32_t swap_halves(std::uint32_t pair) { return (pair >> 16) | (pair << 16); }

template <bool kSwapped>
__device__ __forceinline__ std::uint32_t nibble_pair(std::uint32_t word, int i) {
  std::uint32_t pair = and_or(word >> (4 * i), 0x000F000Fu, kBf16BiasPair);
  if constexpr (kSwapped) pair = swap_halves(pair);
  return pair;
}

// Signed bytes 2i and 2i + 1 of a lane's 8 quants of a q8_0 block as two floats (exact: |q| <= 128).
__device__ __forceinline__ float2 byte_floats(uint2 bytes, int i) {
  const std::uint32_t word = i < 2 ? bytes.x : bytes.y;
  const int shift = 16 * (i % 2);
  const float low = static_cast<float>(static_cast<std::int8_t>((word >> shift) & 0xffu));
  const float high = static_cast<float>(static_cast<std::int8_t>((word >> (shift + 8)) & 0xffu));
  return make_float2(low, high);
}

// The same pair as bf16 (exact).
__device__ __forceinline__ std::uint32_t byte_pair(uint2 bytes, int i) {
  const float2 values = byte_floats(bytes, i);
  const __nv_bfloat162 pair = __floats2bfloat162_rn(values.x, values.y);
  std::uint32_t out;
  std::memcpy(&out, &pair, sizeof out);
  return out;
}

// The factors of c and s for one column: d and off - bias.d (off = m, -8d or 0; bias 128 for the
// nibbles, 0 for q8_0's bytes), from the column's scale entry (half d, or half2 (d, m)).
template <GgufBlockType kType>
__device__ __forceinline__ float2 factors(std::uint32_t entry_bits) {
  if constexpr (kType == GgufBlockType::q4_1) {
    __half2 dm;
    std::memcpy(&dm, &entry_bits, sizeof dm);
    const float2 f = __half22float2(dm);
    return make_float2(f.x, f.y - 128.f * f.x);
  } else {
    __half h;
    const auto bits = static_cast<std::uint16_t>(entry_bits);
    std::memcpy(&h, &bits, sizeof h);
    const float d = __half2float(h);
    return make_float2(d, kType == GgufBlockType::q4_0 ? -136.f * d : 0.f);
  }
}

// The factors of block j for the two outputs a lane's 8 scale entries serve (entries 2j and 2j + 1:
// columns 2t and 2t + 1 in layout=2, rows g and g + 8 in layout=3): `entries` is the lane's 16 or
// 32 bytes of entries as words — half d two a word (low half first), or one half2 (d, m) a word.
template <GgufBlockType kType>
__device__ __forceinline__ void block_factors(const std::uint32_t* entries, int j, float2& first, float2& second) {
  if constexpr (kType == GgufBlockType::q4_1) {
    first = factors<kType>(entries[2 * j]);
    second = factors<kType>(entries[2 * j + 1]);
  } else {
    first = factors<kType>(entries[j] & 0xffffu);
    second = factors<kType>(entries[j] >> 16);
  }
}

// ---- layout=3, the weights as A (rungs 05 and 06) ----
// A lane's quants of one chunk as words: q4 word 2j + h holds row g + 8h of block j (8 nibbles);
// q8_0 words 2(2j + h) and 2(2j + h) + 1 its 8 bytes. Pair p (0..3) of the lane's 8 weights of one
// row and block, as bf16: nibbles (128 + q) or bytes.
template <GgufBlockType kType, bool kSwapped>
__device__ __forceinline__ std::uint32_t weight_pair(const std::uint32_t* words, int row_word, int p) {
  if constexpr (kType == GgufBlockType::q8_0) {
    return byte_pair(make_uint2(words[2 * row_word], words[2 * row_word + 1]), p);
  } else {
    return nibble_pair<kSwapped>(words[row_word], p);
  }
}

// The A fragments of block j: the weights of rows g (h = 0) and g + 8 (h = 1), k 8t..8t+3 to the
// first k16 product, 8t+4..8t+7 to the second.
template <GgufBlockType kType, bool kSwapped>
__device__ __forceinline__ void weights_as_a_fragments(const std::uint32_t* words, int j, std::uint32_t (&first)[4],
                                                       std::uint32_t (&second)[4]) {
  first[0] = weight_pair<kType, kSwapped>(words, 2 * j, 0);
  first[1] = weight_pair<kType, kSwapped>(words, 2 * j + 1, 0);
  first[2] = weight_pair<kType, kSwapped>(words, 2 * j, 1);
  first[3] = weight_pair<kType, kSwapped>(words, 2 * j + 1, 1);
  second[0] = weight_pair<kType, kSwapped>(words, 2 * j, 2);
  second[1] = weight_pair<kType, kSwapped>(words, 2 * j + 1, 2);
  second[2] = weight_pair<kType, kSwapped>(words, 2 * j, 3);
  second[3] = weight_pair<kType, kSwapped>(words, 2 * j + 1, 3);
}

// The 8 pairs of a block's A fragments (weights_as_a_fragments: 128 + q for the nibbles) moved to
// the weights' integer: q - 8 in q4_0, q in q4_1 (HSUB2 on bf16 pairs of small integers: exact).
// q8_0's bytes are their values already. Rungs 09 and 10, which apply the scales after the product.
template <GgufBlockType kType>
__device__ __forceinline__ void center_weights(std::uint32_t (&pairs)[4]) {
  if constexpr (kType != GgufBlockType::q8_0) {
    const __nv_bfloat162 bias = __float2bfloat162_rn(kType == GgufBlockType::q4_0 ? 136.f : 128.f);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      __nv_bfloat162 pair;
      std::memcpy(&pair, &pairs[p], sizeof pair);
      pair = __hsub2(pair, bias);
      std::memcpy(&pairs[p], &pair, sizeof pair);
    }
  }
}

// One block of a 16-row tile against one group of 8 rows of x: `xv` is lane (g, t)'s k 8t..8t+7
// of its x row (zeros for a row past M). c = w . x on the tensor cores (two k16 products), s = the
// block's sums of x (a product of ones with x; only where the block has an offset), then acc += d c
// + (off - bias d) s, two FFMA an output, with f_low, f_high the factors of rows g and g + 8
// (block_factors): acc[0], acc[1] row g with x rows 2t and 2t + 1 of the group, acc[2], acc[3]
// row g + 8. kOneRow (M = 1): x rows 2t + 1 are all past M, so acc[1] and acc[3] stay zero and are
// not computed (the other two outputs get the same FFMAs, so the same bits).
template <bool kBiased, bool kOneRow>
__device__ __forceinline__ void weights_as_a_product(const std::uint32_t (&first)[4], const std::uint32_t (&second)[4],
                                                     uint4 xv, float2 f_low, float2 f_high, float (&acc)[4]) {
  const std::uint32_t ones[4] = {kBf16OnePair, kBf16OnePair, kBf16OnePair, kBf16OnePair};
  const float zero[4] = {0.f, 0.f, 0.f, 0.f};
  float c[4], c2[4];
  sm80::mma_m16n8k16_bf16_into(c, first, xv.x, xv.y, zero);
  sm80::mma_m16n8k16_bf16_into(c2, second, xv.z, xv.w, c);
  float s[4] = {0.f, 0.f, 0.f, 0.f};  // s[0], s[1]: the block's sums of x rows 2t, 2t + 1 of the group
  if constexpr (kBiased) {
    float s1[4];
    sm80::mma_m16n8k16_bf16_into(s1, ones, xv.x, xv.y, zero);
    sm80::mma_m16n8k16_bf16_into(s, ones, xv.z, xv.w, s1);
  }
  acc[0] = fmaf(f_low.x, c2[0], fmaf(f_low.y, s[0], acc[0]));
  acc[2] = fmaf(f_high.x, c2[2], fmaf(f_high.y, s[0], acc[2]));
  if constexpr (!kOneRow) {
    acc[1] = fmaf(f_low.x, c2[1], fmaf(f_low.y, s[1], acc[1]));
    acc[3] = fmaf(f_high.x, c2[3], fmaf(f_high.y, s[1], acc[3]));
  }
}

// Block j of a layout=3 chunk for a lane: its A fragments and factors, then the product with
// each row group's x (load_x(r, j): the lane's 16 bytes of x for row group r and block j).
template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped, class LoadX>
__device__ __forceinline__ void weights_as_a_block(const std::uint32_t* words, const std::uint32_t* entries, int j,
                                                   LoadX load_x, float (&acc)[kRowGroups][4]) {
  constexpr bool kBiased = kType != GgufBlockType::q8_0;
  std::uint32_t a_first[4], a_second[4];
  weights_as_a_fragments<kType, kSwapped>(words, j, a_first, a_second);
  float2 f_low, f_high;  // the scales of rows g and g + 8 for this block
  block_factors<kType>(entries, j, f_low, f_high);
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r)
    weights_as_a_product<kBiased, kOneRow>(a_first, a_second, load_x(r, j), f_low, f_high, acc[r]);
}

// One chunk (4 blocks) of a layout=3 tile for a lane: its quants as words, its scale entries as
// words, the rows of x it brings (row_valid: g + 8r < M); load_x(r, j, block) returns its 16 bytes of
// x for row group r and block j of the chunk (`block` the block's index along K). Blocks past K,
// the padding of the last chunk, are skipped and read no x.
template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped, class LoadX>
__device__ __forceinline__ void weights_as_a_chunk(const std::uint32_t* words, const std::uint32_t* entries, int chunk,
                                                   int k_blocks, const bool (&row_valid)[kRowGroups], LoadX load_x,
                                                   float (&acc)[kRowGroups][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int block = 4 * chunk + j;
    if (block >= k_blocks) break;
    weights_as_a_block<kType, kRowGroups, kOneRow, kSwapped>(
        words, entries, j,
        [&](int r, int jj) { return row_valid[r] ? load_x(r, jj, block) : make_uint4(0, 0, 0, 0); }, acc);
  }
}

// A chunk for a caller whose every lane has a row of x to read (rung 07: a row past M reads row
// M - 1, since that column of the products is never stored), so no test for M's end;
// kWholeChunk: its 4 blocks are all inside K, so no test for K's end either.
template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped, bool kWholeChunk, class LoadX>
__device__ __forceinline__ void weights_as_a_chunk_every_row(const std::uint32_t* words, const std::uint32_t* entries,
                                                             int chunk, int k_blocks, LoadX load_x,
                                                             float (&acc)[kRowGroups][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int block = 4 * chunk + j;
    if (!kWholeChunk && block >= k_blocks) break;
    weights_as_a_block<kType, kRowGroups, kOneRow, kSwapped>(
        words, entries, j, [&](int r, int jj) { return load_x(r, jj, block); }, acc);
  }
}

// ---- layout=3 with x in fp16 (rung 08) ----
// Rung 08 keeps x in shared memory as fp16, scaled per row by a power of two, with the k of pairs
// 1 and 3 of every 8 (k % 8 in {2, 3, 6, 7}) divided by 16 more, and the sums of each block of x
// formed once (XStaging in gemv_x_resident_frame.cuh). Then a nibble pair decodes with one LOP3:
// pairs 0 and 2 as fp16 1024 + q from the nibbles where they lie, pairs 1 and 3 as 1024 + 16 q
// from the nibbles 4 bits up — no shift for those — and (1024 + 16 q) . x/16 = 64 x + q x. The
// block's product against x as stored is then the sum of q x plus 1024 times the sum of the
// stored x: the accumulator starts from minus that (and minus 8 times the block's sum of x in
// q4_0), so the products against ones and the offset FFMA of rungs 05-07 are gone.
constexpr std::uint32_t kF16BiasPair = 0x64006400u;  // fp16 (1024, 1024): ulp 1 in [1024, 2048)

// The 4 pairs of a lane's word of nibbles (row g or g + 8 of a block), pair i holding the block's
// k 8t + 2i and 8t + 2i + 1: one shift and four LOP3 for all of them.
template <bool kSwapped>
__device__ __forceinline__ void nibble_pairs_f16(std::uint32_t word, std::uint32_t (&pairs)[4]) {
  const std::uint32_t up = word >> 8;
  pairs[0] = and_or(word, 0x000F000Fu, kF16BiasPair);  // 1024 + q
  pairs[1] = and_or(word, 0x00F000F0u, kF16BiasPair);  // 1024 + 16 q
  pairs[2] = and_or(up, 0x000F000Fu, kF16BiasPair);
  pairs[3] = and_or(up, 0x00F000F0u, kF16BiasPair);
  if constexpr (kSwapped)
#pragma unroll
    for (int p = 0; p < 4; ++p) pairs[p] = swap_halves(pairs[p]);
}

// The pair of byte_floats as fp16 (exact).
__device__ __forceinline__ std::uint32_t byte_pair_f16(uint2 bytes, int i) {
  const float2 values = byte_floats(bytes, i);
  const __half2 pair = __floats2half2_rn(values.x, values.y);
  std::uint32_t out;
  std::memcpy(&out, &pair, sizeof out);
  return out;
}

// The A fragments of block j in fp16, laid out as weights_as_a_fragments lays out the bf16 ones
// (kSwapped, as there, exchanges the nibbles only: q8_0's bytes stay in order).
template <GgufBlockType kType, bool kSwapped>
__device__ __forceinline__ void weights_as_a_fragments_f16(const std::uint32_t* words, int j,
                                                           std::uint32_t (&first)[4], std::uint32_t (&second)[4]) {
  std::uint32_t low[4], high[4];  // the pairs of rows g and g + 8
  if constexpr (kType == GgufBlockType::q8_0) {
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      low[p] = byte_pair_f16(make_uint2(words[4 * j], words[4 * j + 1]), p);
      high[p] = byte_pair_f16(make_uint2(words[4 * j + 2], words[4 * j + 3]), p);
    }
  } else {
    nibble_pairs_f16<kSwapped>(words[2 * j], low);
    nibble_pairs_f16<kSwapped>(words[2 * j + 1], high);
  }
  first[0] = low[0];
  first[1] = high[0];
  first[2] = low[1];
  first[3] = high[1];
  second[0] = low[2];
  second[1] = high[2];
  second[2] = low[3];
  second[3] = high[3];
}

// The scales of block j for rows g (low) and g + 8 (high): (d, m) in q4_1, (d, 0) otherwise.
template <GgufBlockType kType>
__device__ __forceinline__ void block_scales(const std::uint32_t* entries, int j, float2& low, float2& high) {
  if constexpr (kType == GgufBlockType::q4_1) {
    __half2 first, second;
    std::memcpy(&first, &entries[2 * j], sizeof first);
    std::memcpy(&second, &entries[2 * j + 1], sizeof second);
    low = __half22float2(first);
    high = __half22float2(second);
  } else {
    const std::uint32_t pair = entries[j];
    __half2 d;
    std::memcpy(&d, &pair, sizeof d);
    const float2 both = __half22float2(d);
    low = make_float2(both.x, 0.f);
    high = make_float2(both.y, 0.f);
  }
}

// One block of a 16-row tile against one group of 8 rows of x in fp16: `xv` lane (g, t)'s 8 stored
// values of x (its row g of the group), `even` and `odd` the block's sums of x rows 2t and 2t + 1
// of the group (the columns of the lane's outputs), each {start, s, start, s}: the accumulator
// starts from minus the block's offset, so c is the block's sum of q x, and acc += d c (+ m s in
// q4_1). At M = 1 `even` is the accumulator fragment as loaded (its columns 2t + 1 are not stored).
template <GgufBlockType kType, bool kOneRow>
__device__ __forceinline__ void weights_as_a_product_f16(const std::uint32_t (&first)[4], const std::uint32_t (&second)[4],
                                                         uint4 xv, float4 even, float4 odd, float2 s_low, float2 s_high,
                                                         float (&acc)[4]) {
  float c[4], c2[4];
  const float start[4] = {even.x, kOneRow ? even.y : odd.x, even.z, kOneRow ? even.w : odd.z};
  sm80::mma_m16n8k16_f16_into(c, first, xv.x, xv.y, start);
  sm80::mma_m16n8k16_f16_into(c2, second, xv.z, xv.w, c);
  if constexpr (kType == GgufBlockType::q4_1) {
    acc[0] = fmaf(s_low.x, c2[0], fmaf(s_low.y, even.y, acc[0]));
    acc[2] = fmaf(s_high.x, c2[2], fmaf(s_high.y, even.y, acc[2]));
    if constexpr (!kOneRow) {
      acc[1] = fmaf(s_low.x, c2[1], fmaf(s_low.y, odd.y, acc[1]));
      acc[3] = fmaf(s_high.x, c2[3], fmaf(s_high.y, odd.y, acc[3]));
    }
  } else {
    acc[0] = fmaf(s_low.x, c2[0], acc[0]);
    acc[2] = fmaf(s_high.x, c2[2], acc[2]);
    if constexpr (!kOneRow) {
      acc[1] = fmaf(s_low.x, c2[1], acc[1]);
      acc[3] = fmaf(s_high.x, c2[3], acc[3]);
    }
  }
}

// Blocks of one chunk in fp16 (kWholeChunk: all 4 inside K, no test). load_x(r, block) as in the
// bf16 path; load_sums(r, block, even, odd) the float4 of x rows 2t and 2t + 1 of group r (not
// called in q8_0, whose accumulator starts at zero: its bytes carry no offset).
template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped, bool kWholeChunk, class LoadX,
          class LoadSums>
__device__ __forceinline__ void weights_as_a_chunk_f16(const std::uint32_t* words, const std::uint32_t* entries,
                                                       int chunk, int k_blocks, LoadX load_x, LoadSums load_sums,
                                                       float (&acc)[kRowGroups][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int block = 4 * chunk + j;
    if (!kWholeChunk && block >= k_blocks) break;
    std::uint32_t a_first[4], a_second[4];
    weights_as_a_fragments_f16<kType, kSwapped>(words, j, a_first, a_second);
    float2 s_low, s_high;
    block_scales<kType>(entries, j, s_low, s_high);
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) {
      float4 even = make_float4(0.f, 0.f, 0.f, 0.f), odd = even;
      if constexpr (kType != GgufBlockType::q8_0) load_sums(r, block, even, odd);
      weights_as_a_product_f16<kType, kOneRow>(a_first, a_second, load_x(r, j, block), even, odd, s_low, s_high,
                                               acc[r]);
    }
  }
}

// The bytes of one chunk (16 rows x 128 k) of layout=3 as the bulk-stream rungs (06, 07) copy it:
// a lane's quants (32 lanes of them), and the scale entries of the 8 row groups.
template <GgufBlockType kType>
struct ChunkBytes {
  static constexpr int kQuantVectors = kType == GgufBlockType::q8_0 ? 4 : 2;  // 16-byte vectors a lane
  static constexpr int kScaleVectors = kType == GgufBlockType::q4_1 ? 2 : 1;  // 16-byte vectors a row group
  static constexpr int kQuants = 32 * kQuantVectors * 16;
  static constexpr int kScales = 8 * kScaleVectors * 16;
};

// The lane's quants and scale entries of one chunk, as words.
template <GgufBlockType kType>
struct LaneChunk {
  std::uint32_t words[4 * ChunkBytes<kType>::kQuantVectors];
  std::uint32_t entries[4 * ChunkBytes<kType>::kScaleVectors];
};

// The chunk of a stage in shared memory that consumer warp `warp` (of kWarps) of a bulk-stream
// rung (06, 07) takes, for lane `lane`: the stage holds kWarps chunks of quants, then their scale
// entries (ChunkBytes); the lane reads its quants and its row group's entries with LDS.128.
template <GgufBlockType kType, int kWarps>
__device__ __forceinline__ LaneChunk<kType> read_stage_chunk(const std::uint8_t* stage, int warp, int lane) {
  constexpr int kQuantVectors = ChunkBytes<kType>::kQuantVectors, kScaleVectors = ChunkBytes<kType>::kScaleVectors;
  const int group = lane >> 2;
  const uint4* lane_quants = reinterpret_cast<const uint4*>(stage) + (warp * 32 + lane) * kQuantVectors;
  const uint4* group_scales = reinterpret_cast<const uint4*>(stage + kWarps * ChunkBytes<kType>::kQuants) +
                              (warp * 8 + group) * kScaleVectors;
  uint4 quant_vectors[kQuantVectors], scale_vectors[kScaleVectors];
#pragma unroll
  for (int v = 0; v < kQuantVectors; ++v) quant_vectors[v] = lane_quants[v];
#pragma unroll
  for (int v = 0; v < kScaleVectors; ++v) scale_vectors[v] = group_scales[v];
  LaneChunk<kType> chunk;
  std::memcpy(chunk.words, quant_vectors, sizeof chunk.words);
  std::memcpy(chunk.entries, scale_vectors, sizeof chunk.entries);
  return chunk;
}

// The stage's chunk (read_stage_chunk) multiplied as weights_as_a_chunk does.
template <GgufBlockType kType, int kRowGroups, bool kOneRow, bool kSwapped, int kWarps, class LoadX>
__device__ __forceinline__ void weights_as_a_stage_chunk(const std::uint8_t* stage, int warp, int lane, int chunk,
                                                         int k_blocks, const bool (&row_valid)[kRowGroups],
                                                         LoadX load_x, float (&acc)[kRowGroups][4]) {
  const LaneChunk<kType> lane_chunk = read_stage_chunk<kType, kWarps>(stage, warp, lane);
  weights_as_a_chunk<kType, kRowGroups, kOneRow, kSwapped>(lane_chunk.words, lane_chunk.entries, chunk, k_blocks,
                                                           row_valid, load_x, acc);
}

// The end of a layout=3 kernel: the kWarps warps' partial sums meet in shared memory (`partial`:
// kWarps x kRowGroups x 32 x 4 floats); the block's first kThreads threads then write one output
// each (the sum over the warps in warp order: the same bits whatever the rung).
template <int kWarps, int kRowGroups, int kThreads>
__device__ __forceinline__ void weights_as_a_reduce_and_store(const float (&acc)[kRowGroups][4], bool holds_partial,
                                                              float* partial, int m_rows, int n_cols, int tile,
                                                              __nv_bfloat16* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (holds_partial)
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[((warp * kRowGroups + r) * 32 + lane) * 4 + e] = acc[r][e];
  __syncthreads();
  for (int index = threadIdx.x; index < kRowGroups * 128; index += kThreads) {
    const int r = index / 128, l = (index / 4) % 32, e = index % 4;
    const int column = 16 * tile + (l >> 2) + 8 * (e >> 1);
    const int row = 8 * r + 2 * (l & 3) + (e & 1);
    if (row >= m_rows || column >= n_cols) continue;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[((w * kRowGroups + r) * 32 + l) * 4 + e];
    y[static_cast<std::size_t>(row) * n_cols + column] = __float2bfloat16(sum);
  }
}

// x's A fragments for block `block`: lane (g, t) reads k 8t..8t+7 of rows g and g + 8 (16 bytes
// each; rows past M read nothing), and the block's k 8t..8t+3 go to the first k16's slots, 8t+4..
// 8t+7 to the second's.
struct BlockA {
  std::uint32_t first[4], second[4];
};

__device__ __forceinline__ BlockA load_block_a(const __nv_bfloat16* x_low, const __nv_bfloat16* x_high, bool row_low,
                                               bool row_high, int block) {
  const std::size_t k0 = static_cast<std::size_t>(block) * kGgufBlockWeights;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const uint4 xl = row_low ? __ldg(reinterpret_cast<const uint4*>(x_low + k0)) : zero;
  const uint4 xh = row_high ? __ldg(reinterpret_cast<const uint4*>(x_high + k0)) : zero;
  return BlockA{{xl.x, xh.x, xl.y, xh.y}, {xl.z, xh.z, xl.w, xh.w}};
}

// s: the block's sum of x for rows g (s[0], s[1]) and g + 8 (s[2], s[3]), one mma against ones.
__device__ __forceinline__ void block_sums(const BlockA& a, float (&s)[4]) {
  s[0] = s[1] = s[2] = s[3] = 0.f;
  sm80::mma_m16n8k16_bf16(s, a.first, kBf16OnePair, kBf16OnePair);
  sm80::mma_m16n8k16_bf16(s, a.second, kBf16OnePair, kBf16OnePair);
}

// One block of one tile: the lane's B fragments b[4] (pairs of k 8t+2i, +1), the products of both
// k16 halves, then acc += d c + (off - bias d) s for columns 2t (f0) and 2t + 1 (f1).
template <bool kUpperRows>
__device__ __forceinline__ void block_product(const BlockA& a, const std::uint32_t (&b)[4], const float (&s)[4],
                                              float2 f0, float2 f1, float (&acc)[4]) {
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  sm80::mma_m16n8k16_bf16(c, a.first, b[0], b[1]);
  sm80::mma_m16n8k16_bf16(c, a.second, b[2], b[3]);
  // Two FFMA an output: written as acc += d c + e s the compiler must round d c + e s first (three
  // instructions: it may not reassociate floating-point sums).
  acc[0] = fmaf(f0.x, c[0], fmaf(f0.y, s[0], acc[0]));
  acc[1] = fmaf(f1.x, c[1], fmaf(f1.y, s[1], acc[1]));
  if constexpr (kUpperRows) {
    acc[2] = fmaf(f0.x, c[2], fmaf(f0.y, s[2], acc[2]));
    acc[3] = fmaf(f1.x, c[3], fmaf(f1.y, s[3], acc[3]));
  }
}

// The B fragments of block j from a lane's quants of a tile (q4: 4 words, word j; q8_0: 8 words,
// words 2j and 2j + 1).
template <GgufBlockType kType, bool kSwapped>
__device__ __forceinline__ void b_fragments(const std::uint32_t* lane_quants, int j, std::uint32_t (&b)[4]) {
  if constexpr (kType == GgufBlockType::q8_0) {
    const uint2 bytes = make_uint2(lane_quants[2 * j], lane_quants[2 * j + 1]);
#pragma unroll
    for (int p = 0; p < 4; ++p) b[p] = byte_pair(bytes, p);
  } else {
#pragma unroll
    for (int p = 0; p < 4; ++p) b[p] = nibble_pair<kSwapped>(lane_quants[j], p);
  }
}

// The warps' partial sums meet in shared memory (`partial`: kWarps x kTiles x 32 x 4 floats);
// thread e of a tile writes one output.
template <int kWarps, int kTiles>
__device__ __forceinline__ void reduce_and_store(const float (&acc)[kTiles][4], float* partial, int m_rows,
                                                 int n_cols, int first_tile, __nv_bfloat16* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[((warp * kTiles + i) * 32 + lane) * 4 + e] = acc[i][e];
  __syncthreads();
  for (int index = threadIdx.x; index < kTiles * 128; index += kWarps * 32) {
    const int i = index / 128, l = (index / 4) % 32, e = index % 4;
    const int row = (l >> 2) + 8 * (e >> 1);
    const int column = (first_tile + i) * 8 + 2 * (l & 3) + (e & 1);
    if (row >= m_rows || column >= n_cols) continue;
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[((w * kTiles + i) * 32 + l) * 4 + e];
    y[static_cast<std::size_t>(row) * n_cols + column] = __float2bfloat16(sum);
  }
}

// ---- host side: what the launches of rungs 03-05 share ----

// The argument rules of a fragment-layout rung (`rung` names it in the messages, `layout` says
// which repack wrote quants and scales): M in [1, 16], N >= 1, K whole blocks; x, quants, scales
// and y non-null; x, quants and scales 16-byte aligned.
inline void check_fragment_args(const GgufGemvArgs& a, const char* rung, const char* layout) {
  require(a.m >= 1 && a.m <= kGgufGemvMaxRows && a.n >= 1 && a.k >= kGgufBlockWeights &&
              a.k % kGgufBlockWeights == 0,
          "GGUF GEMV ({}): M must be in [1, {}], N >= 1 and K a positive multiple of 32 (got {}x{}x{})", rung,
          kGgufGemvMaxRows, a.m, a.n, a.k);
  require(a.x != nullptr && a.quants != nullptr && a.scales != nullptr && a.y != nullptr,
          "GGUF GEMV ({}): x, quants, scales and y must be non-null (the fragment layout: {})", rung, layout);
  require(reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(a.quants) % 16 == 0 &&
              reinterpret_cast<std::uintptr_t>(a.scales) % 16 == 0,
          "GGUF GEMV ({}): x, quants and scales must be 16-byte aligned (each is read in 16-byte pieces)", rung);
}

// Calls launch(std::integral_constant<GgufBlockType, T>{}) for `type` (q4_0, q4_1 or q8_0): the
// kernels are templates on the block type. kc::Error for any other type.
template <class Launch>
void dispatch_block_type(GgufBlockType type, const char* rung, Launch&& launch) {
  switch (type) {
    case GgufBlockType::q4_0: launch(std::integral_constant<GgufBlockType, GgufBlockType::q4_0>{}); break;
    case GgufBlockType::q4_1: launch(std::integral_constant<GgufBlockType, GgufBlockType::q4_1>{}); break;
    case GgufBlockType::q8_0: launch(std::integral_constant<GgufBlockType, GgufBlockType::q8_0>{}); break;
    default:
      throw Error(fmt::format("GGUF GEMV ({}): ggml type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", rung,
                              static_cast<int>(type)));
  }
}

// The batch rungs (09, 10) have an instance for each token-tile count: gemm_layout.hpp's dispatch.
using kc::stage3::dispatch_token_tiles;

// The launch of a rung on the 8-column tiles of layout=2 (rungs 03 and 04): checks the arguments,
// then calls launch(type, tiles_per_cta, upper_rows, tiles) with three compile-time choices — the
// block type; two tiles a CTA when there are enough tiles to fill the GPU several times over, one
// otherwise (so that narrow outputs still spread over every SM); the fragments' second 8 rows for
// M > 8 — and the tile count.
template <class Launch>
void launch_tile_rung(const GgufGemvArgs& a, const char* rung, Launch&& launch) {
  check_fragment_args(a, rung, "repack_gguf_blocks_for_mma, layout=2");
  const int tiles = (a.n + 7) / 8;
  const bool two_tiles = tiles >= 8 * current_device_sm_count();
  dispatch_block_type(a.type, rung, [&](auto type) {
    const auto with_rows = [&](auto tiles_per_cta) {
      if (a.m > 8)
        launch(type, tiles_per_cta, std::true_type{}, tiles);
      else
        launch(type, tiles_per_cta, std::false_type{}, tiles);
    };
    if (two_tiles)
      with_rows(std::integral_constant<int, 2>{});
    else
      with_rows(std::integral_constant<int, 1>{});
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

// The instance for M rows of x that every rung on the 16-row tiles of layout=3 takes (the GGUF
// rungs 05-08, the int4 rungs 01, 02, 04 and 05; rungs that must write the same bits must choose
// alike): launch(row_groups, one_row) with two groups of 8 rows of x for M > 8, one otherwise, and
// at M = 1 the instance without the FFMAs of x rows past M (kOneRow).
template <class Launch>
void dispatch_row_groups(int m, Launch&& launch) {
  if (m > 8)
    launch(std::integral_constant<int, 2>{}, std::false_type{});
  else if (m > 1)
    launch(std::integral_constant<int, 1>{}, std::false_type{});
  else
    launch(std::integral_constant<int, 1>{}, std::true_type{});
}

// The launch of a rung on the 16-row tiles of layout=3 (rungs 05 and 06): checks the arguments,
// then calls launch(type, row_groups, one_row) with the block type and dispatch_row_groups' choice.
template <class Launch>
void launch_weights_as_a_rung(const GgufGemvArgs& a, const char* rung, Launch&& launch) {
  check_fragment_args(a, rung, "repack_gguf_blocks_for_mma16, layout=3");
  dispatch_block_type(a.type, rung, [&](auto type) {
    dispatch_row_groups(a.m, [&](auto row_groups, auto one_row) { launch(type, row_groups, one_row); });
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3::gguf_mma
