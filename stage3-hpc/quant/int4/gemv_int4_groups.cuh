// quant/int4/gemv_int4_groups.cuh — the arithmetic of the int4 GEMV's rungs (01, 02, 04): how a
// lane multiplies one chunk (16 rows x 128 k) of the prepared layout (kc/stage3/gemv_int4_args.hpp)
// with its rows of x, a group at a time. The rungs differ only in where the chunk and x come from
// (rung 01: registers loaded a chunk ahead, x from global memory; rung 02: a shared-memory ring
// filled by the copy engine, x with it; rung 04: the same ring, x kept in shared memory).
//
// Per group of the chunk (G <= 128: 128 / G of them; G > 128: the chunk lies inside one group):
//   c = sum x (128 + q), S = sum x    over the group's blocks in the chunk, on the tensor cores
//                                     (two k16 products each a block, chained in FP32)
//   acc += s c - (128 + z) s S        two FFMA an output, (s, z) the group's entry of that row
// The nibbles become bf16 128 + q with the GGUF rungs' decode (quant/gemv_gguf_mma.cuh: the
// prepared quants are their layout=3 q4 words byte for byte).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "arch/sm80/mma.cuh"
#include "kc/stage3/gemv_int4_args.hpp"
#include "quant/gemv_gguf_mma.cuh"

namespace kc::stage3::int4_groups {

// Scale entries a row group has in a chunk: (s, z) for rows g and g + 8 of each group.
template <int kBlocksPerScale>
constexpr int kEntries = 2 * (4 / kBlocksPerScale);

// The bytes of one chunk's scale entries as the prepared layout stores them (and the bulk-stream
// rings copy them, after the chunk's kInt4ChunkQuantBytes of quants): 8 row groups x kEntries
// entries of 4 bytes.
template <int kBlocksPerScale>
constexpr int kChunkScaleBytes = 8 * kEntries<kBlocksPerScale> * 4;

// The factors of a group's c and S for one row: (s, -(128 + z) s) from its entry half2 (s, z) — in
// FP32 exactly (s has 11 significant bits, 128 + z at most 8). The flawed instances of the
// negative controls make their one mistake here or in which entry they pass.
template <Int4Flaw kFlaw>
__device__ __forceinline__ float2 group_factors(std::uint32_t entry_bits) {
  __half2 sz;
  std::memcpy(&sz, &entry_bits, sizeof sz);
  const float2 f = __half22float2(sz);
  float s = f.x;
  const float z = kFlaw == Int4Flaw::zero_point_ignored ? 8.f : f.y;
  if constexpr (kFlaw == Int4Flaw::scale_applied_twice) s *= f.x;
  return make_float2(s, -(128.f + z) * s);
}

// The factors of a group's c = sum q x and S = sum x for one row when the nibbles decode to q
// itself (rung 05's fp16 decode, whose offset the accumulator's start removes): (s, -z s).
__device__ __forceinline__ float2 zero_point_factors(std::uint32_t entry_bits) {
  __half2 sz;
  std::memcpy(&sz, &entry_bits, sizeof sz);
  const float2 f = __half22float2(sz);
  return make_float2(f.x, -f.y * f.x);
}

// One chunk for a lane: `words` its 8 words of quants (word 2j + h: rows g + 8h of block j),
// `entries` its row group's kEntries<kBlocksPerScale> scale entries, `chunk` the chunk's index
// along K; load_x(r, j, block) returns the lane's 16 bytes of x for row group r and block j of the
// chunk (`block` its index along K; zeros for rows past M). Groups past K (the last chunk's
// padding) are skipped: K is a multiple of G, so a group lies inside K or wholly past it.
template <int kBlocksPerScale, int kRowGroups, bool kOneRow, Int4Flaw kFlaw, class LoadX>
__device__ __forceinline__ void chunk_product(const std::uint32_t* words, const std::uint32_t* entries, int chunk,
                                              int k_blocks, LoadX load_x, float (&acc)[kRowGroups][4]) {
  constexpr int kGroupsPerChunk = 4 / kBlocksPerScale;
  constexpr bool kSwapped = kFlaw == Int4Flaw::swapped_nibbles;
  const std::uint32_t ones[4] = {gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair, gguf_mma::kBf16OnePair,
                                 gguf_mma::kBf16OnePair};
#pragma unroll
  for (int u = 0; u < kGroupsPerChunk; ++u) {
    if (4 * chunk + u * kBlocksPerScale >= k_blocks) break;
    float c[kRowGroups][4], sums[kRowGroups][4];
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[r][e] = sums[r][e] = 0.f;
#pragma unroll
    for (int b = 0; b < kBlocksPerScale; ++b) {
      const int j = u * kBlocksPerScale + b;
      std::uint32_t a_first[4], a_second[4];
      gguf_mma::weights_as_a_fragments<GgufBlockType::q4_1, kSwapped>(words, j, a_first, a_second);
#pragma unroll
      for (int r = 0; r < kRowGroups; ++r) {
        const uint4 xv = load_x(r, j, 4 * chunk + j);
        float half_way[4];
        sm80::mma_m16n8k16_bf16_into(half_way, a_first, xv.x, xv.y, c[r]);
        sm80::mma_m16n8k16_bf16_into(c[r], a_second, xv.z, xv.w, half_way);
        sm80::mma_m16n8k16_bf16_into(half_way, ones, xv.x, xv.y, sums[r]);
        sm80::mma_m16n8k16_bf16_into(sums[r], ones, xv.z, xv.w, half_way);
      }
    }
    // The group's entries for rows g and g + 8; the flawed "next group" instance reads the next
    // group's (wrapping inside the chunk).
    const int entry_group = kFlaw == Int4Flaw::next_group_scales ? (u + 1) % kGroupsPerChunk : u;
    const float2 f_low = group_factors<kFlaw>(entries[2 * entry_group]);
    const float2 f_high = group_factors<kFlaw>(entries[2 * entry_group + 1]);
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r) {
      // sums[r][0], [1]: the group's sums of x rows 2t and 2t + 1 (every row of the ones is alike).
      acc[r][0] = fmaf(f_low.x, c[r][0], fmaf(f_low.y, sums[r][0], acc[r][0]));
      acc[r][2] = fmaf(f_high.x, c[r][2], fmaf(f_high.y, sums[r][0], acc[r][2]));
      if constexpr (!kOneRow) {
        acc[r][1] = fmaf(f_low.x, c[r][1], fmaf(f_low.y, sums[r][1], acc[r][1]));
        acc[r][3] = fmaf(f_high.x, c[r][3], fmaf(f_high.y, sums[r][1], acc[r][3]));
      }
    }
  }
}

// A lane's part of one chunk in shared memory, as the bulk-stream rungs (02, 04) find it: a stage
// holds kWarps chunks of quants (32 lanes x 32 bytes each), then their scale entries (8 row groups
// x kEntries entries of 4 bytes each); consumer warp `warp` takes chunk `warp` of the stage, lane
// `lane` its 32 bytes of quants (two LDS.128) and its row group's (`group`, lane / 4) entries (LDS.64
// at G >= 128, LDS.128 below).
template <int kBlocksPerScale>
struct LaneChunk {
  std::uint32_t words[8];
  std::uint32_t entries[kEntries<kBlocksPerScale>];
};

template <int kBlocksPerScale, int kWarps>
__device__ __forceinline__ LaneChunk<kBlocksPerScale> read_stage_chunk(const std::uint8_t* stage, int warp, int lane,
                                                                       int group) {
  constexpr int kEntryCount = kEntries<kBlocksPerScale>;
  LaneChunk<kBlocksPerScale> chunk;
  const uint4* lane_quants = reinterpret_cast<const uint4*>(stage) + (warp * 32 + lane) * 2;
  const uint4 quant_vectors[2] = {lane_quants[0], lane_quants[1]};
  std::memcpy(chunk.words, quant_vectors, sizeof chunk.words);
  const std::uint8_t* group_entries = stage + kWarps * kInt4ChunkQuantBytes + (warp * 8 + group) * kEntryCount * 4;
  if constexpr (kEntryCount == 2) {
    const uint2 e = *reinterpret_cast<const uint2*>(group_entries);
    chunk.entries[0] = e.x;
    chunk.entries[1] = e.y;
  } else {
#pragma unroll
    for (int v = 0; v < kEntryCount / 4; ++v) {
      const uint4 e = reinterpret_cast<const uint4*>(group_entries)[v];
      chunk.entries[4 * v] = e.x;
      chunk.entries[4 * v + 1] = e.y;
      chunk.entries[4 * v + 2] = e.z;
      chunk.entries[4 * v + 3] = e.w;
    }
  }
  return chunk;
}

// The argument rules the rungs share (`rung` names the rung in the messages): M in [1, max_rows]
// (16 for rungs 01 and 02, 64 for rung 03), N and K >= 1, a group size of 32, 64 or a multiple of
// 128 that divides K; x, quants, scales and y non-null, x, quants and scales 16-byte aligned. No
// CUDA call.
inline void check_args(const Int4GemvArgs& a, const char* rung, int max_rows = kInt4GemvMaxRows) {
  require(a.m >= 1 && a.m <= max_rows, "int4 GEMV ({}): M must be in [1, {}] (got {})", rung, max_rows, a.m);
  check_int4_group_shape(a.n, a.k, a.group_size, rung);
  require(a.x != nullptr && a.quants != nullptr && a.scales != nullptr && a.y != nullptr,
          "int4 GEMV ({}): x, quants, scales and y must be non-null (quants and scales as prepare_int4_groups "
          "writes them)",
          rung);
  require(reinterpret_cast<std::uintptr_t>(a.x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(a.quants) % 16 == 0 &&
              reinterpret_cast<std::uintptr_t>(a.scales) % 16 == 0,
          "int4 GEMV ({}): x, quants and scales must be 16-byte aligned (each is read or copied in 16-byte pieces)",
          rung);
}

// launch(blocks_per_scale): G's 32-weight blocks a scale entry (1, 2, or 4 for a chunk holding
// one group) as a compile-time constant, the choice every int4 rung's launch makes first.
template <class Launch>
void dispatch_blocks_per_scale(int group_size, Launch&& launch) {
  switch (int4_blocks_per_scale(group_size)) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    default: launch(std::integral_constant<int, 4>{}); break;
  }
}

}  // namespace kc::stage3::int4_groups
