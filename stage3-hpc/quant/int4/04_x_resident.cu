// Rung 04 of the int4 GEMV — a link of the decode chain: the GGUF GEMV's rung 07 frame on 4-bit
// groups. x is kept in shared memory with the norm or the activation before the projection done on
// the way in, the weights are streamed before the previous kernel ends, the CTAs are persistent.
//
// Idea: rungs 01 and 02 read the groups at 74-89% of a copy of the same bytes when they run alone
// (stage-3 README), but the engine's decode step is a chain of kernels, and there a lone GEMV pays
// what the GGUF GEMV's rung 07 header lists: the RMSNorm before q|k|v and gate|up and the SwiGLU
// before down run as kernels of their own, every launch waits for the kernel before it to end
// before it asks for its first byte, and short CTAs fill and drain their ring once each. In the
// engine's first measurement (stage-4 README) the 8B shape's step on int4 groups ran at 39.7% of
// the copy bandwidth, against 86.3% for its fused bf16 step. Rung 07 answered those costs for the
// GGUF blocks; its frame (quant/gemv_x_resident_frame.cuh) takes the weights' format as a template
// parameter, and this rung is that frame on the int4 groups' prepared layout.
//
// What changed from rung 02: the frame, all of it rung 07's — x staged once into shared memory by
// the consumer warps (with the RMSNorm's weight or silu(gate) . up applied, the 1 / RMS factor on
// the finished sums), the ring carrying only quants and scale entries, the producer starting on the
// weights while the kernel before still runs (a programmatic dependent), as many CTAs as fit each
// taking tiles blockIdx.x, blockIdx.x + gridDim.x, ..., up to three weights sharing x in one
// launch, y += where the residual stream takes it. The chunk's arithmetic is rungs 01 and 02's
// (gemv_int4_groups.cuh: a group's blocks summed on the tensor cores, its scale and zero point
// applied once), and the chunks of a tile go to the same warps in the same order with the warps'
// sums added in the same order: without a prologue and with beta = 0 it writes rungs 01 and 02's
// bits (a GPU test holds it to that). Rows of x past M read row M - 1 instead of zeros, as in
// rung 07: those columns of the products are never stored.
//
// Expected limiter: the DRAM stream of the weights; what is left of the chain's costs is the
// staging of x (K x 2 bytes from the L2 per CTA, once), the last round of tiles and each tile's
// store through shared memory. x must fit next to the ring: M x (K + 8) x 2 bytes and 4 stages of
// 8 chunks (8.5 KB a stage at G >= 128) in 200 KiB; larger M x K is refused with kc::Error
// (gemv_int4_04_fits says which fit; the engine then runs the norm, the activation and rung 02).
//
// SASS to look for (sm_90a): UBLKCP.S.G and SYNCS.* in the producer; PREEXIT and ACQBULK; LDG.E.128
// then STS.128 in the consumers' staging; LDS.128 (quants and x) and LDS.64 (scale entries at
// G >= 128), HMMA.16816.F32.BF16 in their loop; BAR.SYNC among the consumers; no LDL/STL. Hopper
// only, as rung 02.
//
// Run just this rung: kc-bench --filter 'stage3/gemv_int4/0[24]' --shapes 1x4096x4096,1x14336x4096
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
  static constexpr int kQuants = 32 * 32;
  static constexpr int kScales = 8 * int4_groups::kEntries<kBlocksPerScale> * 4;
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

constexpr int stage_bytes(int group_size) {
  switch (int4_blocks_per_scale(group_size)) {
    case 1: return ring_stage_bytes<Int4Chunks<1>>();
    case 2: return ring_stage_bytes<Int4Chunks<2>>();
    default: return ring_stage_bytes<Int4Chunks<4>>();
  }
}

constexpr const char* kWho = "int4 GEMV (rung 04, x resident)";

// The link's tiles and the checks of everything the kernel assumes: each weight's arguments as rung
// 02 takes them, then the frame's (the prologue, x next to the ring).
Link make_int4_link(const Int4GemvLinkArgs& a) {
  check_link_weight_count(a.weights, kWho);
  Link g;
  int tiles = 0;
  for (int w = 0; w < a.weights; ++w) {
    int4_groups::check_args(gemv_int4_link_weight_args(a, w), "rung 04, x resident");
    const Int4GemvLinkWeight& weight = a.weight[w];
    add_link_weight(g, w, weight.quants, weight.scales, weight.y, weight.n, tiles);
  }
  end_link_weights(g, a.weights, tiles);
  finish_link(a, dynamic_smem_bytes(stage_bytes(a.group_size), a.m, a.k, XStaging::bf16_as_read), kWho,
              "run rung 02, which streams x with the weights", g);
  return g;
}

template <bool kSwapped>
void launch_int4(const Int4GemvLinkArgs& a, cudaStream_t stream) {
  require(gemv_gguf_06_runs_here(),
          "{} needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; this build or GPU has none: "
          "run rung 01, as kc::stage3::int4_gemv does",
          kWho);
  const Link g = make_int4_link(a);
  const auto with_rows = [&](auto blocks_per_scale, auto row_groups, auto one_row) {
    using Format = Int4Chunks<decltype(blocks_per_scale)::value>;
    constexpr int kRowGroups = decltype(row_groups)::value;
    constexpr bool kOneRow = decltype(one_row)::value;
    constexpr XStaging kStaging = XStaging::bf16_as_read;
    if constexpr (kSwapped) {
      launch_instance<Format, kRowGroups, kOneRow, true, GgufGemvPrologue::none, kStaging>(g, stream, nullptr);
    } else {
      switch (a.prologue) {
        case GgufGemvPrologue::none:
          launch_instance<Format, kRowGroups, kOneRow, false, GgufGemvPrologue::none, kStaging>(g, stream, nullptr);
          break;
        case GgufGemvPrologue::rmsnorm:
          launch_instance<Format, kRowGroups, kOneRow, false, GgufGemvPrologue::rmsnorm, kStaging>(g, stream, nullptr);
          break;
        case GgufGemvPrologue::swiglu:
          launch_instance<Format, kRowGroups, kOneRow, false, GgufGemvPrologue::swiglu, kStaging>(g, stream, nullptr);
          break;
      }
    }
  };
  // Rungs 01 and 02's instance for M (they must match to write the same bits).
  const auto with_group = [&](auto blocks_per_scale) {
    if (a.m > 8)
      with_rows(blocks_per_scale, std::integral_constant<int, 2>{}, std::false_type{});
    else if (a.m > 1)
      with_rows(blocks_per_scale, std::integral_constant<int, 1>{}, std::false_type{});
    else
      with_rows(blocks_per_scale, std::integral_constant<int, 1>{}, std::true_type{});
  };
  switch (int4_blocks_per_scale(a.group_size)) {
    case 1: with_group(std::integral_constant<int, 1>{}); break;
    case 2: with_group(std::integral_constant<int, 2>{}); break;
    default: with_group(std::integral_constant<int, 4>{}); break;
  }
  KC_CUDA_CHECK(cudaGetLastError());
}

Int4GemvLinkArgs plain_int4_link(const Int4GemvArgs& args) {
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

bool gemv_int4_04_fits(int m, int k, int group_size) {
  if (m < 1 || k < 1 || !int4_group_size_supported(group_size)) return false;
  return dynamic_smem_bytes(stage_bytes(group_size), m, k, XStaging::bf16_as_read) <= kGgufGemv07MaxDynamicSmem;
}

void gemv_int4_04_link(const Int4GemvLinkArgs& args, cudaStream_t stream) { launch_int4<false>(args, stream); }

void gemv_int4_04_x_resident(const Int4GemvArgs& args, cudaStream_t stream) {
  launch_int4<false>(plain_int4_link(args), stream);
}

void gemv_int4_04_swapped_nibbles(const Int4GemvArgs& args, cudaStream_t stream) {
  launch_int4<true>(plain_int4_link(args), stream);
}

}  // namespace kc::stage3
