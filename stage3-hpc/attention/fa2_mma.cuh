// fa2_mma.cuh — the warp-level FlashAttention-2 step on mma.sync m16n8k16 that rungs 03-05
// share (03 and 04 differ in how K and V reach shared memory and which tiles they visit, 05 in how
// many query rows a warp owns).
//
// A block of 4 warps owns 4 x 16 x kTilesPerWarp query rows; warp w owns kTilesPerWarp 16-row MMA
// tiles (the M of one m16n8k16 each), rows 16 kTilesPerWarp w .. 16 kTilesPerWarp (w + 1) - 1.
// Rungs 03/04 run one tile per warp (64 rows per block), rung 05 two at D = 64 (128). Every K and
// V fragment a warp loads feeds one MMA per tile. Per K/V tile of 64 keys, each warp, per tile:
//   1. S = Q K^T: 8 accumulator blocks of 16 x 8 (32 FP32 registers), D/16 k16 slices; K fragments
//      come from ldmatrix (K is stored key-major, D contiguous: exactly the "col" B operand). Q's
//      fragments are loaded once (ldmatrix) and stay in registers where they fit (Fa2Shape::
//      kQInRegisters); otherwise they are read from the Q tile per K/V tile, slice by slice.
//   2. the online softmax on the accumulators in place: a thread holds 2 rows of each tile (lane/4
//      and lane/4 + 8 of the tile; of the warp: lane/4 + 8r, r < 2 kTilesPerWarp) x 16 columns
//      of S; the row's other 48 columns are in the 3 other lanes of its quad, so a row maximum
//      is 15 max + 2 shuffles; the sum stays per thread until the end.
//   3. O += P V: P rounded to bf16/f16 in registers and used directly as the A operand. The
//      m16n8 accumulator of key block j holds (row g, keys 8j + 2t, +1) and (row g + 8, the same
//      keys), g = lane/4, t = lane%4; the m16k16 A fragment of key slice s wants (row g, k 2t, +1),
//      (row g + 8, k 2t, +1), (row g, k 2t + 8, +9), (row g + 8, k 2t + 8, +9). With k = key - 16s,
//      those are accumulator blocks 2s and 2s + 1: the C layout of two n8 blocks is the A layout
//      of one k16 slice, so P never leaves the registers. V is stored key-major (D contiguous),
//      which is K x N for this product: ldmatrix.trans turns each 8 x 8 piece into the B fragment.
//
// Shared tiles are rows x D 16-bit elements (64 rows for K and V, the block's rows for Q) with no
// padding and a XOR swizzle of the 16-byte chunk index by the row (chunk c of row r is stored at
// chunk c ^ (r % 8)): an ldmatrix reads 8 rows at one logical chunk, which the swizzle spreads
// over 8 different 16-byte bank groups; the 16-byte stores of 8 consecutive chunks of a row are a
// permutation of the same 8 groups. Fa2Shape and swizzled_offset live in attention/fa2_layout.hpp,
// host and device, where the CPU test AttentionFa2Layout.* checks these claims.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "arch/sm80/cp_async.cuh"
#include "arch/sm80/mma.cuh"
#include "arch/util.hpp"
#include "attention/fa2_layout.hpp"
#include "attention/flash_common.cuh"

namespace kc::stage3 {

// The chunks of a kRows-row tile (a K or V tile by default) one thread copies: chunk i of the
// thread is linear chunk i . kThreads + threadIdx.x, consecutive threads on consecutive chunks of
// a row (whole 128-byte lines from global memory).
template <class Shape, int kRows = Shape::kBlockKeys>
struct TileCopy {
  static constexpr int kChunksPerThread = kRows * Shape::kChunksPerRow / Shape::kThreads;
  static_assert(kRows * Shape::kChunksPerRow % Shape::kThreads == 0, "every thread copies as many chunks");
  __device__ static int row(int i) { return (i * Shape::kThreads + static_cast<int>(threadIdx.x)) / Shape::kChunksPerRow; }
  __device__ static int chunk(int i) { return (i * Shape::kThreads + static_cast<int>(threadIdx.x)) % Shape::kChunksPerRow; }
  // Where chunk i comes from in a [rows x D] matrix whose tile starts at row0, and whether it
  // exists (row < row_end); a missing chunk gets the matrix's own address, a valid one.
  template <typename T>
  __device__ static const T* source(const T* matrix, std::int64_t row_stride, int row0, int row_end, int i,
                                    bool& valid) {
    valid = row0 + row(i) < row_end;
    return valid ? matrix + (row0 + row(i)) * row_stride + chunk(i) * Shape::kChunkElements : matrix;
  }
};

// Global -> registers -> swizzled shared tile of kRows rows, zeros at and past row_end (rung 03's
// copy).
template <class Shape, int kRows = Shape::kBlockKeys, typename T>
__device__ __forceinline__ void copy_tile_through_registers(std::uint8_t* tile, const T* matrix,
                                                            std::int64_t row_stride, int row0, int row_end) {
  using Copy = TileCopy<Shape, kRows>;
  uint4 staged[Copy::kChunksPerThread];
#pragma unroll
  for (int i = 0; i < Copy::kChunksPerThread; ++i) {
    bool valid;
    const T* source = Copy::source(matrix, row_stride, row0, row_end, i, valid);
    staged[i] = valid ? *reinterpret_cast<const uint4*>(source) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < Copy::kChunksPerThread; ++i)
    *reinterpret_cast<uint4*>(tile + swizzled_offset<Shape>(Copy::row(i), Copy::chunk(i))) = staged[i];
}

// The cp.async copies of a swizzled tile of kRows rows, zeros (src-size 0) at and past row_end
// (rungs 04 and 05).
template <class Shape, int kRows = Shape::kBlockKeys, typename T>
__device__ __forceinline__ void copy_tile_async(std::uint8_t* tile, const T* matrix, std::int64_t row_stride,
                                                int row0, int row_end) {
  using Copy = TileCopy<Shape, kRows>;
  const std::uint32_t tile_address = smem_u32(tile);
#pragma unroll
  for (int i = 0; i < Copy::kChunksPerThread; ++i) {
    bool valid;
    const T* source = Copy::source(matrix, row_stride, row0, row_end, i, valid);
    sm80::cp_async_16(tile_address + swizzled_offset<Shape>(Copy::row(i), Copy::chunk(i)), source, valid);
  }
}

// The same copies with the address arithmetic done once a call (attention rung 21). TileCopy's
// chunk i of a thread is row i . R + tid / C, chunk tid % C (R = kThreads / C rows a pass, C chunks
// a row): the row's swizzle (row % 8) is the same for every i since R is a multiple of 8, so chunk
// i lands at the thread's first offset + i . R rows, and comes from its first address + i . R rows
// of the matrix. One source pointer, one shared offset and one row count a call, where TileCopy's
// row(i) and chunk(i) are per chunk: with two MMA tiles a warp at D = 128 those per-chunk indices
// are what ptxas spills (05_fa2_two_tiles_per_warp.cu).
// kAllRowsExist (attention rung 24, for every K/V tile that ends at or before the block's last
// visible key): the caller promises row0 + kRows <= row_end, so there is no row count, no zero fill
// and no choice between a chunk's address and a stand-in for a missing row.
template <class Shape, int kRows = Shape::kBlockKeys, bool kAllRowsExist = false, typename T>
__device__ __forceinline__ void copy_tile_async_lean(std::uint8_t* tile, const T* matrix, std::int64_t row_stride,
                                                     int row0, int row_end) {
  constexpr int kRowsPerPass = Shape::kThreads / Shape::kChunksPerRow;
  static_assert(kRowsPerPass % 8 == 0 && kRows % kRowsPerPass == 0, "a pass covers whole swizzle periods");
  const int thread_row = static_cast<int>(threadIdx.x) / Shape::kChunksPerRow;
  const int thread_chunk = static_cast<int>(threadIdx.x) % Shape::kChunksPerRow;
  const std::uint32_t first_offset = smem_u32(tile) + swizzled_offset<Shape>(thread_row, thread_chunk);
  const T* first_source = matrix + (row0 + thread_row) * row_stride + thread_chunk * Shape::kChunkElements;
  const int rows_left = row_end - row0 - thread_row;  // chunk i exists while i . R < rows_left
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    if constexpr (kAllRowsExist) {
      sm80::cp_async_16(first_offset + i * kRowsPerPass * Shape::kRowBytes,
                        first_source + i * kRowsPerPass * row_stride);
    } else {
      const bool valid = i * kRowsPerPass < rows_left;
      sm80::cp_async_16(first_offset + i * kRowsPerPass * Shape::kRowBytes,
                        valid ? first_source + i * kRowsPerPass * row_stride : matrix, valid);
    }
  }
}

// mma.sync m16n8k16 for the element type: bf16 or f16 inputs, FP32 accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    sm80::mma_m16n8k16_f16(d, a, b0, b1);
  else
    sm80::mma_m16n8k16_bf16(d, a, b0, b1);
}

// Q's A fragments of a warp's tiles for one k16 slice of D. Held: loaded once by ldmatrix and kept
// in registers, D/4 per tile. Matrices (rows 0-7, chunk 2s), (rows 8-15, 2s), (rows 0-7, 2s + 1),
// (rows 8-15, 2s + 1) of a tile are a0..a3 of slice s.
template <class Shape, bool kHeld = Shape::kQInRegisters, bool kSplitXor = false>
struct WarpQ {
  std::uint32_t fragments[Shape::kTilesPerWarp][Shape::kDimSlices][4];

  __device__ void load(std::uint32_t q_tile, int warp) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
    for (int m = 0; m < Shape::kTilesPerWarp; ++m) {
      const int tile_row = Shape::kWarpRows * warp + 16 * m + lane % 16;
#pragma unroll
      for (int s = 0; s < Shape::kDimSlices; ++s)
        sm80::ldmatrix_x4(fragments[m][s], q_tile + swizzled_offset<Shape>(tile_row, 2 * s + lane / 16));
    }
  }
  __device__ void slice(int tile, int s, std::uint32_t (&a)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = fragments[tile][s][i];
  }
};

// Not held (two tiles at D = 128, which rung 05 builds only on request: they spill): the same
// ldmatrix, issued for each K/V tile from the Q tile, which stays in shared memory for the loop.
// Slice s reads chunk 2s + c where slice 0 reads chunk c: the slice-0 offset XOR 32s bytes (see
// scores()); tile m is 16 rows further, which leaves those bits alone. kSplitXor (rung 23): that
// XOR as xor_slice_offset computes it.
template <class Shape, bool kSplitXor>
struct WarpQ<Shape, false, kSplitXor> {
  std::uint32_t q_tile = 0;
  std::uint32_t lane_offset = 0;

  __device__ void load(std::uint32_t tile, int warp) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    q_tile = tile;
    lane_offset = q_lane_offset<Shape>(warp, lane);
  }
  __device__ void slice(int tile, int s, std::uint32_t (&a)[4]) const {
    if constexpr (kSplitXor)
      sm80::ldmatrix_x4(a, q_tile + 16 * tile * Shape::kRowBytes + xor_slice_offset(lane_offset, s));
    else
      sm80::ldmatrix_x4(a, q_tile + 16 * tile * Shape::kRowBytes + (lane_offset ^ (32 * s)));
  }
};

// The online softmax of one 16-row tile of S against kKeyBlocks x 8 keys, in the m16n8
// accumulator layout that mma.sync and WGMMA share (per warp): this thread holds rows lane/4
// (h = 0) and lane/4 + 8 (h = 1) of the tile, columns 8j + 2 (lane % 4) + {0, 1} of each 8-key
// block j; the row's other columns are in the 3 other lanes of its quad. S becomes
// 2^(scale_log2 . s - max) in place and the rows' running max and sum move on; `rescale` receives
// the factor 2^(old max - new max) each row's O accumulators must still be multiplied by
// (rescale_rows). kMask: keys at or past a row's visible end (row_ends[h], key0 the tile's first
// key) get -inf. Split from the rescale so that the Hopper rung 07 can compute P while the
// previous tile's P V still runs on the tensor cores, and apply the rescale one iteration later,
// under the next tile's Q K^T, just before this tile's P V is issued.
// kScaleInExponent (attention rung 13; scale_log2 > 0 only): the maximum is taken over the raw
// scores and scaled once a row, and each probability is 2^(fma(s, scale_log2, -max)): one FFMA
// where the scores were first multiplied (FMUL) and then shifted (FADD). The maximum of the scaled
// scores is the scaled maximum only for a positive scale.
// kLazyRescale (attention rung 15): a row keeps the exponent base it has (RowState::max is then the
// base, not the maximum) while the tile's maximum is at most kLazyRescaleLog2 above it, so its
// probabilities stay below 2^kLazyRescaleLog2 and its rescale factor is exactly 1; only a larger
// (or a first finite, or a NaN) maximum moves the base, as every tile does without the option.
// The sum and O are relative to the same base, so O / sum and the LSE (base + log2 sum) are the
// same numbers; a factor of 1 in every row of a warp lets the caller skip O's multiply.
// kFlawBaseNeverMoves (a negative control's flaw, with kLazyRescale): once a row has a finite
// base it keeps it whatever the rise, so probabilities overflow where the scores climb far enough
// (AttentionLadderGpu.RisingScoresMoveTheSoftmaxBaseCorrectly must catch it).
inline constexpr float kLazyRescaleLog2 = 8.f;
// kFmaExpEvery (attention rung 26; 0: none): the exponentials of every kFmaExpEvery-th block of 8
// keys (j % kFmaExpEvery == kFmaExpEvery - 1) on the FMA pipe (exp2_on_fma), the others on MUFU.
template <bool kMask, bool kScaleInExponent = false, int kKeyBlocks, bool kLazyRescale = false,
          bool kFlawBaseNeverMoves = false, int kFmaExpEvery = 0>
__device__ __forceinline__ void softmax_probabilities(float (&s)[kKeyBlocks][4], RowState* rows,
                                                      const int* row_ends, float scale_log2, int key0,
                                                      float (&rescale)[2]) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float tile_max[2] = {-CUDART_INF_F, -CUDART_INF_F};
  // Element (j, e) holds key key0 + 8j + 2(lane % 4) + e % 2: masked when 8j + e % 2 reaches
  // `first_masked` of its row (a compare against a constant per element).
  int first_masked[2] = {0, 0};
  if constexpr (kMask)
    for (int h = 0; h < 2; ++h) first_masked[h] = row_ends[h] - key0 - 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < kKeyBlocks; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      float value = kScaleInExponent ? s[j][e] : s[j][e] * scale_log2;
      if constexpr (kMask) {
        if (8 * j + e % 2 >= first_masked[h]) value = -CUDART_INF_F;
      }
      s[j][e] = value;
      tile_max[h] = core::max_propagate_nan(tile_max[h], value);
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    RowState& state = rows[h];
    tile_max[h] = core::max_propagate_nan(tile_max[h], core::shuffle_xor(tile_max[h], 1));
    tile_max[h] = core::max_propagate_nan(tile_max[h], core::shuffle_xor(tile_max[h], 2));
    if constexpr (kScaleInExponent) tile_max[h] *= scale_log2;
    float new_max = core::max_propagate_nan(state.max, tile_max[h]);
    // Lazy: keep the base where the rise is a finite number of at most kLazyRescaleLog2 (a NaN or
    // an infinite difference compares false and moves the base, as without the option).
    const bool keep =
        kLazyRescale && (kFlawBaseNeverMoves ? state.max != -CUDART_INF_F : new_max - state.max <= kLazyRescaleLog2);
    if (keep) new_max = state.max;
    const float base = exponent_base(new_max);
    rescale[h] = keep ? 1.f : exp2_flush_to_zero(state.max - base);
    state.max = new_max;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kKeyBlocks; ++j)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        const float exponent = kScaleInExponent ? fmaf(s[j][e], scale_log2, -base) : s[j][e] - base;
        if constexpr (kFmaExpEvery > 0)
          s[j][e] = j % kFmaExpEvery == kFmaExpEvery - 1 ? exp2_on_fma(exponent) : exp2_flush_to_zero(exponent);
        else
          s[j][e] = exp2_flush_to_zero(exponent);
        sum += s[j][e];
      }
    state.sum = state.sum * rescale[h] + sum;
  }
}

// O's two rows of this thread (kDimBlocks blocks of 8 columns) times their rescale factors.
template <int kDimBlocks>
__device__ __forceinline__ void rescale_rows(float (&o)[kDimBlocks][4], const float (&rescale)[2]) {
#pragma unroll
  for (int n = 0; n < kDimBlocks; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] *= rescale[e / 2];
}

// rescale_rows, skipped where every factor of the warp's rows is 1: one vote, then a warp-uniform
// branch over the multiplies (the lazy base's rescale: rungs 15 and 16).
template <int kDimBlocks>
__device__ __forceinline__ void rescale_rows_unless_all_one(float (&o)[kDimBlocks][4], const float (&rescale)[2]) {
  if (__any_sync(0xffffffffu, rescale[0] != 1.f || rescale[1] != 1.f)) rescale_rows(o, rescale);
}

// Both at once: the online softmax step of rungs 03-06. kScaleInExponent, kLazyRescale and
// kFlawBaseNeverMoves as softmax_probabilities' (rung 16 and its control); with kLazyRescale the
// rescale is skipped where the warp's factors are all 1.
template <bool kMask, bool kScaleInExponent = false, bool kLazyRescale = false, bool kFlawBaseNeverMoves = false,
          int kKeyBlocks, int kDimBlocks>
__device__ __forceinline__ void online_softmax_tile(float (&s)[kKeyBlocks][4], float (&o)[kDimBlocks][4],
                                                    RowState* rows, const int* row_ends, float scale_log2,
                                                    int key0) {
  float rescale[2];
  softmax_probabilities<kMask, kScaleInExponent, kKeyBlocks, kLazyRescale, kFlawBaseNeverMoves>(s, rows, row_ends,
                                                                                               scale_log2, key0, rescale);
  if constexpr (kLazyRescale)
    rescale_rows_unless_all_one(o, rescale);
  else
    rescale_rows(o, rescale);
}

// The A fragment of key slice `slice` (keys 16 slice .. + 15) of P = the softmax'd S of one 16-row
// tile, rounded to T: accumulator blocks 2 slice and 2 slice + 1 (the C layout of two n8 blocks is
// the A layout of one k16 slice).
template <typename T, int kKeyBlocks>
__device__ __forceinline__ void p_fragment(const float (&p)[kKeyBlocks][4], int slice, std::uint32_t (&a)[4]) {
  a[0] = pack_pair<T>(p[2 * slice][0], p[2 * slice][1]);
  a[1] = pack_pair<T>(p[2 * slice][2], p[2 * slice][3]);
  a[2] = pack_pair<T>(p[2 * slice + 1][0], p[2 * slice + 1][1]);
  a[3] = pack_pair<T>(p[2 * slice + 1][2], p[2 * slice + 1][3]);
}

// O = acc / l and the LSE of one 16-row tile's two rows of this thread (tile_row0 + lane/4 + 8h,
// the layout above), stored; rows at or past Sq skipped, row_ends[h] = 0: O = 0, LSE = -inf.
template <typename T, int kDimBlocks>
__device__ __forceinline__ void store_tile_rows(const float (&o)[kDimBlocks][4], const RowState* rows,
                                                const int* row_ends, const HeadView<T>& head,
                                                const AttentionParams<T>& args, int tile_row0) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = rows[h].sum;
    sum += core::shuffle_xor(sum, 1);
    sum += core::shuffle_xor(sum, 2);
    const int query = tile_row0 + lane / 4 + 8 * h;
    if (query >= args.q_len) continue;
    const RowResult result = finish_row(rows[h].max, sum, row_ends[h]);
    T* o_row = head.o + query * args.q_row_stride + 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < kDimBlocks; ++n)
      *reinterpret_cast<typename PackedPair<T>::Type*>(o_row + 8 * n) =
          PackedPair<T>::from_floats(o[n][2 * h] * result.o_scale, o[n][2 * h + 1] * result.o_scale);
    if (lane % 4 == 0) head.lse[query] = result.lse;
  }
}

// One warp's FlashAttention-2 state and step. Rows: this thread's rows are lane/4 + 8r of the
// warp's, r < kThreadRows: rows lane/4 (r = 2m) and lane/4 + 8 (r = 2m + 1) of MMA tile m.
// kLeanSoftmax (attention rung 16; a positive scale only): the softmax of the Hopper rungs 13 and
// 15 — the scale inside the exponent's FFMA, each row's base moved only past a rise of
// kLazyRescaleLog2, and O's rescale skipped where every factor of the warp's tile is 1.
// kFlawBaseNeverMoves: the negative control's flaw (softmax_probabilities), with kLeanSoftmax.
// kPrefetchFragments (attention rung 23): the same MMAs in the same order, each ldmatrix issued one
// step ahead of the MMAs that read it, into the other of two fragment buffers (scores_prefetched,
// accumulate_pv_prefetched), and the slices' XOR offsets split as xor_slice_offset does.
template <typename T, class Shape, bool kLeanSoftmax = false, bool kFlawBaseNeverMoves = false,
          bool kPrefetchFragments = false>
struct Fa2Warp {
  static constexpr int kTiles = Shape::kTilesPerWarp;
  WarpQ<Shape, Shape::kQInRegisters, kPrefetchFragments> q;  // Q fragments, or where to read them
  float o[kTiles][Shape::kDimBlocks][4] = {};       // O accumulators, 16 rows x D per tile
  RowState row[Shape::kThreadRows];                 // rows lane/4 + 8r

  // Q of this warp's rows from the swizzled Q tile (the fragments, or their address).
  __device__ void load_q(std::uint32_t q_tile, int warp) { q.load(q_tile, warp); }

  // S = 0 before a tile's Q K^T accumulates into it.
  __device__ static void zero_scores(float (&s)[kTiles][Shape::kKeyBlocks][4]) {
#pragma unroll
    for (int m = 0; m < kTiles; ++m)
#pragma unroll
      for (int j = 0; j < Shape::kKeyBlocks; ++j) s[m][j][0] = s[m][j][1] = s[m][j][2] = s[m][j][3] = 0.f;
  }

  // S (16 x 64 per tile, this warp's rows against the tile's keys) = Q K^T, unscaled.
  __device__ void scores(float (&s)[kTiles][Shape::kKeyBlocks][4], std::uint32_t k_tile) const {
    if constexpr (kPrefetchFragments) {
      scores_prefetched(s, k_tile);
      return;
    }
    const int lane = static_cast<int>(threadIdx.x) % 32;
    // Matrices (keys 0-7, chunk 2d), (keys 0-7, 2d + 1), (keys 8-15, 2d), (keys 8-15, 2d + 1) of a
    // 16-key pair of n8 blocks: b0, b1 of block j and b0, b1 of block j + 1. Slice d reads chunk
    // 2d + c where slice 0 reads chunk c (0 or 1): swizzled, that is the slice-0 offset XOR 32d
    // bytes (2d + c = 2d ^ c, and the swizzle XORs the chunk index); key block j is 8j rows further,
    // which leaves those bits alone. One register per lane, not one per (slice, block).
    const std::uint32_t lane_offset = k_lane_offset<Shape>(lane);
    zero_scores(s);
#pragma unroll
    for (int d = 0; d < Shape::kDimSlices; ++d) {
      std::uint32_t a[kTiles][4];
#pragma unroll
      for (int m = 0; m < kTiles; ++m) q.slice(m, d, a[m]);
      const std::uint32_t slice = k_tile + (lane_offset ^ (32 * d));
#pragma unroll
      for (int j = 0; j < Shape::kKeyBlocks; j += 2) {
        std::uint32_t b[4];
        sm80::ldmatrix_x4(b, slice + 8 * j * Shape::kRowBytes);
#pragma unroll
        for (int m = 0; m < kTiles; ++m) {  // one K fragment, one MMA per tile
          mma_16816<T>(s[m][j], a[m], b[0], b[1]);
          mma_16816<T>(s[m][j + 1], a[m], b[2], b[3]);
        }
      }
    }
  }

  // scores() with its fragments loaded a step ahead (rung 23). A step is one 16-key pair of n8
  // blocks of one k16 slice d of D, in scores()' order (d outer); before the MMAs of step i the
  // warp issues the ldmatrix of step i + 1's K fragment into the other buffer, and, when step i + 1
  // opens slice d + 1, that slice's Q fragments (the other Q buffer). Where scores() waits for each
  // LDSM right after issuing it (ptxas keeps one fragment buffer when S and O fill the registers),
  // here the LDSM of the next step is under this step's 2 kTiles HMMAs.
  __device__ void scores_prefetched(float (&s)[kTiles][Shape::kKeyBlocks][4], std::uint32_t k_tile) const {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const std::uint32_t lane_offset = k_lane_offset<Shape>(lane);
    constexpr int kPairs = Shape::kKeyBlocks / 2;
    constexpr int kSteps = Shape::kDimSlices * kPairs;
    zero_scores(s);
    std::uint32_t a[2][kTiles][4];  // Q: slice d in a[d % 2]
    std::uint32_t b[2][4];          // K: step i in b[i % 2]
    const auto load_k = [&](int step, std::uint32_t(&fragment)[4]) {
      const int d = step / kPairs;
      const int j = 2 * (step % kPairs);
      sm80::ldmatrix_x4(fragment, k_tile + xor_slice_offset(lane_offset, d) + 8 * j * Shape::kRowBytes);
    };
#pragma unroll
    for (int m = 0; m < kTiles; ++m) q.slice(m, 0, a[0][m]);
    load_k(0, b[0]);
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      const int d = step / kPairs;
      const int j = 2 * (step % kPairs);
      if (step + 1 < kSteps) {
        if ((step + 1) % kPairs == 0) {
#pragma unroll
          for (int m = 0; m < kTiles; ++m) q.slice(m, d + 1, a[(d + 1) % 2][m]);
        }
        load_k(step + 1, b[(step + 1) % 2]);
      }
#pragma unroll
      for (int m = 0; m < kTiles; ++m) {
        mma_16816<T>(s[m][j], a[d % 2][m], b[step % 2][0], b[step % 2][1]);
        mma_16816<T>(s[m][j + 1], a[d % 2][m], b[step % 2][2], b[step % 2][3]);
      }
    }
  }

  // The online softmax on S in place (S becomes 2^(s - max) in log2 units), the rescaling of O
  // and l, one MMA tile after the other (online_softmax_tile). kMask: keys at or past a row's
  // visible end get -inf (row_ends: this thread's rows' visible ends; key0: the tile's first key).
  template <bool kMask>
  __device__ void softmax(float (&s)[kTiles][Shape::kKeyBlocks][4], float scale_log2, int key0,
                          const int (&row_ends)[Shape::kThreadRows]) {
#pragma unroll
    for (int m = 0; m < kTiles; ++m)
      online_softmax_tile<kMask, kLeanSoftmax, kLeanSoftmax, kFlawBaseNeverMoves>(s[m], o[m], row + 2 * m,
                                                                                  row_ends + 2 * m, scale_log2, key0);
  }

  // O += P V, P = the softmax'd S rounded to T in registers (accumulator blocks 2s, 2s + 1 are the
  // A fragment of key slice s), V fragments by ldmatrix.trans: matrices (keys 0-7, chunk 2n),
  // (keys 8-15, 2n), (keys 0-7, 2n + 1), (keys 8-15, 2n + 1) are b0, b1 of O block 2n and b0, b1
  // of block 2n + 1.
  __device__ void accumulate_pv(const float (&p)[kTiles][Shape::kKeyBlocks][4], std::uint32_t v_tile) {
    if constexpr (kPrefetchFragments) {
      accumulate_pv_prefetched(p, v_tile);
      return;
    }
    const int lane = static_cast<int>(threadIdx.x) % 32;
    // O block pair n reads chunk n + c where pair 0 reads chunk c (n even): the pair-0 offset XOR
    // 16n bytes, as for K in scores().
    const std::uint32_t lane_offset = v_lane_offset<Shape>(lane);
#pragma unroll
    for (int s = 0; s < Shape::kKeySlices; ++s) {
      std::uint32_t a[kTiles][4];
#pragma unroll
      for (int m = 0; m < kTiles; ++m) p_fragment<T>(p[m], s, a[m]);
#pragma unroll
      for (int n = 0; n < Shape::kDimBlocks; n += 2) {
        std::uint32_t b[4];
        sm80::ldmatrix_x4_trans(b, v_tile + (lane_offset ^ (16 * n)) + 16 * s * Shape::kRowBytes);
#pragma unroll
        for (int m = 0; m < kTiles; ++m) {  // one V fragment, one MMA per tile
          mma_16816<T>(o[m][n], a[m], b[0], b[1]);
          mma_16816<T>(o[m][n + 1], a[m], b[2], b[3]);
        }
      }
    }
  }

  // accumulate_pv() with its V fragments loaded a step ahead (rung 23): a step is one pair of O's n8
  // blocks of one key slice s (s outer, as there); the ldmatrix.trans of step i + 1 is issued into
  // the other buffer before the MMAs of step i. P's fragments are converted where a slice opens.
  __device__ void accumulate_pv_prefetched(const float (&p)[kTiles][Shape::kKeyBlocks][4], std::uint32_t v_tile) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const std::uint32_t lane_offset = v_lane_offset<Shape>(lane);
    constexpr int kPairs = Shape::kDimBlocks / 2;
    constexpr int kSteps = Shape::kKeySlices * kPairs;
    std::uint32_t b[2][4];  // V: step i in b[i % 2]
    const auto load_v = [&](int step, std::uint32_t(&fragment)[4]) {
      const int s = step / kPairs;
      const int pair = step % kPairs;  // O blocks 2 pair, 2 pair + 1: the pair-0 offset XOR 32 pair
      sm80::ldmatrix_x4_trans(fragment, v_tile + xor_slice_offset(lane_offset, pair) + 16 * s * Shape::kRowBytes);
    };
    load_v(0, b[0]);
    std::uint32_t a[kTiles][4];
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      const int s = step / kPairs;
      const int n = 2 * (step % kPairs);
      if (n == 0) {
#pragma unroll
        for (int m = 0; m < kTiles; ++m) p_fragment<T>(p[m], s, a[m]);
      }
      if (step + 1 < kSteps) load_v(step + 1, b[(step + 1) % 2]);
#pragma unroll
      for (int m = 0; m < kTiles; ++m) {
        mma_16816<T>(o[m][n], a[m], b[step % 2][0], b[step % 2][1]);
        mma_16816<T>(o[m][n + 1], a[m], b[step % 2][2], b[step % 2][3]);
      }
    }
  }

  // O = acc / l and the LSE of this thread's rows, stored (rows at or past Sq skipped);
  // row_ends: their visible ends (0: O = 0, LSE = -inf).
  __device__ void store(const HeadView<T>& head, const AttentionParams<T>& args, int warp_row0,
                        const int (&row_ends)[Shape::kThreadRows]) const {
#pragma unroll
    for (int m = 0; m < kTiles; ++m) store_tile_rows(o[m], row + 2 * m, row_ends + 2 * m, head, args, warp_row0 + 16 * m);
  }
};

// The visible ends of this thread's rows (lane/4 + 8r of the warp's); 0 past Sq.
template <typename T, int kThreadRows>
__device__ __forceinline__ void thread_row_ends(const AttentionParams<T>& args, int warp_row0,
                                                int (&row_ends)[kThreadRows]) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int r = 0; r < kThreadRows; ++r) {
    const int query = warp_row0 + lane / 4 + 8 * r;
    row_ends[r] = query < args.q_len ? visible_key_end(args, query) : 0;
  }
}

// Launches Rung::kKernel (a rung's kernel for one T and D) on the grid of the block's query tiles
// with Rung::kSmemBytes of dynamic shared memory, allowed once per kernel.
template <class Rung, typename T>
void launch_fa2_kernel(const AttentionArgs<T>& args, cudaStream_t stream) {
  using Shape = typename Rung::Shape;
  static const bool smem_allowed = [] {
    allow_dynamic_smem(Rung::kKernel, Rung::kSmemBytes);
    return true;
  }();
  (void)smem_allowed;
  Rung::kKernel<<<flash_grid(args, Shape::kBlockRows), Shape::kThreads, Rung::kSmemBytes, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

// Checks the arguments, then launches Rung<T, D> for the problem's D (64 or 128). `packed`: Rung's
// kernel runs the packed variable-length form (require_flash_args).
template <template <typename, int> class Rung, typename T>
void launch_fa2_rung(const AttentionArgs<T>& args, cudaStream_t stream, const char* rung_name, bool packed = false) {
  static_assert(Rung<T, 64>::Shape::kBlockRows <= kFlashMaxBlockRows &&
                    Rung<T, 128>::Shape::kBlockRows <= kFlashMaxBlockRows,
                "attention_forward checks Sq against kFlashMaxBlockRows before it picks a rung");
  require_flash_args(args, rung_name,
                     std::max(Rung<T, 64>::Shape::kBlockRows, Rung<T, 128>::Shape::kBlockRows), packed);
  if (args.head_dim == 64)
    launch_fa2_kernel<Rung<T, 64>>(args, stream);
  else
    launch_fa2_kernel<Rung<T, 128>>(args, stream);
}

}  // namespace kc::stage3
