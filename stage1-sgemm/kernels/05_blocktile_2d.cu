// Rung 05 — 2D blocktiling: each thread computes an 8 x 8 register tile of C.
//
// Idea: an outer product. At each k a thread loads 8 values of A (a column piece) and 8 values of
// B (a row piece) into registers and does all 8 x 8 = 64 FMAs between them: 16 shared-memory
// loads for 64 FMAs, a quarter of a load per FMA (rung 04: about one). The block tile grows to
// 128 x 128 with 256 threads, so each value copied from global memory is reused 128 times
// instead of 64.
//
// What changed from rung 04: a thread owns 8 x 8 = 64 accumulators, the tiles are 128 x 8 and
// 8 x 128, and each thread copies four elements of each. Partial tiles are zero-filled: any shape
// works.
//
// Expected limiter: load instructions and registers. Every element comes from global memory
// with its own 4-byte LDG. In shared memory the compiler already merges reads whose addresses are
// provably contiguous (the SASS shows LDS.128: B's 8 values at one k, and 8 consecutive k of one
// row of A), but for A that means holding the thread's whole 8 x 8 piece of the A tile in
// registers: the kernel sits at the 128-register limit that 2 blocks per SM allow. Rung 06 loads
// with float4 and stores A transposed, so that what one k needs is contiguous.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/05_blocktile_2d
#include "kc/stage1/sgemm.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {
namespace {

constexpr int kTileRows = 128;  // BM
constexpr int kTileCols = 128;  // BN
constexpr int kTileK = 8;       // BK
constexpr int kThreadRows = 8;  // TM
constexpr int kThreadCols = 8;  // TN
constexpr int kThreadsPerRow = kTileCols / kThreadCols;                   // 16
constexpr int kThreads = kThreadsPerRow * (kTileRows / kThreadRows);      // 256
static_assert(kTileRows * kTileK % kThreads == 0 && kTileK * kTileCols % kThreads == 0,
              "every thread copies the same number of elements of each tile");

__global__ void __launch_bounds__(kThreads, 2) sgemm_blocktile_2d_kernel(SgemmArgs args) {
  __shared__ float smem_a[kTileRows][kTileK];
  __shared__ float smem_b[kTileK][kTileCols];
  const int tiles_n = ceil_div(args.n, kTileCols);
  const int row0 = (blockIdx.x / tiles_n) * kTileRows;
  const int col0 = (blockIdx.x % tiles_n) * kTileCols;
  const int t = threadIdx.x;
  const int thread_row = t / kThreadsPerRow;  // the thread's outputs: rows thread_row * 8 .. + 7,
  const int thread_col = t % kThreadsPerRow;  //                       columns thread_col * 8 .. + 7

  // The elements this thread copies: column a_col of rows a_row + 32 i of the A tile (8 threads
  // per row: one 32-byte sector), column b_col of rows b_row + 2 i of the B tile (128 threads per
  // row). Consecutive threads read consecutive addresses.
  constexpr int kARowsPerPass = kThreads / kTileK;     // 32
  constexpr int kBRowsPerPass = kThreads / kTileCols;  // 2
  const int a_row = t / kTileK, a_col = t % kTileK;
  const int b_row = t / kTileCols, b_col = t % kTileCols;
  const bool b_col_inside = col0 + b_col < args.n;

  float acc[kThreadRows][kThreadCols] = {};
  for (int k0 = 0; k0 < args.k; k0 += kTileK) {
    // The first element is clamped into the matrix so that offsets stay within 32 bits; where it
    // had to be clamped, the guards below keep this thread from reading anything.
    const float* a_first = args.a + (min(row0 + a_row, args.m - 1) * args.lda + min(k0 + a_col, args.k - 1));
    const float* b_first = args.b + (min(k0 + b_row, args.k - 1) * args.ldb + min(col0 + b_col, args.n - 1));
    const bool a_col_inside = k0 + a_col < args.k;
#pragma unroll
    for (int i = 0; i < kTileRows * kTileK / kThreads; ++i) {
      const int r = a_row + i * kARowsPerPass;
      smem_a[r][a_col] = row0 + r < args.m && a_col_inside ? a_first[i * kARowsPerPass * args.lda] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kTileK * kTileCols / kThreads; ++i) {
      const int p = b_row + i * kBRowsPerPass;
      smem_b[p][b_col] = k0 + p < args.k && b_col_inside ? b_first[i * kBRowsPerPass * args.ldb] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTileK; ++p) {
      float a[kThreadRows];
      float b[kThreadCols];
#pragma unroll
      for (int i = 0; i < kThreadRows; ++i) a[i] = smem_a[thread_row * kThreadRows + i][p];
#pragma unroll
      for (int j = 0; j < kThreadCols; ++j) b[j] = smem_b[p][thread_col * kThreadCols + j];
#pragma unroll
      for (int i = 0; i < kThreadRows; ++i)
#pragma unroll
        for (int j = 0; j < kThreadCols; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kThreadRows; ++i) {
    const int row = row0 + thread_row * kThreadRows + i;
    if (row >= args.m) break;
#pragma unroll
    for (int j = 0; j < kThreadCols; ++j) {
      const int col = col0 + thread_col * kThreadCols + j;
      if (col < args.n) store_result(&args.c[row * args.ldc + col], acc[i][j], args.alpha, args.beta);
    }
  }
}

}  // namespace

void sgemm_05_blocktile_2d(const SgemmArgs& args, cudaStream_t stream) {
  sgemm_blocktile_2d_kernel<<<tile_grid(args, kTileRows, kTileCols), kThreads, 0, stream>>>(args);
}

}  // namespace kc::stage1
