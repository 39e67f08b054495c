// quant/gemv_x_resident_frame.cuh — the persistent, x-resident GEMV of a decode chain's links: the
// producer warp's bulk-copy ring of quants and scales (the GGUF GEMV's rung 06's), x staged once
// into shared memory by the consumer warps with an optional RMSNorm or SwiGLU prologue, up to three
// weights a launch, beta in the store, a programmatic dependent. What the weights are is the
// kernel's Format: GGUF blocks of one type (GgufChunks: the GGUF GEMV's rungs 07, 08, 11 and 12) or
// 4-bit groups with zero points (Int4Chunks in quant/int4/04_x_resident.cu: the int4 GEMV's rung
// 04). The GGUF rungs differ in what x is in shared memory and when it gets there (XStaging): rung
// 07 keeps bf16 and rung 06's block arithmetic; rung 08 stores x as fp16 scaled by a power of two
// per row, with the block sums formed once; rung 11 keeps rung 07's bf16 but stages it slice by
// slice during the CTA's first tile, each warp its own chunks'; rung 12 keeps rung 07's bf16 and
// has a cluster of CTAs stage it once, each CTA a part of it into all of their shared memories
// (their headers say why). Each rung's .cu file holds its entry points; this header is included by
// those five files only.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "arch/sm90/cluster.cuh"
#include "arch/sm90/mbarrier.cuh"
#include "arch/sm90/sm90a.hpp"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/tma_descriptor.hpp"
#include "arch/sm90/warpgroup.cuh"
#include "bulk_stream_ring.cuh"
#include "gemv_gguf_mma.cuh"
#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.cuh"
#include "kc/core/elementwise.cuh"
#include "kc/core/reduce.cuh"
#include "kc/stage3/gemm.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3 {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kConsumerWarps = 8;
constexpr int kConsumerThreads = kConsumerWarps * 32;
constexpr int kThreads = kConsumerThreads + 32;  // the consumers and one producer warp
constexpr int kStages = 4;
constexpr int kXPad = 8;  // bf16 after each row of x in shared memory: rows start on different banks

// What x is in shared memory. Rung 07: the bf16 it reads (with its prologue), multiplied by rung
// 06's block arithmetic, so rung 06's bits. Rung 08: fp16, each row scaled by a power of two that
// puts its largest |x| in [2^14, 2^15) (fp16 holds up to 65504, and a bf16 value so scaled loses
// no bit unless it falls below fp16's normal range, 2^-14, i.e. 2^28 times smaller than the row's
// largest), the k of pairs 1 and 3 of every 8 divided by 16 more in q4_0 and q4_1; after x's rows,
// a float4 a row and block — {the start of the block's accumulator, its sum of x} twice, the
// accumulator fragment of a one-row product as it is loaded — and then the
// rows' largest |x| (a float a consumer warp and row) and their scales' exponents. The store undoes
// the row's scale. Rung 11: rung 07's bf16, but not staged up front: during the CTA's first tile each
// consumer warp stages the slice of x its own chunk multiplies (128 k of every row) one stage ahead
// of the products, so the weights' stream starts at once; the later tiles read it as rung 07 does.
// Rung 12: rung 07's bf16, staged once a cluster of kStagingCluster CTAs: each CTA loads and
// prologues a kStagingCluster-th of x and stores it into every CTA's shared memory of the cluster.
enum class XStaging { bf16_as_read, f16_scaled, bf16_in_step, bf16_cluster_shared };

// Rung 12's cluster: the CTAs that share one staging of x (a portable cluster size).
constexpr int kStagingCluster = 4;

// Bytes of rung 08's sums, row maxima and exponents after x's rows (none in rung 07).
inline std::size_t staging_extra_bytes(XStaging staging, int m, int k) {
  if (staging != XStaging::f16_scaled) return 0;
  return static_cast<std::size_t>(m) * static_cast<std::size_t>(k / kGgufBlockWeights) * sizeof(float4) +
         static_cast<std::size_t>(kConsumerWarps + 1) * kGgufGemvMaxRows * sizeof(float);
}

// The kernel's Format for GGUF blocks of kType (rungs 07 and 08): a chunk (16 rows x 128 k) in the
// ring is the lanes' quants, then the 8 row groups' scale entries (gguf_mma::ChunkBytes), read by a
// consumer lane with gguf_mma::read_stage_chunk and multiplied as rung 06 multiplies it. A Format
// gives kQuants and kScales (a chunk's bytes of each), read(stage, warp, lane) (the lane's part of
// consumer warp `warp`'s chunk), multiply<kRowGroups, kOneRow, kSwapped, kWholeChunk>(lane's
// chunk, chunk, k_blocks, load_x, acc), whole_chunks() (whether a chunk whose 4 blocks lie inside
// K has an instance of its own without the test for K's end, kWholeChunk true), and for
// XStaging::f16_scaled kBlockType (the blocks whose staging of x it reads) and
// multiply_f16<...>(lane's chunk, chunk, k_blocks, load_x, load_sums, acc).
template <GgufBlockType kType>
struct GgufChunks {
  static constexpr GgufBlockType kBlockType = kType;
  static constexpr bool whole_chunks() { return true; }
  static constexpr int kQuants = gguf_mma::ChunkBytes<kType>::kQuants;
  static constexpr int kScales = gguf_mma::ChunkBytes<kType>::kScales;
#if KC_STAGE3_SM90A
  static __device__ __forceinline__ gguf_mma::LaneChunk<kType> read(const std::uint8_t* stage, int warp, int lane) {
    return gguf_mma::read_stage_chunk<kType, kConsumerWarps>(stage, warp, lane);
  }
  template <int kRowGroups, bool kOneRow, bool kSwapped, bool kWholeChunk, class LoadX>
  static __device__ __forceinline__ void multiply(const gguf_mma::LaneChunk<kType>& lane_chunk, int chunk, int k_blocks,
                                                  LoadX load_x, float (&acc)[kRowGroups][4]) {
    gguf_mma::weights_as_a_chunk_every_row<kType, kRowGroups, kOneRow, kSwapped, kWholeChunk>(
        lane_chunk.words, lane_chunk.entries, chunk, k_blocks, load_x, acc);
  }
  // Rung 08: x in fp16 as XStaging::f16_scaled stores it, with its block sums (load_sums).
  template <int kRowGroups, bool kOneRow, bool kSwapped, bool kWholeChunk, class LoadX, class LoadSums>
  static __device__ __forceinline__ void multiply_f16(const gguf_mma::LaneChunk<kType>& lane_chunk, int chunk,
                                                      int k_blocks, LoadX load_x, LoadSums load_sums,
                                                      float (&acc)[kRowGroups][4]) {
    gguf_mma::weights_as_a_chunk_f16<kType, kRowGroups, kOneRow, kSwapped, kWholeChunk>(
        lane_chunk.words, lane_chunk.entries, chunk, k_blocks, load_x, load_sums, acc);
  }
#endif
};

// A stage of the ring: [8 chunks of quants | their scales] (x is not in it).
template <class Format>
constexpr int ring_stage_bytes() {
  return kConsumerWarps * (Format::kQuants + Format::kScales);
}

constexpr int ring_stage_bytes(GgufBlockType type) {
  return type == GgufBlockType::q4_0   ? ring_stage_bytes<GgufChunks<GgufBlockType::q4_0>>()
         : type == GgufBlockType::q4_1 ? ring_stage_bytes<GgufChunks<GgufBlockType::q4_1>>()
                                       : ring_stage_bytes<GgufChunks<GgufBlockType::q8_0>>();
}

// The dynamic shared memory of a launch: the ring of stages of `stage_bytes`, then x's rows.
inline std::size_t dynamic_smem_bytes(int stage_bytes, int m, int k, XStaging staging) {
  return static_cast<std::size_t>(kStages) * static_cast<std::size_t>(stage_bytes) +
         static_cast<std::size_t>(m) * (static_cast<std::size_t>(k) + kXPad) * sizeof(bf16) +
         staging_extra_bytes(staging, m, k);
}

inline std::size_t dynamic_smem_bytes(GgufBlockType type, int m, int k, XStaging staging = XStaging::bf16_as_read) {
  return dynamic_smem_bytes(ring_stage_bytes(type), m, k, staging);
}

// What the kernel reads: the link's arguments with each weight's first tile.
struct Link {
  int m = 0, k = 0;
  const bf16* x = nullptr;
  const bf16* norm_weight = nullptr;
  float norm_eps = 0.f, beta = 0.f;
  int weights = 0;
  const std::uint8_t* quants[kGgufGemvLinkMaxWeights] = {};
  const std::uint8_t* scales[kGgufGemvLinkMaxWeights] = {};
  bf16* y[kGgufGemvLinkMaxWeights] = {};
  int n[kGgufGemvLinkMaxWeights] = {};
  int tile_begin[kGgufGemvLinkMaxWeights + 1] = {};  // tiles of weight w: [tile_begin[w], tile_begin[w + 1])
};

// The device side exists only in the sm_90a pass (the kernel is empty elsewhere, as rung 06's).
#if KC_STAGE3_SM90A
constexpr int kConsumersBarrier = 1;  // the named barrier of the consumer warps (0 is __syncthreads)
constexpr int kMaxRows = kGgufGemvMaxRows;  // rows of x: squares[warp][row]
constexpr int kStagePieces = 4;       // 16-byte pieces of x a thread loads before it stores any

// Which weight tile `tile` (of all the link's tiles) belongs to: an unrolled scan with constant
// indices (a runtime index into the parameter arrays would copy them to local memory).
struct TilePlace {
  int weight, tile;  // the weight and the tile's index among its tiles
};
__device__ __forceinline__ TilePlace place_tile(const Link& g, int tile) {
  int weight = 0;
#pragma unroll
  for (int w = 1; w < kGgufGemvLinkMaxWeights; ++w)
    if (w < g.weights && tile >= g.tile_begin[w]) weight = w;
  int begin = g.tile_begin[0];
#pragma unroll
  for (int w = 1; w < kGgufGemvLinkMaxWeights; ++w)
    if (w == weight) begin = g.tile_begin[w];
  return {weight, tile - begin};
}

template <class T>
__device__ __forceinline__ T pick(const T (&values)[kGgufGemvLinkMaxWeights], int weight) {
  T value = values[0];
#pragma unroll
  for (int w = 1; w < kGgufGemvLinkMaxWeights; ++w)
    if (w == weight) value = values[w];
  return value;
}

__device__ __forceinline__ float2 bf16_pair(std::uint32_t word) {
  __nv_bfloat162 pair;
  std::memcpy(&pair, &word, sizeof word);
  return __bfloat1622float2(pair);
}

__device__ __forceinline__ std::uint32_t bf16_word(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  std::uint32_t word;
  std::memcpy(&word, &pair, sizeof word);
  return word;
}

// The prologue on one 16-byte piece of x (8 bf16): with RMSNorm x times the norm's weight (`second`),
// its squares added to row_squares; with SwiGLU silu(gate) . up (`first` the gate, `second` up),
// stage 2's swiglu rounded to bf16; without one x as read.
template <GgufGemvPrologue kPrologue>
__device__ __forceinline__ uint4 apply_prologue(const uint4& first, const uint4& second, float& row_squares) {
  if constexpr (kPrologue == GgufGemvPrologue::none) {
    return first;
  } else {
    const std::uint32_t a[4] = {first.x, first.y, first.z, first.w};
    const std::uint32_t b[4] = {second.x, second.y, second.z, second.w};
    std::uint32_t o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 va = bf16_pair(a[i]), vb = bf16_pair(b[i]);
      if constexpr (kPrologue == GgufGemvPrologue::rmsnorm) {
        row_squares = fmaf(va.x, va.x, row_squares);
        row_squares = fmaf(va.y, va.y, row_squares);
        o[i] = bf16_word(va.x * vb.x, va.y * vb.y);
      } else {
        o[i] = bf16_word(core::Silu{}(va.x) * vb.x, core::Silu{}(va.y) * vb.y);
      }
    }
    return make_uint4(o[0], o[1], o[2], o[3]);
  }
}

// The consumers' staging of x: row after row, each thread 16 bytes (8 k) at a time, kStagePieces
// loads in flight before the first store. With the RMSNorm prologue each element is multiplied by
// the norm's weight (rounded to bf16 once) and the row's squares summed (each warp's sum lands in
// squares[warp][row]); with the SwiGLU prologue x is silu(gate) . up of a [gate | up] row of 2K,
// stage 2's swiglu rounded to bf16. Consumer thread `thread` of kConsumerThreads. kRowMax (rung
// 08): each warp's largest |x| of a row, as stored, lands in row_max[warp][row] (NaN if any is).
// kClusterShared (rung 12): only this CTA's share of each row — pieces [rank x share, (rank + 1) x
// share) of K / 8, share = K / 8 / kStagingCluster rounded up — each result stored at the same
// place of x_rows in every CTA of the cluster (its own with st.shared, the others' through the
// cluster window), and a warp's squares over the share into set `rank` of every CTA's
// kStagingCluster sets of squares (`squares` the first; zero where the share is empty). Every CTA
// of the cluster must have started (the caller's cluster wait).
template <GgufGemvPrologue kPrologue, bool kRowMax = false, bool kClusterShared = false>
__device__ __forceinline__ void stage_x(const Link& g, bf16* x_rows, float (*squares)[kMaxRows], int thread,
                                        float (*row_max)[kMaxRows] = nullptr, std::uint32_t rank = 0) {
  const int pieces = g.k / 8, x_stride = g.k + kXPad;
  int begin = 0, end = pieces;
  if constexpr (kClusterShared) {
    const int share = (pieces + kStagingCluster - 1) / kStagingCluster;
    begin = static_cast<int>(rank) * share;
    end = min(pieces, begin + share);
  }
  const int lane = thread & 31, warp = thread >> 5;
  for (int row = 0; row < g.m; ++row) {
    float row_squares = 0.f, largest = 0.f;
    const bf16* source = g.x + static_cast<std::size_t>(row) * (kPrologue == GgufGemvPrologue::swiglu ? 2 : 1) * g.k;
    for (int base = begin + thread; base < end; base += kStagePieces * kConsumerThreads) {
      uint4 first[kStagePieces], second[kStagePieces];  // x (or gate) and the norm's weight (or up)
#pragma unroll
      for (int u = 0; u < kStagePieces; ++u) {
        const int piece = base + u * kConsumerThreads;
        if (piece >= end) break;
        first[u] = __ldg(reinterpret_cast<const uint4*>(source) + piece);
        if constexpr (kPrologue == GgufGemvPrologue::rmsnorm)
          second[u] = __ldg(reinterpret_cast<const uint4*>(g.norm_weight) + piece);
        else if constexpr (kPrologue == GgufGemvPrologue::swiglu)
          second[u] = __ldg(reinterpret_cast<const uint4*>(source + g.k) + piece);
      }
#pragma unroll
      for (int u = 0; u < kStagePieces; ++u) {
        const int piece = base + u * kConsumerThreads;
        if (piece >= end) break;
        const uint4 out = apply_prologue<kPrologue>(first[u], second[u], row_squares);
        if constexpr (kRowMax) {
          const std::uint32_t stored[4] = {out.x, out.y, out.z, out.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float2 v = bf16_pair(stored[i]);
            largest = core::max_propagate_nan(largest, core::max_propagate_nan(fabsf(v.x), fabsf(v.y)));
          }
        }
        bf16* where = x_rows + static_cast<std::size_t>(row) * x_stride + piece * 8;
        *reinterpret_cast<uint4*>(where) = out;
        if constexpr (kClusterShared) {
          const std::uint32_t local = smem_u32(where);
#pragma unroll
          for (std::uint32_t other = 1; other < kStagingCluster; ++other)
            sm90::st_shared_cluster_u32x4(local, (rank + other) % kStagingCluster, out);
        }
      }
    }
    if constexpr (kPrologue == GgufGemvPrologue::rmsnorm) {
      row_squares = core::warp_reduce_sum(row_squares);
      if constexpr (kClusterShared) {
        if (lane == 0) {
          const std::uint32_t local = smem_u32(&squares[rank * kConsumerWarps + warp][row]);
#pragma unroll
          for (std::uint32_t cta = 0; cta < kStagingCluster; ++cta) sm90::st_shared_cluster_f32(local, cta, row_squares);
        }
      } else {
        if (lane == 0) squares[warp][row] = row_squares;
      }
    }
    if constexpr (kRowMax) {
      largest = core::warp_reduce_max(largest);
      if (lane == 0) row_max[warp][row] = largest;
    }
  }
}

// Rung 11's staging, one chunk's slice at a time. A consumer warp's chunk c multiplies x's k in
// [128 c, 128 c + 128): 16 pieces of 16 bytes in each row. Lanes 0-15 take the pieces of rows 0, 2,
// 4, ... and lanes 16-31 those of rows 1, 3, 5, ...; a lane holds one piece (and the prologue's
// second operand: the norm's weight, or up) for each of 4 kRowGroups row pairs (one pair in the
// M = 1 instances, kOneRow: registers the CTAs an SM would otherwise lose). load_x_slice issues
// the loads (a stage ahead of their use); store_x_slice applies the prologue exactly as stage_x
// does, stores the bf16 pieces where rung 07 keeps them and, with the RMSNorm prologue, adds each
// row's squares over the slice into the warp's squares[row] (the store sums the warps' as in rung
// 07, so only the order of the squares' additions differs from rung 07's).
template <int kRowGroups, bool kOneRow>
struct XSlice {
  static constexpr int kPairs = kOneRow ? 1 : 4 * kRowGroups;  // 8 kRowGroups rows, two a pass of the warp
  uint4 first[kPairs], second[kPairs];
};

template <GgufGemvPrologue kPrologue, int kRowGroups, bool kOneRow>
__device__ __forceinline__ void load_x_slice(const Link& g, int chunk, int lane, XSlice<kRowGroups, kOneRow>& slice) {
  const int pieces = g.k / 8, piece = chunk * 16 + (lane & 15);
  const std::size_t row_stride = static_cast<std::size_t>(kPrologue == GgufGemvPrologue::swiglu ? 2 : 1) * g.k;
#pragma unroll
  for (int i = 0; i < XSlice<kRowGroups, kOneRow>::kPairs; ++i) {
    const int row = 2 * i + (lane >> 4);
    if (row < g.m && piece < pieces) {
      const bf16* source = g.x + static_cast<std::size_t>(row) * row_stride;
      slice.first[i] = __ldg(reinterpret_cast<const uint4*>(source) + piece);
      if constexpr (kPrologue == GgufGemvPrologue::rmsnorm)
        slice.second[i] = __ldg(reinterpret_cast<const uint4*>(g.norm_weight) + piece);
      else if constexpr (kPrologue == GgufGemvPrologue::swiglu)
        slice.second[i] = __ldg(reinterpret_cast<const uint4*>(source + g.k) + piece);
    }
  }
}

template <GgufGemvPrologue kPrologue, int kRowGroups, bool kOneRow>
__device__ __forceinline__ void store_x_slice(const Link& g, bf16* x_rows, float* warp_squares, int chunk, int lane,
                                              const XSlice<kRowGroups, kOneRow>& slice) {
  const int pieces = g.k / 8, piece = chunk * 16 + (lane & 15), x_stride = g.k + kXPad;
#pragma unroll
  for (int i = 0; i < XSlice<kRowGroups, kOneRow>::kPairs; ++i) {
    const int row = 2 * i + (lane >> 4);
    float row_squares = 0.f;
    if (row < g.m && piece < pieces) {
      const uint4 out = apply_prologue<kPrologue>(slice.first[i], slice.second[i], row_squares);
      *reinterpret_cast<uint4*>(x_rows + static_cast<std::size_t>(row) * x_stride + piece * 8) = out;
    }
    if constexpr (kPrologue == GgufGemvPrologue::rmsnorm) {
      // The row's squares over the slice: the 16 lanes of each half of the warp.
#pragma unroll
      for (int offset = 8; offset >= 1; offset /= 2) row_squares += __shfl_xor_sync(0xFFFFFFFFu, row_squares, offset);
      if ((lane & 15) == 0 && row < g.m) warp_squares[row] += row_squares;
    }
  }
}

// 2^e as a float, for e in [-126, 127].
__device__ __forceinline__ float power_of_two(int e) { return __int_as_float((127 + e) << 23); }

// Rung 08's scale of a row: the exponent e that puts its largest |x| in [2^14, 2^15); 0 for a row
// of zeros, or with an Inf or NaN (which then reach y as they would in bf16).
__device__ __forceinline__ int row_scale_exponent(const float (*row_max)[kMaxRows], int row) {
  float largest = 0.f;
#pragma unroll
  for (int w = 0; w < kConsumerWarps; ++w) largest = core::max_propagate_nan(largest, row_max[w][row]);
  if (!(largest > 0.f) || isinf(largest)) return 0;
  int exponent = 0;
  frexpf(largest, &exponent);  // largest < 2^exponent
  return min(max(15 - exponent, -100), 100);
}

// Rung 08's second pass over x in shared memory, after stage_x and a barrier: each bf16 becomes
// fp16 in place, times 2^e of its row and, in q4_0 and q4_1, divided by 16 more at k % 8 in
// {2, 3, 6, 7} (pairs 1 and 3, which the nibble decode leaves 16 times too large); the four
// threads of a block (4 pieces of 8 k) add their stored values into the block's float4 of sums:
// the accumulator's start, -(1024 . sum of the stored values) (-(... + 8 s) in q4_0, where s is the
// block's sum of x as the products see it: 16 times a divided value), and s, twice. The exponents go to
// exponents[row] for the store.
template <GgufBlockType kType>
__device__ __forceinline__ void convert_x_to_scaled_f16(const Link& g, bf16* x_rows, float4* sums,
                                                        const float (*row_max)[kMaxRows], int* exponents, int thread) {
  constexpr bool kDivideHigh = kType != GgufBlockType::q8_0;
  const int pieces = g.k / 8, x_stride = g.k + kXPad, k_blocks = g.k / kGgufBlockWeights;
  const int lane = thread & 31;
  const unsigned quad = 0xFu << (lane & 28);  // the 4 lanes of a block (pieces 4b .. 4b + 3)
  for (int row = 0; row < g.m; ++row) {
    const int exponent = row_scale_exponent(row_max, row);
    if (thread == 0) exponents[row] = exponent;
    const float scale = power_of_two(exponent), high_scale = kDivideHigh ? power_of_two(exponent - 4) : scale;
    for (int piece = thread; piece < pieces; piece += kConsumerThreads) {
      uint4* where = reinterpret_cast<uint4*>(x_rows + static_cast<std::size_t>(row) * x_stride + piece * 8);
      const uint4 in = *where;
      const std::uint32_t words[4] = {in.x, in.y, in.z, in.w};
      std::uint32_t out[4];
      float stored = 0.f, seen = 0.f;  // sums of the stored values and of x as the products see it
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // word i holds k 8 piece + 2i, + 1: pairs 1 and 3 divided
        const float2 v = bf16_pair(words[i]);
        const float factor = (i % 2 == 1) ? high_scale : scale;
        const __half2 h = __floats2half2_rn(v.x * factor, v.y * factor);
        std::memcpy(&out[i], &h, sizeof out[i]);
        const float2 back = __half22float2(h);
        stored += back.x + back.y;
        seen += (kDivideHigh && i % 2 == 1) ? 16.f * (back.x + back.y) : back.x + back.y;
      }
      *where = make_uint4(out[0], out[1], out[2], out[3]);
      if constexpr (kType != GgufBlockType::q8_0) {
        stored += __shfl_xor_sync(quad, stored, 1);
        seen += __shfl_xor_sync(quad, seen, 1);
        stored += __shfl_xor_sync(quad, stored, 2);
        seen += __shfl_xor_sync(quad, seen, 2);
        if ((lane & 3) == 0) {
          const float start = -1024.f * stored - (kType == GgufBlockType::q4_0 ? 8.f * seen : 0.f);
          sums[static_cast<std::size_t>(row) * k_blocks + piece / 4] = make_float4(start, seen, start, seen);
        }
      }
    }
  }
}

#endif  // KC_STAGE3_SM90A

// Rung 11's one-row instances (M = 1, the decode step's links at batch 1) ask for two CTAs an SM
// (65536 registers over 2 x 288 threads), as many as rung 07's get there: the staging's registers
// must not cost them half their CTAs. (Asked of its instances of 2-8 rows, ptxas spilled.)
template <XStaging kStaging, bool kOneRow>
constexpr int min_ctas_per_sm() {
  return kStaging == XStaging::bf16_in_step && kOneRow ? 2 : 1;
}

template <class Format, int kRowGroups, bool kOneRow, bool kSwapped, GgufGemvPrologue kPrologue, XStaging kStaging>
__global__ void __launch_bounds__(kThreads, min_ctas_per_sm<kStaging, kOneRow>())
    gemv_x_resident_kernel(const Link g) {
#if KC_STAGE3_SM90A
  constexpr int kQuantArea = kConsumerWarps * Format::kQuants;
  constexpr int kStageBytes = ring_stage_bytes<Format>();
  constexpr int kPartial = kConsumerWarps * kRowGroups * 32 * 4;
  extern __shared__ __align__(16) std::uint8_t ring[];  // kStages stages, then x's rows
  __shared__ std::uint64_t full[kStages], empty[kStages];
  __shared__ float partial[2][kPartial];  // a tile's warp sums; two, so one barrier a tile suffices
  // The warps' sums of x's squares (RMSNorm); rung 12 keeps one set for each CTA of its cluster.
  constexpr bool kClusterShared = kStaging == XStaging::bf16_cluster_shared;
  __shared__ float squares_sets[kClusterShared ? kStagingCluster : 1][kConsumerWarps][kMaxRows];
  float(*squares)[kMaxRows] = squares_sets[0];
  bf16* x_rows = reinterpret_cast<bf16*>(ring + kStages * kStageBytes);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k_blocks = g.k / kGgufBlockWeights;
  const int chunks = (k_blocks + 3) / 4;
  const int stages = (chunks + kConsumerWarps - 1) / kConsumerWarps;  // a tile's
  const int tiles = g.tile_begin[g.weights];

  // The next kernel of the chain may start its own weights while this one streams.
  core::let_dependent_grids_start();
  bulk_ring::init<kStages, kConsumerThreads>(full, empty);
  // Rung 12: every thread says it has started (the cluster barrier's first phase); a CTA waits for
  // the others' before it writes into their shared memory. The second phase ends the staging.
  if constexpr (kClusterShared) sm90::cluster_arrive_relaxed();

  if (warp == kConsumerWarps) {
    // The producer: the weights only, which no kernel writes — so no wait for the kernel before.
    // Stage s of this CTA (counted across its tiles) into slot s % kStages once it is free.
    // Rung 12: the producer's threads take part in the cluster barrier's two phases (the second
    // ends only when the consumers have staged x), lane 0 once the ring is full, before its first
    // wait for a free slot, or after its last stage; the others at once.
    [[maybe_unused]] bool joined = false;
    [[maybe_unused]] const auto join_cluster_staging = [&joined] {
      sm90::cluster_wait_acquire();
      sm90::cluster_arrive_relaxed();
      sm90::cluster_wait_acquire();
      joined = true;
    };
    if (lane == 0) {
      int s = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const TilePlace place = place_tile(g, tile);
        const std::uint8_t* quants = pick(g.quants, place.weight);
        const std::uint8_t* scales = pick(g.scales, place.weight);
        const std::size_t tile_chunks = static_cast<std::size_t>(place.tile) * chunks;
        for (int t = 0; t < stages; ++t, ++s) {
          const int slot = s % kStages;
          if constexpr (kClusterShared)
            if (s == kStages) join_cluster_staging();
          if (s >= kStages) sm90::mbarrier_wait(&empty[slot], ((s / kStages) - 1) & 1);
          const int first_chunk = t * kConsumerWarps;
          const int stage_chunks = min(kConsumerWarps, chunks - first_chunk);
          std::uint8_t* stage = ring + static_cast<std::size_t>(slot) * kStageBytes;
          sm90::mbarrier_arrive_expect_tx(&full[slot],
                                          static_cast<std::uint32_t>(stage_chunks * (Format::kQuants + Format::kScales)));
          sm90::bulk_load(stage, quants + (tile_chunks + first_chunk) * Format::kQuants,
                          static_cast<std::uint32_t>(stage_chunks * Format::kQuants), &full[slot]);
          sm90::bulk_load(stage + kQuantArea, scales + (tile_chunks + first_chunk) * Format::kScales,
                          static_cast<std::uint32_t>(stage_chunks * Format::kScales), &full[slot]);
        }
      }
    }
    if constexpr (kClusterShared)
      if (!joined) join_cluster_staging();
    return;  // the producer writes nothing, and takes no part in the consumers' barriers
  }

  // The consumers: x once (it is the kernel before's output), then rung 06's tiles.
  core::wait_for_previous_grids();
  constexpr bool kF16 = kStaging == XStaging::f16_scaled;
  // Rung 08's sums, row maxima and exponents after x's rows (XStaging).
  float4* block_sums = nullptr;
  float(*row_max)[kMaxRows] = nullptr;
  int* exponents = nullptr;
  if constexpr (kF16) {
    block_sums = reinterpret_cast<float4*>(x_rows + static_cast<std::size_t>(g.m) * (g.k + kXPad));
    row_max = reinterpret_cast<float(*)[kMaxRows]>(block_sums + static_cast<std::size_t>(g.m) * k_blocks);
    exponents = reinterpret_cast<int*>(row_max + kConsumerWarps);
  }
  constexpr bool kInStep = kStaging == XStaging::bf16_in_step;
  if constexpr (kInStep) {
    // Rung 11: nothing staged yet; the warp's own squares start at zero (only it adds to them).
    if (lane < g.m) squares[warp][lane] = 0.f;
    __syncwarp();
  } else if constexpr (kClusterShared) {
    // Rung 12: once every CTA of the cluster has started, this CTA's share of x into all of their
    // shared memories; past the second phase every CTA's share is in this CTA's (release/acquire).
    const std::uint32_t rank = sm90::cluster_cta_rank();
    sm90::cluster_wait_acquire();
    stage_x<kPrologue, false, true>(g, x_rows, squares, threadIdx.x, nullptr, rank);
    sm90::cluster_arrive_release();
    sm90::cluster_wait_acquire();
  } else {
    stage_x<kPrologue, kF16>(g, x_rows, squares, threadIdx.x, row_max);
    sm90::named_barrier_sync(kConsumersBarrier, kConsumerThreads);
    if constexpr (kF16) {
      convert_x_to_scaled_f16<Format::kBlockType>(g, x_rows, block_sums, row_max, exponents, threadIdx.x);
      sm90::named_barrier_sync(kConsumersBarrier, kConsumerThreads);
    }
  }

  // The loop's bookkeeping stays out of the block arithmetic: each row group of a lane reads x
  // through one pointer (a row past M reads row M - 1: its column of the products is never
  // stored, so no lane needs a zero test), the barriers' shared-memory addresses are computed
  // once and the ring's slot and phase are counted, and a chunk with its 4 blocks inside K (every
  // chunk when K is a multiple of 128) runs without the per-block test for K's end.
  const int group = lane >> 2, t4 = lane & 3;
  const int x_stride = g.k + kXPad;
  const bf16* x_lane[kRowGroups];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r) x_lane[r] = x_rows + min(group + 8 * r, g.m - 1) * x_stride + 8 * t4;
  const auto load_x = [&](int r, int, int block) {
    return *reinterpret_cast<const uint4*>(x_lane[r] + block * kGgufBlockWeights);
  };
  // Rung 08: the block sums of x rows 2t and 2t + 1 of each group (the columns of the lane's
  // outputs), rows past M reading the last row as x does.
  const float4* sums_lane[kRowGroups][2];
#pragma unroll
  for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      sums_lane[r][h] = block_sums + static_cast<std::size_t>(min(8 * r + 2 * t4 + h, g.m - 1)) * k_blocks;
  const auto load_sums = [&](int r, int block, float4& even, float4& odd) {
    even = sums_lane[r][0][block];
    odd = kOneRow ? even : sums_lane[r][1][block];
  };
  const int whole_chunks = k_blocks / 4;
  const std::uint32_t full_barriers = smem_u32(full), empty_barriers = smem_u32(empty);
  constexpr std::uint32_t kBarrierBytes = sizeof(std::uint64_t);
  int slot = 0, buffer = 0;
  std::uint32_t phase = 0;
  // Rung 11: the slice of the warp's next chunk in flight, during the CTA's first tile only.
  [[maybe_unused]] XSlice<kRowGroups, kOneRow> slice;
  [[maybe_unused]] bool first_tile = true;
  if constexpr (kInStep)
    if (warp < chunks) load_x_slice<kPrologue, kRowGroups, kOneRow>(g, warp, lane, slice);
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, buffer ^= 1) {
    float acc[kRowGroups][4];
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[r][e] = 0.f;
    for (int t = 0; t < stages; ++t) {
      if constexpr (kInStep) {
        // Rung 11, first tile: the slice this stage's chunk multiplies (loaded a stage ago) into
        // shared memory, then the next one's loads, in flight under this stage's products.
        if (first_tile) {
          const int mine = t * kConsumerWarps + warp;
          if (mine < chunks)
            store_x_slice<kPrologue, kRowGroups, kOneRow>(g, x_rows, squares[warp], mine, lane, slice);
          __syncwarp();
          if (mine + kConsumerWarps < chunks)
            load_x_slice<kPrologue, kRowGroups, kOneRow>(g, mine + kConsumerWarps, lane, slice);
        }
      }
      sm90::mbarrier_wait(full_barriers + slot * kBarrierBytes, phase);
      const int chunk = t * kConsumerWarps + warp;
      const std::uint8_t* stage = ring + static_cast<std::size_t>(slot) * kStageBytes;
      if (chunk < chunks) {
        const auto lane_chunk = Format::read(stage, warp, lane);
        const auto multiply = [&](auto whole_chunk) {  // std::true_type: the chunk's 4 blocks inside K
          constexpr bool kWholeChunk = decltype(whole_chunk)::value;
          if constexpr (kF16)
            Format::template multiply_f16<kRowGroups, kOneRow, kSwapped, kWholeChunk>(lane_chunk, chunk, k_blocks,
                                                                                      load_x, load_sums, acc);
          else
            Format::template multiply<kRowGroups, kOneRow, kSwapped, kWholeChunk>(lane_chunk, chunk, k_blocks, load_x,
                                                                                  acc);
        };
        if constexpr (Format::whole_chunks()) {
          if (chunk < whole_chunks)
            multiply(std::true_type{});
          else
            multiply(std::false_type{});
        } else {
          multiply(std::false_type{});  // the format tests K's end itself
        }
      }
      // Every consumer thread: its reads of the stage are done.
      sm90::mbarrier_arrive(empty_barriers + slot * kBarrierBytes);
      if (++slot == kStages) {
        slot = 0;
        phase ^= 1;
      }
    }

    // The tile's store: the warps' sums meet in shared memory and are added in warp order (rung
    // 06's order); then 1 / RMS (the norm's), beta . y and the rounding.
    float* sums = partial[buffer];
#pragma unroll
    for (int r = 0; r < kRowGroups; ++r)
#pragma unroll
      for (int e = 0; e < 4; ++e) sums[((warp * kRowGroups + r) * 32 + lane) * 4 + e] = acc[r][e];
    sm90::named_barrier_sync(kConsumersBarrier, kConsumerThreads);
    const TilePlace place = place_tile(g, tile);
    bf16* y = pick(g.y, place.weight);
    const int n_cols = pick(g.n, place.weight);
    for (int index = threadIdx.x; index < kRowGroups * 128; index += kConsumerThreads) {
      const int r = index / 128, l = (index / 4) % 32, e = index % 4;
      const int column = 16 * place.tile + (l >> 2) + 8 * (e >> 1);
      const int row = 8 * r + 2 * (l & 3) + (e & 1);
      if (row >= g.m || column >= n_cols) continue;
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < kConsumerWarps; ++w) sum += sums[((w * kRowGroups + r) * 32 + l) * 4 + e];
      if constexpr (kF16) sum *= power_of_two(-exponents[row]);  // the row's scale undone
      if constexpr (kPrologue == GgufGemvPrologue::rmsnorm) {
        float row_squares = 0.f;
        if constexpr (kClusterShared) {
#pragma unroll
          for (int cta = 0; cta < kStagingCluster; ++cta)
#pragma unroll
            for (int w = 0; w < kConsumerWarps; ++w) row_squares += squares_sets[cta][w][row];
        } else {
#pragma unroll
          for (int w = 0; w < kConsumerWarps; ++w) row_squares += squares[w][row];
        }
        sum *= rsqrtf(row_squares / static_cast<float>(g.k) + g.norm_eps);
      }
      bf16* out = y + static_cast<std::size_t>(row) * n_cols + column;
      if (g.beta != 0.f) sum += g.beta * __bfloat162float(*out);  // BLAS: beta = 0 reads no y
      *out = __float2bfloat16(sum);
    }
    // The next tile writes the other buffer; the one after this one's again only past the next
    // tile's barrier, which every consumer reaches after its reads here.
    if constexpr (kInStep) first_tile = false;  // x is staged: the later tiles read it as rung 07's
  }
#endif
}

// Whether M rows of x of K (and, in rung 08, their sums) fit next to the ring in the dynamic
// shared memory the rungs allow.
inline bool x_fits(GgufBlockType type, int m, int k, XStaging staging) {
  if (m < 1 || k < 1) return false;
  return dynamic_smem_bytes(type, m, k, staging) <= kGgufGemv07MaxDynamicSmem;
}

// The rung's name in messages: "x resident" (07), "x as fp16" (08), "x staged in step" (11) or
// "x staged once a cluster" (12).
constexpr const char* rung_name(XStaging staging) {
  return staging == XStaging::bf16_as_read   ? "x resident"
         : staging == XStaging::f16_scaled   ? "x as fp16"
         : staging == XStaging::bf16_in_step ? "x staged in step"
                                             : "x staged once a cluster";
}

// Its number: "07", "08", "11" or "12".
constexpr const char* rung_number(XStaging staging) {
  return staging == XStaging::bf16_as_read   ? "07"
         : staging == XStaging::f16_scaled   ? "08"
         : staging == XStaging::bf16_in_step ? "11"
                                             : "12";
}

// What every link checks and sets whatever its weights are (the caller checks the number of
// weights first, then each weight's arguments, and fills in their pointers and tiles): the
// prologue's arguments, x next to the ring (`smem` bytes, which must be at most
// kGgufGemv07MaxDynamicSmem; `instead` says what to run when they are more), M, K, x and beta.
// `who` names the op and rung in the messages: "GGUF GEMV (x resident)".
template <class LinkArgs>
void finish_link(const LinkArgs& a, std::size_t smem, const char* who, const char* instead, Link& g) {
  if (a.prologue == GgufGemvPrologue::rmsnorm) {
    require(a.norm_weight != nullptr && reinterpret_cast<std::uintptr_t>(a.norm_weight) % 16 == 0,
            "{}: the RMSNorm prologue needs norm_weight, K values, 16-byte aligned", who);
    require(a.norm_eps >= 0.f, "{}: norm_eps must be >= 0 (got {})", who, a.norm_eps);
  }
  require(smem <= kGgufGemv07MaxDynamicSmem,
          "{}: x ({} rows of K = {}) and the ring take {} bytes of shared memory, more than the {} this rung "
          "allows; {}",
          who, a.m, a.k, smem, kGgufGemv07MaxDynamicSmem, instead);
  g.m = a.m;
  g.k = a.k;
  g.x = a.x;
  g.norm_weight = a.norm_weight;
  g.norm_eps = a.norm_eps;
  g.beta = a.beta;
  g.weights = a.weights;
}

// The number of weights a link takes (1 to kGgufGemvLinkMaxWeights), checked before the weights.
inline void check_link_weight_count(int weights, const char* who) {
  require(weights >= 1 && weights <= kGgufGemvLinkMaxWeights, "{}: weights must be 1 to {} (got {})", who,
          kGgufGemvLinkMaxWeights, weights);
}

// Weight w's pointers and first tile (of 16 columns); after the last weight, the end of the tiles.
inline void add_link_weight(Link& g, int w, const std::uint8_t* quants, const void* scales, bf16* y, int n, int& tiles) {
  g.quants[w] = quants;
  g.scales[w] = static_cast<const std::uint8_t*>(scales);
  g.y[w] = y;
  g.n[w] = n;
  g.tile_begin[w] = tiles;
  tiles += (n + 15) / 16;
}
inline void end_link_weights(Link& g, int weights, int tiles) {
  for (int w = weights; w <= kGgufGemvLinkMaxWeights; ++w) g.tile_begin[w] = tiles;
}

// A GGUF link's tiles, each weight's first tile, and the checks of everything the kernel assumes.
inline Link make_link(const GgufGemvLinkArgs& a, XStaging staging) {
  const std::string who = fmt::format("GGUF GEMV ({})", rung_name(staging));
  check_link_weight_count(a.weights, who.c_str());
  Link g;
  int tiles = 0;
  for (int w = 0; w < a.weights; ++w) {  // M, K, x and each weight's pointers, as rung 06 takes them
    const GgufGemvLinkWeight& weight = a.weight[w];
    gguf_mma::check_fragment_args(gemv_gguf_link_weight_args(a, w), rung_name(staging),
                                  "repack_gguf_blocks_for_mma16, layout=3");
    add_link_weight(g, w, weight.quants, weight.scales, weight.y, weight.n, tiles);
  }
  end_link_weights(g, a.weights, tiles);
  finish_link(a, dynamic_smem_bytes(a.type, a.m, a.k, staging), who.c_str(),
              "run rung 06, which streams x with the weights", g);
  return g;
}

// `ask(kernel, smem)`'s answer for this pair, asked once: the occupancy queries of a launch, cached
// per kernel and shared memory, one cache for each query (`Query` tells them apart).
template <class Query, class Ask>
int asked_once(const void* kernel, std::size_t smem, Ask ask) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, std::size_t>, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(kernel, smem);
  if (const auto found = known.find(key); found != known.end()) return found->second;
  const int answer = ask(kernel, smem);
  known.emplace(key, answer);
  return answer;
}

// CTAs of `kernel` with `smem` bytes that fit on an SM at once (asked once per pair).
inline int ctas_per_sm(const void* kernel, std::size_t smem) {
  struct CtasPerSm {};
  return asked_once<CtasPerSm>(kernel, smem, [](const void* k, std::size_t bytes) {
    int ctas = 0;
    KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, k, kThreads, bytes));
    require(ctas >= 1, "GGUF GEMV (x resident): no CTA of {} bytes of shared memory fits on an SM", bytes);
    return ctas;
  });
}

// spread_over_sms: the dynamic shared memory a launch of `kernel` asks for so that an SM holds one
// of its CTAs and no second — half of what an SM has, or `smem` where that is more (the occupancy
// query that checks it is ctas_per_sm's, asked once per pair). Only the launch asks for it; the
// kernel uses `smem` of it.
inline std::size_t one_cta_an_sm_smem(const void* kernel, std::size_t smem) {
  int device = 0, per_sm = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  KC_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  const std::size_t alone = std::max(smem, static_cast<std::size_t>(per_sm) / 2);
  require(alone <= kGgufGemv07MaxDynamicSmem && ctas_per_sm(kernel, alone) == 1,
          "GGUF GEMV (x resident): {} bytes of shared memory do not hold an SM to one CTA of the link", alone);
  return alone;
}

// Rung 12: clusters of kStagingCluster CTAs of `kernel` with `smem` bytes that fit on the GPU at
// once (asked once per pair; clusters must fit in a GPC, so this can be fewer than ctas_per_sm
// allows on every SM).
inline int staging_clusters_at_once(const void* kernel, std::size_t smem) {
  struct ClustersAtOnce {};
  return asked_once<ClustersAtOnce>(kernel, smem, [](const void* k, std::size_t bytes) {
    const int clusters = active_clusters(k, kThreads, bytes, kStagingCluster);
    require(clusters >= 1,
            "GGUF GEMV (x staged once a cluster): no cluster of {} CTAs of {} bytes of shared memory fits",
            kStagingCluster, bytes);
    return clusters;
  });
}

template <class Format, int kRowGroups, bool kOneRow, bool kSwapped, GgufGemvPrologue kPrologue, XStaging kStaging>
void launch_instance(const Link& g, bool spread_over_sms, cudaStream_t stream, bool* several_tiles_only) {
  const auto kernel = &gemv_x_resident_kernel<Format, kRowGroups, kOneRow, kSwapped, kPrologue, kStaging>;
  static const bool prepared = [kernel] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kGgufGemv07MaxDynamicSmem)));
    return true;
  }();
  (void)prepared;
  const std::size_t smem = dynamic_smem_bytes(ring_stage_bytes<Format>(), g.m, g.k, kStaging);
  const int tiles = g.tile_begin[g.weights];
  const int sm_count = current_device_sm_count();
  // Rung 12 launches whole clusters of kStagingCluster CTAs (a CTA past the last tile still stages
  // its share of x), as many as the GPU holds at once; the other rungs, CTAs of one.
  constexpr int kCluster = kStaging == XStaging::bf16_cluster_shared ? kStagingCluster : 1;
  const void* entry = reinterpret_cast<const void*>(kernel);
  const auto resident_with = [&](std::size_t bytes) {
    return kCluster > 1 ? staging_clusters_at_once(entry, bytes) * kCluster : ctas_per_sm(entry, bytes) * sm_count;
  };
  const int resident = resident_with(smem);
  if (several_tiles_only != nullptr) {  // asked whether some CTA would take several tiles, not to launch
    *several_tiles_only = tiles > resident;
    return;
  }
  const int wanted = (tiles + kCluster - 1) / kCluster * kCluster;
  const int grid = wanted < resident ? wanted : resident;
  // A grid the SMs hold one CTA each may ask for one CTA an SM (spread_over_sms) — in clusters,
  // where the clusters of such CTAs still fit at once.
  std::size_t launch_smem = smem;
  if (spread_over_sms && grid <= sm_count) {
    launch_smem = one_cta_an_sm_smem(entry, smem);
    if (kCluster > 1 && grid > resident_with(launch_smem)) launch_smem = smem;
  }
  core::launch_dependent_in_clusters(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads),
                                     static_cast<unsigned>(kCluster), launch_smem, stream, g);
}

// The link on `stream`; or, with `several_tiles_only`, no launch: whether the link has more tiles
// than the instance it would run has CTAs on the GPU at once goes there.
// launch_instance for the link's prologue, a runtime value (a swapped link has none): what the
// GGUF and the int4 links' launchers share once they have chosen the Format and the rows.
template <class Format, int kRowGroups, bool kOneRow, bool kSwapped, XStaging kStaging>
void launch_for_prologue(const Link& g, GgufGemvPrologue prologue, bool spread_over_sms, cudaStream_t stream,
                         bool* several_tiles_only) {
  const auto with = [&](auto prologue_constant, auto swapped) {
    launch_instance<Format, kRowGroups, kOneRow, decltype(swapped)::value, decltype(prologue_constant)::value,
                    kStaging>(g, spread_over_sms, stream, several_tiles_only);
  };
  using None = std::integral_constant<GgufGemvPrologue, GgufGemvPrologue::none>;
  if constexpr (kSwapped) {
    with(None{}, std::true_type{});
  } else {
    switch (prologue) {
      case GgufGemvPrologue::none:
        with(None{}, std::false_type{});
        break;
      case GgufGemvPrologue::rmsnorm:
        with(std::integral_constant<GgufGemvPrologue, GgufGemvPrologue::rmsnorm>{}, std::false_type{});
        break;
      case GgufGemvPrologue::swiglu:
        with(std::integral_constant<GgufGemvPrologue, GgufGemvPrologue::swiglu>{}, std::false_type{});
        break;
    }
  }
}

template <XStaging kStaging, bool kSwapped>
void launch(const GgufGemvLinkArgs& a, cudaStream_t stream, bool* several_tiles_only = nullptr) {
  require(gemv_gguf_06_runs_here(),
          "gemv_gguf rung {} ({}) needs sm_90a code (the copy engine's cp.async.bulk) and a Hopper GPU; "
          "this build or GPU has none: run rung 05, as kc::stage3::quantized_gemv does",
          rung_number(kStaging), rung_name(kStaging));
  const Link g = make_link(a, kStaging);
  const auto with_prologue = [&](auto type, auto row_groups, auto one_row) {
    launch_for_prologue<GgufChunks<decltype(type)::value>, decltype(row_groups)::value, decltype(one_row)::value,
                        kSwapped, kStaging>(g, a.prologue, a.spread_over_sms, stream, several_tiles_only);
  };
  // The rung-05/06 choices (block type, row groups, the M = 1 instance) on the first weight's
  // arguments; make_link checked every weight.
  gguf_mma::launch_weights_as_a_rung(gemv_gguf_link_weight_args(a, 0), rung_name(kStaging), with_prologue);
}

inline GgufGemvLinkArgs plain_link(const GgufGemvArgs& args) {
  GgufGemvLinkArgs link;
  link.m = args.m;
  link.k = args.k;
  link.type = args.type;
  link.x = args.x;
  link.weights = 1;
  link.weight[0] = {args.quants, args.scales, args.y, args.n};
  return link;
}

}  // namespace
}  // namespace kc::stage3
