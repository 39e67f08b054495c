// Rung 02 — tiled attention with the online softmax, on CUDA cores (FlashAttention's idea).
//
// Idea: never write S. A block owns 32 query rows of one head and walks the keys in tiles of 32:
// each K/V tile is brought into shared memory once and used by all 32 rows, and each row keeps a
// running maximum m and sum l of its softmax (the online softmax): when a tile raises the
// maximum, what was accumulated so far (l and the row of O) is rescaled by 2^(m_old - m_new)
// instead of being recomputed. O stays in FP32 registers for the whole walk and is divided by l
// once at the end; the LSE, m + log l, falls out of the same two numbers. Memory traffic drops from
// the unfused path's Sq x Sk scores written and read twice to Q, K, V and O read or written once
// per block (K and V once per 32-row tile of queries).
//
// What changed from rung 01: one kernel instead of GEMM, softmax, GEMM; S and P live only in
// registers (one score per lane); no scratch memory; the causal mask is applied where the score is
// made, and keys no row of a block sees are never loaded. The arithmetic moved from the tensor
// cores (rung 01's cuBLAS GEMMs) to CUDA cores: FP32 FMAs, the operands converted from bf16/f16.
//
// Work split: 4 warps x 8 query rows. For one row and one tile, lane j computes the score of key
// j (a D-long dot product of the row of Q, pre-multiplied by scale . log2 e and held in shared
// memory as FP32, with row j of K); the warp reduces the tile's maximum and sum with shuffles;
// then the 32 probabilities are broadcast one by one (shfl) while each lane accumulates its own
// D/32 columns of O against the rows of V. Rows of K and V are padded by one 4-byte word in
// shared memory, so the 32 lanes reading 32 different rows of K at the same column hit 32
// different banks; V is read along rows (consecutive words) and needs no padding to be
// conflict-free, but shares K's layout.
//
// Expected limiter: shared-memory load issue. Each FMA pair of the dot products needs one
// 4-byte K load and one broadcast Q load (LDS), and the P.V loop one V load per 2 FMAs: the
// CUDA cores wait on LDS throughput, and FP32 FMAs are a fraction of the tensor cores' rate in
// any case; rung 03 moves both products onto mma.sync.
//
// SASS to look for: no HMMA; FFMA next to LDS and SHFL.BFLY (the tile's max and sum) and
// SHFL.IDX (broadcasting p); MUFU.EX2 for 2^x; no LDL/STL (O's accumulators stay in registers).
//
// Run just this rung:
//   build/ci/bench/kc-bench --filter stage3/attention_fwd/02_tiled_online_softmax
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "arch/util.hpp"
#include "kc/stage3/attention_args.hpp"
#include "attention/flash_common.cuh"

namespace kc::stage3 {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * core::kWarpSize;
constexpr int kRowsPerWarp = 8;
constexpr int kBlockRows = kWarps * kRowsPerWarp;  // query rows per block
constexpr int kBlockKeys = core::kWarpSize;        // keys per K/V tile: one per lane
constexpr int kChunkElements = 8;                  // 16 bytes of a 16-bit type

template <typename T, int kHeadDim>
struct Rung02Smem {
  static constexpr int kPairs = kHeadDim / 2;          // 4-byte words per row of K or V
  static constexpr int kPaddedPairs = kPairs + 1;      // + 1 word: rows start on different banks
  float q[kBlockRows][kHeadDim];                       // scale . log2 e . Q, FP32
  typename PackedPair<T>::Type k[kBlockKeys][kPaddedPairs];
  typename PackedPair<T>::Type v[kBlockKeys][kPaddedPairs];
};

// Copies rows [row0, row0 + kRows) of a [rows x D] matrix (16-byte chunks, zeros at and past
// row_end) into a padded shared tile of pairs, one 4-byte word at a time (the padded rows are
// not 16-byte aligned).
template <typename T, int kHeadDim, int kRows>
__device__ __forceinline__ void load_padded_tile(typename PackedPair<T>::Type (*tile)[kHeadDim / 2 + 1],
                                                 const T* matrix, std::int64_t row_stride, int row0,
                                                 int row_end) {
  constexpr int kChunksPerRow = kHeadDim / kChunkElements;
  for (int chunk = static_cast<int>(threadIdx.x); chunk < kRows * kChunksPerRow; chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int column = chunk % kChunksPerRow;
    uint4 data = make_uint4(0, 0, 0, 0);
    if (row0 + row < row_end)
      data = *reinterpret_cast<const uint4*>(matrix + (row0 + row) * row_stride + column * kChunkElements);
    auto* words = reinterpret_cast<std::uint32_t*>(&tile[row][column * kChunkElements / 2]);
    words[0] = data.x;
    words[1] = data.y;
    words[2] = data.z;
    words[3] = data.w;
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kThreads) tiled_online_softmax_kernel(AttentionParams<T> args) {
  using Pair = PackedPair<T>;
  constexpr int kPairsPerLane = kHeadDim / 2 / core::kWarpSize;  // O columns per lane, in pairs
  constexpr int kChunksPerRow = kHeadDim / kChunkElements;
  __shared__ Rung02Smem<T, kHeadDim> smem;

  const HeadView<T> head(args);
  const int warp = static_cast<int>(threadIdx.x) / core::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % core::kWarpSize;
  const int block_row0 = static_cast<int>(blockIdx.x) * kBlockRows;
  const int key_end = block_key_end(args, block_row0, kBlockRows);
  const float q_scale = args.scale * kLog2e;

  // Q: FP32, pre-scaled, zeros past Sq.
  for (int chunk = static_cast<int>(threadIdx.x); chunk < kBlockRows * kChunksPerRow; chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int column = chunk % kChunksPerRow;
    uint4 data = make_uint4(0, 0, 0, 0);
    if (block_row0 + row < args.q_len)
      data = *reinterpret_cast<const uint4*>(head.q + (block_row0 + row) * args.q_row_stride +
                                             column * kChunkElements);
    const auto* pairs = reinterpret_cast<const typename Pair::Type*>(&data);
#pragma unroll
    for (int p = 0; p < kChunkElements / 2; ++p) {
      const float2 values = Pair::to_float2(pairs[p]);
      smem.q[row][column * kChunkElements + 2 * p] = values.x * q_scale;
      smem.q[row][column * kChunkElements + 2 * p + 1] = values.y * q_scale;
    }
  }

  // This warp's rows: how many keys each sees (0 for rows past Sq: nothing to compute).
  int visible[kRowsPerWarp];
  RowState state[kRowsPerWarp];
  float acc[kRowsPerWarp][kPairsPerLane][2] = {};
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int query = block_row0 + warp * kRowsPerWarp + r;
    visible[r] = query < args.q_len ? visible_key_end(args, query) : 0;
  }

  for (int kv0 = 0; kv0 < key_end; kv0 += kBlockKeys) {
    __syncthreads();  // every warp is done with the previous tile (and, the first time, Q is stored)
    load_padded_tile<T, kHeadDim, kBlockKeys>(smem.k, head.k, args.kv_row_stride, kv0, key_end);
    load_padded_tile<T, kHeadDim, kBlockKeys>(smem.v, head.v, args.kv_row_stride, kv0, key_end);
    __syncthreads();

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (visible[r] <= kv0) continue;  // the whole row is masked in this tile (warp-uniform)
      const float* q_row = smem.q[warp * kRowsPerWarp + r];
      float score = 0.f;
#pragma unroll 8
      for (int p = 0; p < kHeadDim / 2; ++p) {
        const float2 k = Pair::to_float2(smem.k[lane][p]);
        score = fmaf(q_row[2 * p], k.x, score);
        score = fmaf(q_row[2 * p + 1], k.y, score);
      }
      if (kv0 + lane >= visible[r]) score = -CUDART_INF_F;

      // Online softmax: the new maximum (NaN-propagating), this tile's probabilities against it,
      // and the rescaling of what the earlier tiles left in l and O.
      const float new_max = core::max_propagate_nan(state[r].max, core::warp_reduce_max(score));
      const float base = exponent_base(new_max);
      const float probability = exp2_flush_to_zero(score - base);
      const float rescale = exp2_flush_to_zero(state[r].max - base);
      state[r].sum = state[r].sum * rescale + core::warp_reduce_sum(probability);
      state[r].max = new_max;
#pragma unroll
      for (int c = 0; c < kPairsPerLane; ++c) {
        acc[r][c][0] *= rescale;
        acc[r][c][1] *= rescale;
      }
      // O += p_j . V[j] over the keys this row sees in the tile (a NaN in a V row the row does not
      // see stays out of it, as in the definition).
      const int keys = min(kBlockKeys, visible[r] - kv0);
      for (int j = 0; j < keys; ++j) {
        const float p_j = __shfl_sync(core::kFullWarpMask, probability, j);
#pragma unroll
        for (int c = 0; c < kPairsPerLane; ++c) {
          const float2 v = Pair::to_float2(smem.v[j][lane + c * core::kWarpSize]);
          acc[r][c][0] = fmaf(p_j, v.x, acc[r][c][0]);
          acc[r][c][1] = fmaf(p_j, v.y, acc[r][c][1]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int query = block_row0 + warp * kRowsPerWarp + r;
    if (query >= args.q_len) continue;
    const RowResult result = finish_row(state[r].max, state[r].sum, visible[r]);
    T* o_row = head.o + query * args.q_row_stride;
#pragma unroll
    for (int c = 0; c < kPairsPerLane; ++c) {
      const int column = 2 * (lane + c * core::kWarpSize);
      *reinterpret_cast<typename Pair::Type*>(o_row + column) =
          Pair::from_floats(acc[r][c][0] * result.o_scale, acc[r][c][1] * result.o_scale);
    }
    if (lane == 0) head.lse[query] = result.lse;
  }
}

template <typename T, int kHeadDim>
void launch(const AttentionArgs<T>& args, cudaStream_t stream) {
  static_assert(sizeof(Rung02Smem<T, kHeadDim>) <= 48 * 1024, "static shared memory is limited to 48 KiB");
  tiled_online_softmax_kernel<T, kHeadDim><<<flash_grid(args, kBlockRows), kThreads, 0, stream>>>(args);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <typename T>
void attention_fwd_02_tiled_online_softmax(const AttentionArgs<T>& args, cudaStream_t stream) {
  require_flash_args(args, "attention rung 02", kBlockRows);
  if (args.head_dim == 64)
    launch<T, 64>(args, stream);
  else
    launch<T, 128>(args, stream);
}

template void attention_fwd_02_tiled_online_softmax<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&,
                                                                   cudaStream_t);
template void attention_fwd_02_tiled_online_softmax<__half>(const AttentionArgs<__half>&, cudaStream_t);

}  // namespace kc::stage3
