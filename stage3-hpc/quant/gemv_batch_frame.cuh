// quant/gemv_batch_frame.cuh — the frame of the weight-only GEMVs' batch rungs (the GGUF GEMV's
// rung 09, the int4 GEMV's rung 03): M up to 64 rows of x on the weights-as-A fragment layout, in
// hgemm rung 14's frame — a CTA owns kGgufBatchColumns (128) output columns and a split of the K
// chunks (128 k each), its warps share a cp.async ring of chunks (the 8 tiles' quants and scale
// entries, and the 8T rows of x), and split-K partials are added by the last CTA of each column
// block in the same launch (gemm/split_k_last_cta.cuh). The plan and the workspace are
// plan_gguf_batch's (kc/stage3/gemv_gguf_args.hpp): they depend on M, N and K only.
//
// A rung supplies a Format: its arguments (Args, with m, n, k, x, quants, scales and y as the GGUF
// and int4 arguments name them), the bytes of a tile-chunk (kQuantVectors 16-byte vectors of
// quants a lane, kTileScaleVectors 16-byte vectors of scale entries a tile), the CTAs an SM its
// instances are compiled for (kMinCtasPerSm<T>), and multiply_chunk<T>(stage, warp,
// first_token_tile, lane, acc): the block arithmetic of one chunk of the warp's two tiles against
// its token group's tiles. quant/09_gemv_gguf_batch.cu's header tells the frame's story.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "arch/sm80/cp_async.cuh"
#include "arch/util.hpp"
#include "gemm/split_k_last_cta.cuh"
#include "kc/common/error.hpp"
#include "kc/stage3/gemv_gguf_args.hpp"

namespace kc::stage3::gemv_batch {

using bf16 = __nv_bfloat16;

constexpr int kTiles = kGgufBatchColumns / 16;  // 8 tiles of 16 columns a CTA
constexpr int kTilesPerWarp = 2;                // a warp's tiles: 4 warps of a token group cover the CTA's 8
constexpr int kWarpsPerGroup = kTiles / kTilesPerWarp;
constexpr int kStages = 4;
constexpr int kChunkK = 4 * kGgufBlockWeights;  // 128 k a chunk
constexpr int kXRowBytes = kChunkK * 2;         // 256 bytes of one row of x a chunk
constexpr int kXPieces = kXRowBytes / 16;       // 16 pieces of 16 bytes
// The last CTA adds the split-K partials one fragment at a time (split_k_last_cta.cuh), a chain of
// L2 loads a fragment: all of a thread's (up to 8) at once would take registers that cost some
// instances a CTA an SM (q4_0 at 9-16 rows on sm_90a), and the plan's splits — so y's bits —
// follow the CTAs an SM.
constexpr int kFragmentsAtOnce = 1;

// The CTA's shape for T token tiles: kGroups token groups of 4 warps; group g multiplies token
// tiles [g x kGroupTiles, (g + 1) x kGroupTiles) (those below T) with all 8 tiles of weights, so
// two groups decode each block twice but hold half the accumulators, and the SM gets twice the
// warps (gguf_batch_token_groups in gemv_gguf_args.hpp says from which T).
template <int kTokenTiles>
struct Shape {
  static constexpr int kGroups = gguf_batch_token_groups(kTokenTiles);
  static constexpr int kGroupTiles = (kTokenTiles + kGroups - 1) / kGroups;
  static constexpr int kWarps = kWarpsPerGroup * kGroups;
  static constexpr int kThreads = 32 * kWarps;
};

// One stage: the 8 tiles' quants ([tile][vector v][lane] 16 bytes each, so that a warp's LDS of
// vector v reads 512 contiguous bytes), their scale entries (each tile's as the layout stores
// them), then the 8T rows of x (row r's 16-byte piece p at p ^ 4 (r & 1): rows g and g + 1, which
// one LDS.128 phase reads, on different banks).
template <class Format, int kTokenTiles>
struct Stage {
  static constexpr int kQuantVectors = Format::kQuantVectors;          // 16-byte vectors a lane
  static constexpr int kTileScaleVectors = Format::kTileScaleVectors;  // 16-byte vectors a tile
  static constexpr int kQuants = kTiles * 32 * kQuantVectors * 16;
  static constexpr int kScales = kTiles * kTileScaleVectors * 16;
  static constexpr int kRows = 8 * kTokenTiles;
  static constexpr int kX = kRows * kXRowBytes;
  static constexpr int kBytes = kQuants + kScales + kX;
  static constexpr int kSmemBytes = kStages * kBytes + 128;  // + alignment slack for the 128-byte start
  static constexpr int kQuantPieces = kQuants / 16, kScalePieces = kScales / 16, kXPieces = kX / 16;
  static_assert(kQuants % 128 == 0 && kScales % 128 == 0 && kBytes % 128 == 0, "pieces stay 128-byte aligned");
};

__device__ __forceinline__ int x_piece_offset(int row, int piece) {
  return row * kXRowBytes + ((piece ^ ((row & 1) << 2)) << 4);
}

// A thread's share of every chunk's copies, worked out once: for each of its 16-byte pieces the
// source at chunk 0 (a chunk further on is a fixed step away: 32 x kQuantVectors vectors of quants,
// the tile's kTileScaleVectors of scales, 128 k of x), the place in a stage, and whether it is read at all —
// tiles past the weight's (N's padding to 16 is in the layout) and rows of x past M are written as
// zeros (src-size 0) and add nothing; a piece of x past K (the last chunk's padding blocks) too.
template <class Format, int kTokenTiles>
struct CopyPlan {
  using S = Stage<Format, kTokenTiles>;
  using Args = typename Format::Args;
  static constexpr int kThreads = Shape<kTokenTiles>::kThreads;
  static constexpr int kQuantPasses = (S::kQuantPieces + kThreads - 1) / kThreads;
  static constexpr int kScalePasses = (S::kScalePieces + kThreads - 1) / kThreads;
  static constexpr int kXPasses = (S::kXPieces + kThreads - 1) / kThreads;
  const uint4* quants[kQuantPasses];
  const uint4* scales[kScalePasses];
  const bf16* x[kXPasses];
  std::uint32_t quant_at[kQuantPasses], scale_at[kScalePasses], x_at[kXPasses];
  int x_k[kXPasses];  // the piece's k within a chunk; x[p] == nullptr: not copied (zeros)

  __device__ __forceinline__ CopyPlan(const Args& a, int first_tile, int chunks) {
    const int tiles = (a.n + 15) / 16;
    const int thread = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int pass = 0; pass < kQuantPasses; ++pass) {
      const int i = thread + pass * kThreads;
      const int tile = i / (32 * S::kQuantVectors), within = i % (32 * S::kQuantVectors);
      const int lane = within / S::kQuantVectors, v = within % S::kQuantVectors;
      const bool valid = i < S::kQuantPieces && first_tile + tile < tiles;
      quants[pass] = valid ? reinterpret_cast<const uint4*>(a.quants) +
                                 static_cast<std::size_t>(first_tile + tile) * chunks * 32 * S::kQuantVectors + within
                           : nullptr;
      quant_at[pass] = i < S::kQuantPieces ? ((tile * S::kQuantVectors + v) * 32 + lane) * 16 : ~0u;
    }
#pragma unroll
    for (int pass = 0; pass < kScalePasses; ++pass) {
      const int i = thread + pass * kThreads;
      const int tile = i / S::kTileScaleVectors, within = i % S::kTileScaleVectors;
      const bool valid = i < S::kScalePieces && first_tile + tile < tiles;
      scales[pass] = valid ? reinterpret_cast<const uint4*>(a.scales) +
                                 static_cast<std::size_t>(first_tile + tile) * chunks * S::kTileScaleVectors + within
                           : nullptr;
      scale_at[pass] = i < S::kScalePieces ? S::kQuants + i * 16 : ~0u;
    }
#pragma unroll
    for (int pass = 0; pass < kXPasses; ++pass) {
      const int i = thread + pass * kThreads;
      const int row = i / kXPieces, piece = i % kXPieces;
      x[pass] = i < S::kXPieces && row < a.m ? a.x + static_cast<std::size_t>(row) * a.k + piece * 8 : nullptr;
      x_k[pass] = piece * 8;
      x_at[pass] = i < S::kXPieces ? S::kQuants + S::kScales + x_piece_offset(row, piece) : ~0u;
    }
  }

  // Issues the copies of chunk `chunk` into the stage at shared address `stage`.
  __device__ __forceinline__ void copy(const Args& a, int chunk, std::uint32_t stage) const {
#pragma unroll
    for (int pass = 0; pass < kQuantPasses; ++pass)
      if (quant_at[pass] != ~0u) {
        const bool valid = quants[pass] != nullptr;
        sm80::cp_async_16(stage + quant_at[pass],
                          valid ? static_cast<const void*>(quants[pass] +
                                                           static_cast<std::size_t>(chunk) * 32 * S::kQuantVectors)
                                : static_cast<const void*>(a.quants),
                          valid);
      }
#pragma unroll
    for (int pass = 0; pass < kScalePasses; ++pass)
      if (scale_at[pass] != ~0u) {
        const bool valid = scales[pass] != nullptr;
        sm80::cp_async_16(stage + scale_at[pass],
                          valid ? static_cast<const void*>(scales[pass] +
                                                           static_cast<std::size_t>(chunk) * S::kTileScaleVectors)
                                : static_cast<const void*>(a.scales),
                          valid);
      }
#pragma unroll
    for (int pass = 0; pass < kXPasses; ++pass)
      if (x_at[pass] != ~0u) {
        const int k = chunk * kChunkK + x_k[pass];
        const bool valid = x[pass] != nullptr && k < a.k;
        sm80::cp_async_16(stage + x_at[pass], valid ? x[pass] + chunk * kChunkK : a.x, valid);
      }
  }
};

// acc[mt][nt]: the 16 x 8 product of the warp's tile mt and its group's token tile nt; lane (g, t)
// holds rows (output columns) g and g + 8 of the tile x x rows 2t and 2t + 1 of the token tile:
// {y[2t][g], y[2t + 1][g], y[2t][g + 8], y[2t + 1][g + 8]}, relative to the tiles' origins.
template <int kTokenTiles>
using Accumulators = float[kTilesPerWarp][Shape<kTokenTiles>::kGroupTiles][4];

// y[m][n] for an output inside M x N; nothing outside.
template <class Args>
__device__ __forceinline__ void store_output(const Args& a, int m, int n, float sum) {
  if (m < a.m && n < a.n) a.y[static_cast<std::size_t>(m) * a.n + n] = __float2bfloat16_rn(sum);
}

template <class Args>
__device__ __forceinline__ void store_fragment(const Args& a, int n0, int m0, float4 sum) {
  store_output(a, m0, n0, sum.x);
  store_output(a, m0 + 1, n0, sum.y);
  store_output(a, m0, n0 + 8, sum.z);
  store_output(a, m0 + 1, n0 + 8, sum.w);
}

// The CTAs an SM a Format's instance for T token tiles is compiled for.
template <class Format, int kTokenTiles>
constexpr int kMinCtasPerSm = Format::template kMinCtasPerSm<kTokenTiles>;

template <class Format, int kTokenTiles>
__global__ void __launch_bounds__(Shape<kTokenTiles>::kThreads, (kMinCtasPerSm<Format, kTokenTiles>))
    gemv_batch_kernel(typename Format::Args a, GgufBatchPlan plan, GgufBatchWorkspace workspace) {
  using S = Stage<Format, kTokenTiles>;
  using C = Shape<kTokenTiles>;
  constexpr int kGroupTiles = C::kGroupTiles;
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* const smem = smem_raw + ((128 - (smem_u32(smem_raw) & 127)) & 127);
  const auto stage_at = [&](int stage) { return smem + stage * S::kBytes; };

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int group_warp = warp % kWarpsPerGroup, first_token_tile = warp / kWarpsPerGroup * kGroupTiles;
  const int column_block = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int chunk_begin = plan.chunk_begin(split);
  const int steps = plan.chunk_begin(split + 1) - chunk_begin;
  const CopyPlan<Format, kTokenTiles> copies(a, column_block * kTiles, plan.chunks);

  // kStages - 1 chunks in flight before the first product; a group is committed even when empty,
  // so that wait_group counts the same on every path.
#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (stage < steps) copies.copy(a, chunk_begin + stage, smem_u32(stage_at(stage)));
    sm80::cp_async_commit_group();
  }

  Accumulators<kTokenTiles> acc = {};
#pragma unroll 1
  for (int i = 0; i < steps; ++i) {
    sm80::cp_async_wait_group<kStages - 2>();  // this thread's copies of chunk i have landed
    __syncthreads();  // everyone's have; and every warp is done with chunk i - 1, whose stage is refilled next
    const int next = i + kStages - 1;
    if (next < steps) copies.copy(a, chunk_begin + next, smem_u32(stage_at(next % kStages)));
    sm80::cp_async_commit_group();
    Format::template multiply_chunk<kTokenTiles>(stage_at(i % kStages), group_warp, first_token_tile, lane, acc);
  }

  // Fragment f = mt x kGroupTiles + nt (the warp's tile mt, its group's token tile nt): output
  // columns n0 = 128 block + 32 group_warp + 16 mt + g (and + 8), rows of x
  // m0 = 8 (first_token_tile + nt) + 2t (and + 1); rows past M are not stored.
  constexpr int kFragments = kTilesPerWarp * kGroupTiles;
  const int warp_n0 = column_block * kGgufBatchColumns + group_warp * kTilesPerWarp * 16 + g;
  const int warp_m0 = 8 * first_token_tile + 2 * t;
  split_k::ThreadFragments<kFragments> mine;
#pragma unroll
  for (int mt = 0; mt < kTilesPerWarp; ++mt)
#pragma unroll
    for (int nt = 0; nt < kGroupTiles; ++nt)
      mine.value[mt * kGroupTiles + nt] = make_float4(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3]);
  const auto store = [&](int f, float4 sum) {
    store_fragment(a, warp_n0 + 16 * (f / kGroupTiles), warp_m0 + 8 * (f % kGroupTiles), sum);
  };
  if (!plan.needs_workspace()) {
#pragma unroll
    for (int f = 0; f < kFragments; ++f) store(f, mine.value[f]);
    return;
  }

  // hgemm rung 14's split-K reduction (split_k_last_cta.cuh): the partial tile in fragment order,
  // a slot per CTA; the last CTA of the column block to arrive adds the slots in split order (the
  // same bits whichever CTA it is), one fragment at a time, stores y and resets the counter for the
  // next launch.
  constexpr int kSlotVectors = C::kThreads * kFragments;  // float4s per slot
  float4* const block_slots = reinterpret_cast<float4*>(workspace.partials) +
                              static_cast<std::size_t>(column_block) * plan.splits * kSlotVectors;
  split_k::reduce_in_last_cta<kFragments, kSlotVectors, /*kAddsFirstSplitTwice=*/false, kFragmentsAtOnce>(
      mine, block_slots, split, plan.splits, workspace.counters + column_block, store);
}

// An instance with its shared memory allowed (the opt-in beyond 48 KiB, once per instance).
template <class Format, int kTokenTiles>
auto allowed_instance() {
  static const bool allowed = [] {
    KC_CUDA_CHECK(cudaFuncSetAttribute(gemv_batch_kernel<Format, kTokenTiles>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Stage<Format, kTokenTiles>::kSmemBytes));
    return true;
  }();
  (void)allowed;
  return &gemv_batch_kernel<Format, kTokenTiles>;
}

}  // namespace kc::stage3::gemv_batch
