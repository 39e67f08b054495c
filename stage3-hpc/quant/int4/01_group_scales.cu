// Rung 01 of the int4 GEMV — 4-bit weights with a scale and a zero point per group of G weights
// (GPTQ/AWQ checkpoints), the scale step once a group.
//
// Idea: the GGUF rungs apply a block's scales after every 32 weights — two FFMAs per output and
// block, and a scale entry loaded per block — because a GGUF block has its own scale. A GPTQ/AWQ
// group of G = 128 shares one (s, z) across four such blocks, and the arithmetic factors:
//   sum_k x_k s (q_k - z) = s (sum_k x_k q_k - z sum_k x_k)
// so the tensor cores can sum all four blocks' products before any scale is applied, and the FFMAs
// of the scale and the zero point follow once per group. With the nibbles as bf16 128 + q (one LOP3
// a pair, exact) and the group's sum of x from a product of ones with x, a group costs
//   c = sum x (128 + q), S = sum x  (two k16 products a block each, chained in FP32 across the
//   group's blocks), then  acc += s c - (128 + z) s S,
// with (s, z) one 4-byte entry a row and group: 4.25 bits a weight at G = 128 against q4_1's 5.
//
// The layout (prepare_int4_groups; the picture in kc/stage3/gemv_int4_args.hpp): the GGUF
// GEMV's layout=3 tiles of 16 rows x 128 k, the same nibble words, so lane (g, t) finds its A
// fragments of a block in two words; the scale entries are per group, E = 2 x 128 / G a lane's row
// group (8 bytes at G >= 128).
//
// What changed from the GGUF GEMV's rung 05 (quant/05_gemv_gguf_weights_as_a.cu), whose frame this
// is (8 warps split a tile's K chunks, a chunk loaded ahead in registers, one tile of 16 output
// columns a CTA, the warps' partial sums met in shared memory): the products of a group's blocks
// accumulate in the tensor cores' FP32 registers, and the scale and zero point are applied once
// per group (G >= 128: once per chunk) rather than once per block.
//
// Expected limiter: the DRAM stream of the quants, as rung 05 — fewer scale bytes and FFMAs a
// weight than rung 05, the same nibble decode and products.
//
// SASS to look for: LDG.E.128 for quants and x (LDG.E.64 for the scale entries at G >= 128);
// LOP3.LUT per nibble pair; HMMA.16816.F32.BF16 chained from one block to the next; no LDL/STL.
//
// Run just this rung: kc-bench --filter stage3/gemv_int4/01_group_scales
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "kc/common/error.hpp"
#include "kc/stage3/gemv_int4_args.hpp"
#include "quant/gemv_gguf_mma.cuh"
#include "quant/int4/gemv_int4_groups.cuh"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 8;

// A lane's share of one chunk of its tile: the 32 bytes of quants of rows g and g + 8 (words
// 2j + h), and row group g's kEntries scale entries (g, 2u + h).
template <int kEntries>
struct Chunk {
  uint4 quants[2];
  std::uint32_t entries[kEntries];
};

template <int kEntries>
__device__ __forceinline__ void load_chunk(Chunk<kEntries>& r, const uint4* quants, const std::uint32_t* scales,
                                           std::size_t tile_chunk, int lane, bool valid) {
  r.quants[0] = valid ? __ldg(quants + (tile_chunk * 32 + lane) * 2) : make_uint4(0, 0, 0, 0);
  r.quants[1] = valid ? __ldg(quants + (tile_chunk * 32 + lane) * 2 + 1) : make_uint4(0, 0, 0, 0);
  const std::uint32_t* lane_entries = scales + (tile_chunk * 8 + (lane >> 2)) * kEntries;
  if constexpr (kEntries == 2) {
    const uint2 e = valid ? __ldg(reinterpret_cast<const uint2*>(lane_entries)) : make_uint2(0, 0);
    r.entries[0] = e.x;
    r.entries[1] = e.y;
  } else {
#pragma unroll
    for (int v = 0; v < kEntries / 4; ++v) {
      const uint4 e = valid ? __ldg(reinterpret_cast<const uint4*>(lane_entries) + v) : make_uint4(0, 0, 0, 0);
      r.entries[4 * v] = e.x;
      r.entries[4 * v + 1] = e.y;
      r.entries[4 * v + 2] = e.z;
      r.entries[4 * v + 3] = e.w;
    }
  }
}

// __launch_bounds__(256, 1) for the reason rung 05 gives: the stated minimum of one CTA an SM lets
// ptxas give the chains the registers they need without spilling.
template <int kBlocksPerScale, int kRowGroups, bool kOneRow, Int4Flaw kFlaw>
__global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_int4_group_scales_kernel(int m_rows, int n_cols, int k_len, const __nv_bfloat16* __restrict__ x,
                                  const uint4* __restrict__ quants, const std::uint32_t* __restrict__ scales,
                                  __nv_bfloat16* __restrict__ y) {
  constexpr int kEntries = int4_groups::kEntries<kBlocksPerScale>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int k_blocks = k_len / 32;
  const int chunks = (k_len + kInt4ChunkWeights - 1) / kInt4ChunkWeights;
  const int tile = blockIdx.x;

  // acc[r][e]: rows (output columns) 16 tile + g (e < 2) and + 8 (e >= 2), x rows 8r + 2t + (e & 1).
  float acc[kRowGroups][4];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[r][e] = 0.f;
  // The x row this lane brings to B: row g (and g + 8 for the second group); rows past M read nothing.
  bool row_valid[kRowGroups];
  const __nv_bfloat16* x_row[kRowGroups];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r) {
    row_valid[r] = g + 8 * r < m_rows;
    x_row[r] = x + static_cast<std::size_t>(g + 8 * r) * k_len + 8 * t;
  }

  Chunk<kEntries> current, next;
  int chunk = warp;
  load_chunk(current, quants, scales, static_cast<std::size_t>(tile) * chunks + chunk, lane, chunk < chunks);
  for (; chunk < chunks; chunk += kWarps) {
    const int next_chunk = chunk + kWarps;
    load_chunk(next, quants, scales, static_cast<std::size_t>(tile) * chunks + next_chunk, lane, next_chunk < chunks);
    std::uint32_t words[8];
    std::memcpy(words, current.quants, sizeof words);
    int4_groups::chunk_product<kBlocksPerScale, kRowGroups, kOneRow, kFlaw>(
        words, current.entries, chunk, k_blocks,
        [&](int r, int, int block) {
          return row_valid[r] ? __ldg(reinterpret_cast<const uint4*>(x_row[r] + static_cast<std::size_t>(block) * 32))
                              : make_uint4(0, 0, 0, 0);
        },
        acc);
    current = next;
  }

  __shared__ float partial[kWarps * kRowGroups * 32 * 4];
  gguf_mma::weights_as_a_reduce_and_store<kWarps, kRowGroups, kWarps * 32>(acc, true, partial, m_rows, n_cols, tile, y);
}

template <Int4Flaw kFlaw, int kBlocksPerScale, int kRowGroups, bool kOneRow>
void launch_kernel(const Int4GemvArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.n + kInt4TileRows - 1) / kInt4TileRows)), block(kWarps * 32);
  gemv_int4_group_scales_kernel<kBlocksPerScale, kRowGroups, kOneRow, kFlaw><<<grid, block, 0, stream>>>(
      a.m, a.n, a.k, a.x, reinterpret_cast<const uint4*>(a.quants), a.scales, a.y);
}

// The instance for M (gguf_mma::dispatch_row_groups: two groups of 8 rows of x for M > 8, one
// otherwise, and at M = 1 the one without the FFMAs of x rows past M). The flawed instances take
// the two-group kernel at every M (it is right for any M up to 16: rows past M are zeros and never
// stored), so that each flaw costs one instance a group size and not three.
template <Int4Flaw kFlaw>
void launch(const Int4GemvArgs& a, cudaStream_t stream) {
  int4_groups::check_args(a, "rung 01");
  int4_groups::dispatch_blocks_per_scale(a.group_size, [&](auto blocks_per_scale) {
    constexpr int kBlocksPerScale = decltype(blocks_per_scale)::value;
    if constexpr (kFlaw == Int4Flaw::none) {
      gguf_mma::dispatch_row_groups(a.m, [&](auto row_groups, auto one_row) {
        launch_kernel<kFlaw, kBlocksPerScale, decltype(row_groups)::value, decltype(one_row)::value>(a, stream);
      });
    } else if constexpr (!(kFlaw == Int4Flaw::next_group_scales && kBlocksPerScale == 4)) {
      // (One group a chunk has no next group to read: gemv_int4_01_flawed refuses it first.)
      launch_kernel<kFlaw, kBlocksPerScale, 2, false>(a, stream);
    }
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_int4_01_group_scales(const Int4GemvArgs& args, cudaStream_t stream) { launch<Int4Flaw::none>(args, stream); }

void gemv_int4_01_flawed(const Int4GemvArgs& args, Int4Flaw flaw, cudaStream_t stream) {
  switch (flaw) {
    case Int4Flaw::swapped_nibbles: launch<Int4Flaw::swapped_nibbles>(args, stream); break;
    case Int4Flaw::next_group_scales:
      require(args.group_size < 128, "the next-group control needs several groups a chunk (G of 32 or 64; got {})",
              args.group_size);
      launch<Int4Flaw::next_group_scales>(args, stream);
      break;
    case Int4Flaw::zero_point_ignored: launch<Int4Flaw::zero_point_ignored>(args, stream); break;
    case Int4Flaw::scale_applied_twice: launch<Int4Flaw::scale_applied_twice>(args, stream); break;
    case Int4Flaw::none: launch<Int4Flaw::none>(args, stream); break;
  }
}

}  // namespace kc::stage3
