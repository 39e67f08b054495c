// Rung 02 — global-memory coalescing: the same work as rung 01, threads mapped the other way.
//
// Idea: a warp is 32 threads with consecutive threadIdx.x, and the memory system serves it best
// when those 32 threads touch consecutive addresses (one 128-byte line instead of 32). So
// threadIdx.x now walks along a *row* of C: the 32 threads of a warp compute 32 neighbouring
// columns of one row. At each step of the K loop they all read the same A[row][p] (one broadcast
// load) and 32 consecutive floats of row p of B (one coalesced line), and their stores to C are
// one line too.
//
// What changed from rung 01: only which thread computes which element (row from threadIdx.y,
// column from threadIdx.x). The grid is one-dimensional over the 32 x 32 tiles of C, in
// row-major tile order, so any M and N fit (gridDim.y would cap M at 65535 tiles).
//
// Expected limiter: memory. Every FMA still needs two loads, now served mostly by the L1 and L2
// instead of wasted DRAM sectors; the load/store pipe, not the FMA pipe, sets the pace.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/02_coalesced
#include "kc/stage1/sgemm.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {
namespace {

constexpr int kTile = 32;  // a 32 x 32 block of threads computes a 32 x 32 tile of C

__global__ void sgemm_coalesced_kernel(SgemmArgs args) {
  const int tiles_n = ceil_div(args.n, kTile);
  const int row = (blockIdx.x / tiles_n) * kTile + threadIdx.y;
  const int col = (blockIdx.x % tiles_n) * kTile + threadIdx.x;  // consecutive lanes, consecutive columns
  if (row >= args.m || col >= args.n) return;
  float acc = 0.f;
  for (int p = 0; p < args.k; ++p) acc += args.a[row * args.lda + p] * args.b[p * args.ldb + col];
  store_result(&args.c[row * args.ldc + col], acc, args.alpha, args.beta);
}

}  // namespace

void sgemm_02_coalesced(const SgemmArgs& args, cudaStream_t stream) {
  sgemm_coalesced_kernel<<<tile_grid(args, kTile, kTile), dim3(kTile, kTile), 0, stream>>>(args);
}

}  // namespace kc::stage1
