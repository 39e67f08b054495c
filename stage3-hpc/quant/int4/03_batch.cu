// Rung 03 of the int4 GEMV — a batch of rows (M up to 64): each block centred once to exact
// integers, used by every token tile, the scale applied once a group.
//
// Idea: at 16 to 64 rows the GGUF GEMV's rung 09 (quant/09_gemv_gguf_batch.cu, whose header tells
// the frame's story) is not bound by its tensor cores but by the instructions around them: per
// block and warp the decode, and per block, output and token tile one FFMA to apply the block's
// scale (q4_1 adds two products against ones for the block's sums of x). Groups of 128 with a zero
// point change both counts. The nibbles, decoded to bf16 128 + q as before, are centred on the
// row's own zero point — one HSUB2 a pair subtracts (128 + z, 128 + z), exact: q - z is a small
// integer — so the products give c = sum x (q - z) directly and no sums of x are needed; and a
// group's blocks share their scale, so the tensor cores chain the products of all the group's
// blocks in FP32 and one FFMA an output follows per group: at G = 128 a quarter of rung 09's.
//
// What changed from rung 09: the block arithmetic only (multiply_chunk below; the frame, the copy
// plan, the pipeline and the split-K reduction are quant/gemv_batch_frame.cuh's, the same code),
// and the chunk's scale entries (the prepared layout of kc/stage3/gemv_int4_args.hpp: E entries a
// row group and tile, 8 bytes at G >= 128). The result is exact in the same sense as rung 09: FP32
// sums of exact products, the scale applied in FP32 once a group; only the order of the additions
// differs from rungs 01 and 02.
//
// Expected limiter: as rung 09, the issue of each warp's serial chain of decode, products and
// FFMAs at 32-64 rows, with a quarter of its FFMAs and none of q4_1's products against ones.
//
// SASS to look for: LDGSTS.E.BYPASS.128 (the ring), LDS.128 for x and the quants, LOP3.LUT and
// HADD2.BF16_V2 (the centring; HFMA2.BF16_V2 on sm_80, which has no bf16 HADD2) per pair,
// HMMA.16816.F32.BF16, FFMA once a group; the reduction's ATOMG.E.ADD; no LDL/STL.
//
// Refuses: M > 64.
//
// Run just this rung:
//   kc-bench --filter stage3/gemv_int4/03_batch --shapes 64x4096x4096
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <type_traits>

#include "arch/sm80/mma.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_int4_args.hpp"
#include "quant/gemv_batch_frame.cuh"
#include "quant/gemv_gguf_mma.cuh"
#include "quant/int4/gemv_int4_groups.cuh"

namespace kc::stage3 {
namespace {

using gemv_batch::Accumulators;
using gemv_batch::kTilesPerWarp;
using gemv_batch::Shape;
using gemv_batch::Stage;
using gemv_batch::x_piece_offset;

// The pair (128 + z, 128 + z) in bf16 from a scale entry half2 (s, z): what a decoded pair of
// nibbles of that row loses to become q - z (exact: 128 + z < 256 is an integer bf16 holds).
__device__ __forceinline__ __nv_bfloat162 centring_bias(std::uint32_t entry_bits) {
  __half2 sz;
  std::memcpy(&sz, &entry_bits, sizeof sz);
  return __float2bfloat162_rn(128.f + __high2float(sz));
}

__device__ __forceinline__ std::uint32_t centre(std::uint32_t pair_bits, __nv_bfloat162 bias) {
  __nv_bfloat162 pair;
  std::memcpy(&pair, &pair_bits, sizeof pair);
  pair = __hsub2(pair, bias);
  std::memcpy(&pair_bits, &pair, sizeof pair);
  return pair_bits;
}

// kSwappedZeros: the negative control's instance, which centres row g's pairs on row g + 8's zero
// point and the other way round.
template <int kBlocksPerScale, bool kSwappedZeros = false>
struct Int4BatchFormat {
  using Args = Int4GemvArgs;
  static constexpr int kEntries = int4_groups::kEntries<kBlocksPerScale>;  // a row group's, a chunk
  static constexpr int kQuantVectors = 2;                                   // 32 bytes a lane
  static constexpr int kTileScaleVectors = 8 * kEntries * 4 / 16;           // 8 row groups x E entries
  // Two CTAs an SM where 128 registers a thread hold the accumulators and a group's products
  // (2 x 2 x 4 x kGroupTiles floats each) without spills (ptxas -v): up to 5 token tiles; one
  // from 6, where the two groups' 3 or 4 token tiles each spilled at 128.
  template <int kTokenTiles>
  static constexpr int kMinCtasPerSm = kTokenTiles >= 6 ? 1 : 2;

  // One chunk of the warp's two tiles (`warp` counted within its token group) against its group's
  // token tiles (from `first_token_tile`), from `stage`.
  template <int kTokenTiles>
  __device__ __forceinline__ static void multiply_chunk(const std::uint8_t* stage, int warp, int first_token_tile,
                                                        int lane, Accumulators<kTokenTiles>& acc) {
    using S = Stage<Int4BatchFormat, kTokenTiles>;
    constexpr int kGroupTiles = Shape<kTokenTiles>::kGroupTiles;
    constexpr int kGroupsPerChunk = 4 / kBlocksPerScale;
    const int g = lane >> 2, t = lane & 3;
    const std::uint8_t* x = stage + S::kQuants + S::kScales;
    // Row group g's entries of each of the warp's two tiles: (s, z) of rows g and g + 8 a group.
    std::uint32_t entries[kTilesPerWarp][kEntries];
#pragma unroll
    for (int mt = 0; mt < kTilesPerWarp; ++mt) {
      const int tile = warp * kTilesPerWarp + mt;
      const std::uint8_t* from = stage + S::kQuants + (tile * 8 + g) * kEntries * 4;
      if constexpr (kEntries == 2) {
        const uint2 e = *reinterpret_cast<const uint2*>(from);
        entries[mt][0] = e.x;
        entries[mt][1] = e.y;
      } else {
#pragma unroll
        for (int v = 0; v < kEntries / 4; ++v) {
          const uint4 e = reinterpret_cast<const uint4*>(from)[v];
          entries[mt][4 * v] = e.x;
          entries[mt][4 * v + 1] = e.y;
          entries[mt][4 * v + 2] = e.z;
          entries[mt][4 * v + 3] = e.w;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kGroupsPerChunk; ++u) {
      // c[mt][nt]: the group's sum x (q - z) for the warp's tile mt and token tile nt (acc's order).
      float c[kTilesPerWarp][kGroupTiles][4] = {};
      __nv_bfloat162 bias_low[kTilesPerWarp], bias_high[kTilesPerWarp];
#pragma unroll
      for (int mt = 0; mt < kTilesPerWarp; ++mt) {
        bias_low[mt] = centring_bias(entries[mt][2 * u + (kSwappedZeros ? 1 : 0)]);
        bias_high[mt] = centring_bias(entries[mt][2 * u + (kSwappedZeros ? 0 : 1)]);
      }
#pragma unroll
      for (int b = 0; b < kBlocksPerScale; ++b) {
        const int j = u * kBlocksPerScale + b;
        std::uint32_t first[kTilesPerWarp][4], second[kTilesPerWarp][4];
#pragma unroll
        for (int mt = 0; mt < kTilesPerWarp; ++mt) {
          const int tile = warp * kTilesPerWarp + mt;
          // Block j's words (rows g and g + 8): bytes 8j .. 8j + 7 of the lane's 32, which the
          // stage keeps as 16-byte vectors [tile][v][lane].
          const uint2 q = *reinterpret_cast<const uint2*>(stage + ((tile * 2 + j / 2) * 32 + lane) * 16 + (j % 2) * 8);
          const std::uint32_t words[2] = {q.x, q.y};
          gguf_mma::weights_as_a_fragments<GgufBlockType::q4_1, false>(words, 0, first[mt], second[mt]);
          // Registers 0 and 2 hold row g's pairs, 1 and 3 row g + 8's (weights_as_a_fragments).
          first[mt][0] = centre(first[mt][0], bias_low[mt]);
          first[mt][2] = centre(first[mt][2], bias_low[mt]);
          second[mt][0] = centre(second[mt][0], bias_low[mt]);
          second[mt][2] = centre(second[mt][2], bias_low[mt]);
          first[mt][1] = centre(first[mt][1], bias_high[mt]);
          first[mt][3] = centre(first[mt][3], bias_high[mt]);
          second[mt][1] = centre(second[mt][1], bias_high[mt]);
          second[mt][3] = centre(second[mt][3], bias_high[mt]);
        }
#pragma unroll
        for (int nt = 0; nt < kGroupTiles; ++nt) {
          // The last group's tiles past T (an odd T) are not there.
          if (kTokenTiles % kGroupTiles != 0 && first_token_tile + nt >= kTokenTiles) break;
          const uint4 xv =
              *reinterpret_cast<const uint4*>(x + x_piece_offset(8 * (first_token_tile + nt) + g, 4 * j + t));
#pragma unroll
          for (int mt = 0; mt < kTilesPerWarp; ++mt) {
            float half_way[4];
            sm80::mma_m16n8k16_bf16_into(half_way, first[mt], xv.x, xv.y, c[mt][nt]);
            sm80::mma_m16n8k16_bf16_into(c[mt][nt], second[mt], xv.z, xv.w, half_way);
          }
        }
      }
      // The scale step, once a group: acc += s c for rows g (s of entry 2u) and g + 8 (2u + 1).
#pragma unroll
      for (int mt = 0; mt < kTilesPerWarp; ++mt) {
        const float s_low = int4_groups::group_factors<Int4Flaw::none>(entries[mt][2 * u]).x;
        const float s_high = int4_groups::group_factors<Int4Flaw::none>(entries[mt][2 * u + 1]).x;
#pragma unroll
        for (int nt = 0; nt < kGroupTiles; ++nt) {
          acc[mt][nt][0] = fmaf(s_low, c[mt][nt][0], acc[mt][nt][0]);
          acc[mt][nt][1] = fmaf(s_low, c[mt][nt][1], acc[mt][nt][1]);
          acc[mt][nt][2] = fmaf(s_high, c[mt][nt][2], acc[mt][nt][2]);
          acc[mt][nt][3] = fmaf(s_high, c[mt][nt][3], acc[mt][nt][3]);
        }
      }
    }
  }
};

// Calls launch(kernel, smem_bytes, threads) with the instance for the group size and M's token
// tiles (kSwappedZeros: the negative control's, built for G >= 128 only).
template <bool kSwappedZeros = false, class Launch>
void with_instance(int group_size, int m, Launch&& launch) {
  const auto with_scale = [&](auto blocks_per_scale) {
    using Format = Int4BatchFormat<decltype(blocks_per_scale)::value, kSwappedZeros>;
    gguf_mma::dispatch_token_tiles(m, [&](auto tiles_constant) {
      constexpr int kTokenTiles = decltype(tiles_constant)::value;
      launch(gemv_batch::allowed_instance<Format, kTokenTiles>(), Stage<Format, kTokenTiles>::kSmemBytes,
             Shape<kTokenTiles>::kThreads);
    });
  };
  if constexpr (kSwappedZeros) {
    require(group_size >= 128, "the swapped-zero-point control of int4 rung 03 is built for G >= 128 (got {})",
            group_size);
    with_scale(std::integral_constant<int, 4>{});
  } else {
    switch (int4_blocks_per_scale(group_size)) {
      case 1: with_scale(std::integral_constant<int, 1>{}); break;
      case 2: with_scale(std::integral_constant<int, 2>{}); break;
      default: with_scale(std::integral_constant<int, 4>{}); break;
    }
  }
}

template <bool kSwappedZeros>
void launch(const Int4GemvArgs& a, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
            cudaStream_t stream) {
  int4_groups::check_args(a, "rung 03", kInt4BatchMaxRows);
  check_gguf_batch_plan("int4 GEMV", "rung 03", a.m, a.n, a.k, plan, workspace);
  with_instance<kSwappedZeros>(a.group_size, a.m, [&](auto kernel, int smem_bytes, int threads) {
    const dim3 grid(static_cast<unsigned>(plan.column_blocks), static_cast<unsigned>(plan.splits));
    kernel<<<grid, threads, static_cast<std::size_t>(smem_bytes), stream>>>(a, plan, workspace);
  });
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_int4_03_batch(const Int4GemvArgs& a, const GgufBatchPlan& plan, const GgufBatchWorkspace& workspace,
                        cudaStream_t stream) {
  launch<false>(a, plan, workspace, stream);
}

void gemv_int4_03_swapped_zero_points(const Int4GemvArgs& a, const GgufBatchPlan& plan,
                                      const GgufBatchWorkspace& workspace, cudaStream_t stream) {
  launch<true>(a, plan, workspace, stream);
}

int gemv_int4_03_ctas_per_sm(int group_size, int m) {
  int ctas = 0;
  with_instance(group_size, m, [&](auto kernel, int smem_bytes, int threads) {
    KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, kernel, threads,
                                                                static_cast<std::size_t>(smem_bytes)));
  });
  return ctas < 1 ? 1 : ctas;
}

}  // namespace kc::stage3
