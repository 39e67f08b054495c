// quant/int4/gemv_int4_x_resident.cuh — the int4 GEMV's links (rungs 04 and 05): the frame of
// quant/gemv_x_resident_frame.cuh on 4-bit groups. The weights' Format (Int4Chunks: rungs 01 and
// 02's chunk arithmetic on x in bf16; Int4F16Chunks: the same groups on x in fp16 as the GGUF
// rung 08 stages it), the link's checks, and its launch for either staging of x. Included by the
// two rungs' .cu files only.
#pragma once

#include <type_traits>

#include "kc/stage3/gemv_int4_args.hpp"
#include "quant/gemv_x_resident_frame.cuh"
#include "quant/int4/gemv_int4_groups.cuh"

namespace kc::stage3 {
namespace {

// The frame's Format for 4-bit groups of kBlocksPerScale blocks (G = 32 kBlocksPerScale, 4 from
// G = 128): a chunk in the ring is the lanes' quants (32 bytes a lane), then the 8 row groups'
// scale entries (kEntries of 4 bytes each), the prepared layout's chunk as it lies in memory.
template <int kBlocksPerScale>
struct Int4Chunks {
  // chunk_product tests K's end once a group, not a block: no instance without that test.
  static constexpr bool whole_chunks() { return false; }
  static constexpr int kQuants = kInt4ChunkQuantBytes;
  static constexpr int kScales = int4_groups::kChunkScaleBytes<kBlocksPerScale>;
#if KC_STAGE3_SM90A
  static __device__ __forceinline__ int4_groups::LaneChunk<kBlocksPerScale> read(const std::uint8_t* stage, int warp,
                                                                                 int lane) {
    return int4_groups::read_stage_chunk<kBlocksPerScale, kConsumerWarps>(stage, warp, lane, lane >> 2);
  }
  template <int kRowGroups, bool kOneRow, bool kSwapped, bool kWholeChunk, class LoadX>
  static __device__ __forceinline__ void multiply(const int4_groups::LaneChunk<kBlocksPerScale>& lane_chunk, int chunk,
                                                  int k_blocks, LoadX load_x, float (&acc)[kRowGroups][4]) {
    constexpr Int4Flaw kFlaw = kSwapped ? Int4Flaw::swapped_nibbles : Int4Flaw::none;
    int4_groups::chunk_product<kBlocksPerScale, kRowGroups, kOneRow, kFlaw>(lane_chunk.words, lane_chunk.entries,
                                                                            chunk, k_blocks, load_x, acc);
  }
#endif
};

// The groups as rung 05 reads them: x in fp16 as the GGUF rung 08 stages it (XStaging::f16_scaled:
// each row scaled by a power of two, the k of pairs 1 and 3 of every 8 divided by 16 more, and
// each block's sums formed once — the staging of q4_1, whose nibble words the prepared groups
// share byte for byte), the nibbles decoded to fp16 1024 + q and 1024 + 16 q by rung 08's LOP3s.
// Per block the accumulator starts from minus 1024 times the block's sum of stored x, so a group's
// products chained over its blocks give c = sum q x; with S the group's sum of x as the products see
// it, acc += s c - z s S: two FFMA an output and group, and no products against ones (rungs 01,
// 02 and 04 spend two HMMA a block on S).
template <int kBlocksPerScale>
struct Int4F16Chunks : Int4Chunks<kBlocksPerScale> {
  static constexpr GgufBlockType kBlockType = GgufBlockType::q4_1;  // the staging of x it reads
#if KC_STAGE3_SM90A
  template <int kRowGroups, bool kOneRow, bool kSwapped, bool kWholeChunk, class LoadX, class LoadSums>
  static __device__ __forceinline__ void multiply_f16(const int4_groups::LaneChunk<kBlocksPerScale>& lane_chunk,
                                                      int chunk, int k_blocks, LoadX load_x, LoadSums load_sums,
                                                      float (&acc)[kRowGroups][4]) {
    constexpr int kGroupsPerChunk = 4 / kBlocksPerScale;
#pragma unroll
    for (int u = 0; u < kGroupsPerChunk; ++u) {
      if (4 * chunk + u * kBlocksPerScale >= k_blocks) break;
      float c[kRowGroups][4], seen[kRowGroups][2];
#pragma unroll
      for (int b = 0; b < kBlocksPerScale; ++b) {
        const int j = u * kBlocksPerScale + b, block = 4 * chunk + j;
        std::uint32_t a_first[4], a_second[4];
        gguf_mma::weights_as_a_fragments_f16<GgufBlockType::q4_1, kSwapped>(lane_chunk.words, j, a_first, a_second);
#pragma unroll
        for (int r = 0; r < kRowGroups; ++r) {
          float4 even, odd;
          load_sums(r, block, even, odd);
          // {start, S, start, S} of x rows 2t and 2t + 1; at M = 1 `even` alone, as rung 08 loads it.
          const float start[4] = {even.x, kOneRow ? even.y : odd.x, even.z, kOneRow ? even.w : odd.z};
          float from[4];  // at M = 1 columns 2t + 1 are never stored: no adds for them
#pragma unroll
          for (int e = 0; e < 4; ++e) from[e] = b == 0 ? start[e] : (kOneRow && e % 2 == 1) ? c[r][e] : c[r][e] + start[e];
          seen[r][0] = b == 0 ? even.y : seen[r][0] + even.y;
          seen[r][1] = b == 0 ? odd.y : seen[r][1] + odd.y;
          const uint4 xv = load_x(r, j, block);
          float half_way[4];
          sm80::mma_m16n8k16_f16_into(half_way, a_first, xv.x, xv.y, from);
          sm80::mma_m16n8k16_f16_into(c[r], a_second, xv.z, xv.w, half_way);
        }
      }
      const float2 f_low = int4_groups::zero_point_factors(lane_chunk.entries[2 * u]);
      const float2 f_high = int4_groups::zero_point_factors(lane_chunk.entries[2 * u + 1]);
#pragma unroll
      for (int r = 0; r < kRowGroups; ++r) {
        acc[r][0] = fmaf(f_low.x, c[r][0], fmaf(f_low.y, seen[r][0], acc[r][0]));
        acc[r][2] = fmaf(f_high.x, c[r][2], fmaf(f_high.y, seen[r][0], acc[r][2]));
        if constexpr (!kOneRow) {
          acc[r][1] = fmaf(f_low.x, c[r][1], fmaf(f_low.y, seen[r][1], acc[r][1]));
          acc[r][3] = fmaf(f_high.x, c[r][3], fmaf(f_high.y, seen[r][1], acc[r][3]));
        }
      }
    }
  }
#endif
};

// A stage of the ring for groups of `group_size` (the same chunks whatever x's staging).
constexpr int stage_bytes(int group_size) {
  switch (int4_blocks_per_scale(group_size)) {
    case 1: return ring_stage_bytes<Int4Chunks<1>>();
    case 2: return ring_stage_bytes<Int4Chunks<2>>();
    default: return ring_stage_bytes<Int4Chunks<4>>();
  }
}

// The rung in messages: "rung 04, x resident" or "rung 05, x as fp16"; and with the op's name.
constexpr const char* int4_link_rung(XStaging staging) {
  return staging == XStaging::bf16_as_read ? "rung 04, x resident" : "rung 05, x as fp16";
}
constexpr const char* int4_link_name(XStaging staging) {
  return staging == XStaging::bf16_as_read ? "int4 GEMV (rung 04, x resident)" : "int4 GEMV (rung 05, x as fp16)";
}

// Whether M rows of x of K (and, for rung 05, their block sums) fit next to the ring.
inline bool int4_x_fits(int m, int k, int group_size, XStaging staging) {
  if (m < 1 || k < 1 || !int4_group_size_supported(group_size)) return false;
  return dynamic_smem_bytes(stage_bytes(group_size), m, k, staging) <= kGgufGemv07MaxDynamicSmem;
}

// The link's tiles and the checks of everything the kernel assumes: each weight's arguments as rung
// 02 takes them, then the frame's (the prologue, x next to the ring).
inline Link make_int4_link(const Int4GemvLinkArgs& a, XStaging staging) {
  const char* who = int4_link_name(staging);
  check_link_weight_count(a.weights, who);
  Link g;
  int tiles = 0;
  for (int w = 0; w < a.weights; ++w) {
    int4_groups::check_args(gemv_int4_link_weight_args(a, w), int4_link_rung(staging));
    const Int4GemvLinkWeight& weight = a.weight[w];
    add_link_weight(g, w, weight.quants, weight.scales, weight.y, weight.n, tiles);
  }
  end_link_weights(g, a.weights, tiles);
  finish_link(a, dynamic_smem_bytes(stage_bytes(a.group_size), a.m, a.k, staging), who,
              "run rung 02, which streams x with the weights", g);
  return g;
}

template <XStaging kStaging, bool kSwapped>
void launch_int4(const Int4GemvLinkArgs& a, cudaStream_t stream) {
  require(gemv_gguf_06_runs_here(),
          "{} needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; this build or GPU has none: "
          "run rung 01, as kc::stage3::int4_gemv does",
          int4_link_name(kStaging));
  const Link g = make_int4_link(a, kStaging);
  // Rungs 01 and 02's instance for M (they must match to write the same bits).
  int4_groups::dispatch_blocks_per_scale(a.group_size, [&](auto blocks_per_scale) {
    constexpr int kBlocksPerScale = decltype(blocks_per_scale)::value;
    using Format = std::conditional_t<kStaging == XStaging::f16_scaled, Int4F16Chunks<kBlocksPerScale>,
                                      Int4Chunks<kBlocksPerScale>>;
    gguf_mma::dispatch_row_groups(a.m, [&](auto row_groups, auto one_row) {
      launch_for_prologue<Format, decltype(row_groups)::value, decltype(one_row)::value, kSwapped, kStaging>(
          g, a.prologue, a.spread_over_sms, stream, nullptr);
    });
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

inline Int4GemvLinkArgs plain_int4_link(const Int4GemvArgs& args) {
  Int4GemvLinkArgs link;
  link.m = args.m;
  link.k = args.k;
  link.group_size = args.group_size;
  link.x = args.x;
  link.weights = 1;
  link.weight[0] = {args.quants, args.scales, args.y, args.n};
  return link;
}

}  // namespace
}  // namespace kc::stage3
