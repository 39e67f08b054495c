// Rung 05 — larger tiles: two consumer warpgroups share a 128 x 256 tile (sm_90a).
//
// Idea: the kernel of rung 04 (tma_wgmma_kernel.cuh) with two warpgroups: each multiplies its own
// 64-row half of the A tile by the same 256-row B tile. Per K step the block loads 128 x 64 of A
// and 256 x 64 of B (48 KiB) for 128 x 256 x 64 multiply-adds, twice the work per byte of rung 04's
// 64 x 256 tile; and with two warpgroups issuing WGMMAs, one can run while the other waits.
//
// What changed from rung 04: kWarpgroups 1 -> 2 (256 threads, block tile 128 x 256, 4 stages of
// 48 KiB = 192 KiB of shared memory). Nothing else: the point is how much the tile shape alone buys.
//
// Layouts: A row-major M x K, B N x K. Any M, N; K a multiple of 8. SASS as rung 04.
// Expected limiter: latency of the synchronous K loop (wait_group 0 + __syncthreads per step),
// and one thread both loading and computing.
//
// Run just this rung:  kc-bench --filter stage3/hgemm/05_two_consumers
#include "tma_wgmma_kernel.cuh"

namespace kc::stage3 {

void hgemm_05_two_consumers(const HgemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_tma_wgmma<2>(args, stream, cache);
}

}  // namespace kc::stage3
