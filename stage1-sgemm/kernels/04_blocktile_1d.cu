// Rung 04 — 1D blocktiling: each thread computes a column of 8 outputs.
//
// Idea: in rung 03 every FMA needed two shared-memory loads. If a thread computes TM = 8 outputs
// stacked in one column of C, then at each k it loads one value of B once, keeps it in a
// register, and uses it for 8 FMAs against 8 values of A: 9 values from shared memory for 8 FMAs
// instead of 16 (in the SASS fewer load instructions still: the thread's 8 x 8 piece of the A
// tile is contiguous, and the compiler reads it with LDS.128). The block tile grows to 64 x 64
// (512 threads), the K step shrinks to 8 so the tiles stay small; each thread still copies one
// element of A and one of B per K step.
//
// What changed from rung 03: a thread owns TM = 8 accumulators (registers) instead of one, and
// the tiles are 64 x 8 (A) and 8 x 64 (B). Partial tiles are zero-filled: any shape works.
//
// Expected limiter: shared-memory bandwidth and latency, less than before: about one value from
// shared memory per FMA. Rung 05 reuses values of A across columns too.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/04_blocktile_1d
#include "kc/stage1/sgemm.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {
namespace {

constexpr int kTileRows = 64;                            // BM
constexpr int kTileCols = 64;                            // BN
constexpr int kTileK = 8;                                // BK
constexpr int kRowsPerThread = 8;                        // TM
constexpr int kThreads = kTileRows * kTileCols / kRowsPerThread;  // 512
static_assert(kThreads == kTileRows * kTileK && kThreads == kTileK * kTileCols,
              "each thread copies exactly one element of each tile");

__global__ void __launch_bounds__(kThreads) sgemm_blocktile_1d_kernel(SgemmArgs args) {
  __shared__ float smem_a[kTileRows][kTileK];
  __shared__ float smem_b[kTileK][kTileCols];
  const int tiles_n = ceil_div(args.n, kTileCols);
  const int row0 = (blockIdx.x / tiles_n) * kTileRows;
  const int col0 = (blockIdx.x % tiles_n) * kTileCols;
  const int t = threadIdx.x;
  // The thread's outputs: rows thread_row * 8 .. + 7 of column thread_col (consecutive threads,
  // consecutive columns: B reads and C writes stay coalesced).
  const int thread_col = t % kTileCols;
  const int thread_row = t / kTileCols;
  // The element it copies: 8 threads cover one 32-byte row piece of A, 64 threads a row of B.
  const int a_row = t / kTileK, a_k = t % kTileK;
  const int b_k = t / kTileCols, b_col = t % kTileCols;

  float acc[kRowsPerThread] = {};
  for (int k0 = 0; k0 < args.k; k0 += kTileK) {
    const int ar = row0 + a_row, ak = k0 + a_k;
    smem_a[a_row][a_k] = ar < args.m && ak < args.k ? args.a[ar * args.lda + ak] : 0.f;
    const int bk = k0 + b_k, bc = col0 + b_col;
    smem_b[b_k][b_col] = bk < args.k && bc < args.n ? args.b[bk * args.ldb + bc] : 0.f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTileK; ++p) {
      const float b = smem_b[p][thread_col];  // loaded once, used kRowsPerThread times
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) acc[i] += smem_a[thread_row * kRowsPerThread + i][p] * b;
    }
    __syncthreads();
  }
  const int col = col0 + thread_col;
  if (col >= args.n) return;
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = row0 + thread_row * kRowsPerThread + i;
    if (row < args.m) store_result(&args.c[row * args.ldc + col], acc[i], args.alpha, args.beta);
  }
}

}  // namespace

void sgemm_04_blocktile_1d(const SgemmArgs& args, cudaStream_t stream) {
  sgemm_blocktile_1d_kernel<<<tile_grid(args, kTileRows, kTileCols), kThreads, 0, stream>>>(args);
}

}  // namespace kc::stage1
