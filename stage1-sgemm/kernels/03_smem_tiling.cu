// Rung 03 — shared-memory tiling: load a tile once, use it 32 times.
//
// Idea: the 32 x 32 threads of a block all need the same 32 rows of A and 32 columns of B. So the
// block walks along K in steps of 32: each thread copies one element of the 32 x 32 tile of A and
// one of the tile of B into shared memory, the block waits (__syncthreads), then every thread
// does 32 FMAs reading only shared memory, and the block waits again before the next tile
// overwrites it. Global loads drop 32-fold; each is coalesced as in rung 02.
//
// What changed from rung 02: the K loop runs over shared-memory tiles instead of global memory.
// Elements outside A or B are stored as zero, so a partial tile adds nothing and any shape works.
//
// Expected limiter: shared-memory traffic and latency. Each FMA still needs two values from
// shared memory (one of them a broadcast; the compiler reads the row of A four floats at a time,
// LDS.128, and B one float at a time), and a thread has a single accumulator, so there is little
// independent work to hide the load latency with. Rungs 04 and 05 make each thread compute more.
//
// Run just this rung:  kc-bench --filter stage1/sgemm/03_smem_tiling
#include "kc/stage1/sgemm.hpp"
#include "sgemm_common.cuh"

namespace kc::stage1 {
namespace {

constexpr int kTile = 32;  // C tile 32 x 32, K step 32, one thread per C element

__global__ void sgemm_smem_tiling_kernel(SgemmArgs args) {
  __shared__ float smem_a[kTile][kTile];
  __shared__ float smem_b[kTile][kTile];
  const int tiles_n = ceil_div(args.n, kTile);
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = (blockIdx.x / tiles_n) * kTile + ty;
  const int col = (blockIdx.x % tiles_n) * kTile + tx;

  float acc = 0.f;
  for (int k0 = 0; k0 < args.k; k0 += kTile) {
    // Thread (ty, tx) copies A[row][k0 + tx] and B[k0 + ty][col]: lanes read consecutive floats.
    smem_a[ty][tx] = row < args.m && k0 + tx < args.k ? args.a[row * args.lda + k0 + tx] : 0.f;
    smem_b[ty][tx] = k0 + ty < args.k && col < args.n ? args.b[(k0 + ty) * args.ldb + col] : 0.f;
    __syncthreads();  // the tile is complete
#pragma unroll
    for (int p = 0; p < kTile; ++p) acc += smem_a[ty][p] * smem_b[p][tx];
    __syncthreads();  // everyone is done with the tile before it is overwritten
  }
  if (row < args.m && col < args.n) store_result(&args.c[row * args.ldc + col], acc, args.alpha, args.beta);
}

}  // namespace

void sgemm_03_smem_tiling(const SgemmArgs& args, cudaStream_t stream) {
  sgemm_smem_tiling_kernel<<<tile_grid(args, kTile, kTile), dim3(kTile, kTile), 0, stream>>>(args);
}

}  // namespace kc::stage1
