// Rung 04 — TMA + WGMMA (sm_90a): one warpgroup, 64 x 256 tiles, a 4-stage mbarrier pipeline.
//
// Idea: Hopper moves both halves of the GEMM off the threads. TMA (the Tensor Memory Accelerator,
// cp.async.bulk.tensor) copies a whole 2-D box of A or B from global to shared memory from one
// instruction issued by one thread, writing it in the 128-byte swizzle and counting the bytes on
// an mbarrier; WGMMA (wgmma.mma_async) multiplies 64 x 256 x 16 per instruction for a warpgroup of
// 128 threads, reading A and B straight from shared memory through 64-bit matrix descriptors, so
// no ldmatrix and no operand registers at all. The accumulators (64 x 256 FP32) live in the
// warpgroup's registers, 128 per thread.
//
// What changed from rung 03: thread 0 issues two TMA copies per K step of 64 instead of 128
// threads issuing 16 cp.async each; the block waits on the stage's mbarrier (phase parity) instead
// of cp.async.wait_group; each warpgroup-wide wgmma replaces 64 warp-level mma.sync. Out-of-bound
// rows and K columns of a box arrive as zeros (the tensor map's fill), so any M and N work.
// The loop is still synchronous at its end: wgmma.wait_group 0 and __syncthreads before thread 0
// refills the stage, so the tensor cores idle while the next WGMMAs are issued.
//
// Layouts: A row-major M x K, B N x K (both K-major for WGMMA: no transpose bits). Any M, N; K a
// multiple of 8 (TMA needs 16-byte row strides). SASS to look for: UTMALDG.2D, SYNCS.EXCH /
// SYNCS.PHASECHK (mbarrier), HGMMA.64x256x16.F32.BF16, WARPGROUP.ARRIVE, WARPGROUP.DEPBAR.
// Expected limiter: latency — one 64-row warpgroup per SM and a full drain every K step.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/04_tma_wgmma
#include "tma_wgmma_kernel.cuh"

namespace kc::stage3 {

void hgemm_04_tma_wgmma(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_tma_wgmma<1>(args, stream, cache);
}

}  // namespace kc::stage3
