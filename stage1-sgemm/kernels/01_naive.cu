// Rung 01 — naive SGEMM: one thread per element of C.
//
// Idea: the definition, transcribed. Thread (x, y) of the grid computes C[row][col] as a K-long
// dot product of row `row` of A and column `col` of B, reading both straight from global memory.
//
// What to notice: consecutive threads of a warp (consecutive threadIdx.x) take consecutive *rows*.
// So at each step of the K loop the 32 threads of a warp read 32 different rows of A (32 separate
// 128-byte sectors) and all read the same element of B, and their stores to C are a column apart.
// Nothing is coalesced and nothing is reused from on-chip memory: every FMA needs two loads.
//
// Expected limiter: memory (latency and wasted sector traffic) — far below both the FP32 peak
// and the DRAM roof. Rung 02 fixes only the thread-to-element mapping.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/01_naive
#include "kc/stage1/sgemm.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {
namespace {

__global__ void sgemm_naive_kernel(SgemmArgs args) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= args.m || col >= args.n) return;
  float acc = 0.f;
  for (int p = 0; p < args.k; ++p) acc += args.a[row * args.lda + p] * args.b[p * args.ldb + col];
  store_result(&args.c[row * args.ldc + col], acc, args.alpha, args.beta);
}

}  // namespace

void sgemm_01_naive(const SgemmArgs& args, cudaStream_t stream) {
  constexpr int kTile = 32;  // a 32 x 32 block of threads, one thread per C element
  const dim3 block(kTile, kTile);
  const dim3 grid(ceil_div(args.m, kTile), ceil_div(args.n, kTile));
  sgemm_naive_kernel<<<grid, block, 0, stream>>>(args);
}

}  // namespace kc::stage1
