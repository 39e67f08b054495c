// Rung 01 — WMMA: 16 x 16 x 16 tensor-core fragments, staged through shared memory.
//
// Idea: the smallest step from a tiled CUDA-core GEMM to the tensor cores. A block of 4 warps owns
// a 64 x 64 tile of C; each K step of 32 copies a 64 x 32 slice of A and of B into shared memory
// (16-byte vector loads, zeros past the edges), and each warp multiplies its 32 x 32 share as
// 2 x 2 WMMA fragments (nvcuda::wmma, C++ API: load_matrix_sync / mma_sync). The accumulators
// go back through shared memory (store_matrix_sync) so that every thread can apply
// alpha/beta and write BF16 pairs with bounds checks.
//
// What changed from stage 1: the inner product runs on tensor cores (HMMA.16816.F32.BF16 in the
// SASS) instead of FFMA, in BF16 with FP32 accumulation. Shared-memory rows are padded by 8
// elements (80-byte stride) so the fragment loads of neighbouring rows fall in different banks.
//
// Layouts: A row-major M x K, B N x K ("TN": wmma::matrix_b col_major with ldm = row stride);
// C row-major BF16. Any M, N; K a multiple of 8.
// Expected limiter: latency and shared-memory traffic — one tile in flight, loads and math
// serialized by __syncthreads, small 64 x 64 tiles (low arithmetic intensity per byte loaded).
//
// Run just this rung:  kc-bench --filter stage3/hgemm/01_wmma
#include <mma.h>

#include "hgemm.hpp"
#include "mma_sync_common.cuh"

namespace kc::stage3 {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr int kBlockK = 32;
constexpr int kWarpTile = 32;                  // each warp: 32 x 32 = 2 x 2 fragments
constexpr int kFragment = 16;                  // WMMA m16n16k16
constexpr int kFragmentsPerWarp = kWarpTile / kFragment;
constexpr int kWarpsN = kBlockN / kWarpTile;
constexpr int kThreads = 32 * (kBlockM / kWarpTile) * kWarpsN;  // 128
constexpr int kSmemStride = kBlockK + 8;      // bf16 elements; 80 bytes keeps 32-byte alignment
constexpr int kAccStride = kBlockN + 4;       // floats
constexpr int kChunksPerRow = kBlockK / kChunkElements;

// Copies rows [row0, row0 + 64) x columns [k0, k0 + 32) of a K-contiguous matrix, zero-filled
// past its edges.
__device__ void load_tile(bf16 (&tile)[kBlockM][kSmemStride], const bf16* matrix, int rows_total,
                          int k, int row0, int k0) {
  for (int chunk = threadIdx.x; chunk < kBlockM * kChunksPerRow; chunk += kThreads) {
    const int row = chunk / kChunksPerRow;
    const int col = (chunk % kChunksPerRow) * kChunkElements;
    *reinterpret_cast<uint4*>(&tile[row][col]) =
        load_chunk_or_zero(matrix, rows_total, k, row0 + row, k0 + col);
  }
}

__global__ void __launch_bounds__(kThreads) hgemm_wmma_kernel(HgemmArgs args) {
  // WMMA loads and stores need 32-byte aligned rows of fragments: 80-byte and 272-byte strides
  // times multiples of 16 rows keep every fragment origin aligned.
  __shared__ alignas(128) bf16 smem_a[kBlockM][kSmemStride];
  __shared__ alignas(128) bf16 smem_b[kBlockN][kSmemStride];
  __shared__ alignas(128) float smem_c[kBlockM][kAccStride];

  const int block_row0 = blockIdx.x * kBlockM;
  const int block_col0 = blockIdx.y * kBlockN;
  const int warp = threadIdx.x / 32;
  const int warp_row0 = (warp / kWarpsN) * kWarpTile;
  const int warp_col0 = (warp % kWarpsN) * kWarpTile;

  wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float> acc[kFragmentsPerWarp][kFragmentsPerWarp];
  for (auto& row : acc)
    for (auto& fragment : row) wmma::fill_fragment(fragment, 0.f);

  for (int k0 = 0; k0 < args.k; k0 += kBlockK) {
    load_tile(smem_a, args.a, args.m, args.k, block_row0, k0);
    load_tile(smem_b, args.b, args.n, args.k, block_col0, k0);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBlockK; kk += kFragment) {
      wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, bf16, wmma::row_major> a[kFragmentsPerWarp];
      // B stored N x K is, read as K x N, column-major with leading dimension kSmemStride.
      wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, bf16, wmma::col_major> b[kFragmentsPerWarp];
      for (int i = 0; i < kFragmentsPerWarp; ++i)
        wmma::load_matrix_sync(a[i], &smem_a[warp_row0 + i * kFragment][kk], kSmemStride);
      for (int j = 0; j < kFragmentsPerWarp; ++j)
        wmma::load_matrix_sync(b[j], &smem_b[warp_col0 + j * kFragment][kk], kSmemStride);
      for (int i = 0; i < kFragmentsPerWarp; ++i)
        for (int j = 0; j < kFragmentsPerWarp; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();  // the next iteration overwrites the tiles
  }

  // The accumulator fragment layout is opaque in the WMMA API: go through shared memory.
  for (int i = 0; i < kFragmentsPerWarp; ++i)
    for (int j = 0; j < kFragmentsPerWarp; ++j)
      wmma::store_matrix_sync(&smem_c[warp_row0 + i * kFragment][warp_col0 + j * kFragment],
                              acc[i][j], kAccStride, wmma::mem_row_major);
  __syncthreads();
  const LinearCombination linear = linear_combination(args);
  constexpr int kPairsPerRow = kBlockN / 2;
  for (int pair = threadIdx.x; pair < kBlockM * kPairsPerRow; pair += kThreads) {
    const int row = pair / kPairsPerRow;
    const int col = (pair % kPairsPerRow) * 2;
    store_pair(args.c, args.m, args.n, block_row0 + row, block_col0 + col,
               make_float2(smem_c[row][col], smem_c[row][col + 1]), linear, Identity{},
               Identity::ColumnPair{});
  }
}

}  // namespace

void hgemm_01_wmma(const HgemmArgs& args, cudaStream_t stream) {
  const dim3 grid(ceil_div(args.m, kBlockM), ceil_div(args.n, kBlockN));
  hgemm_wmma_kernel<<<grid, kThreads, 0, stream>>>(args);
}

}  // namespace kc::stage3
