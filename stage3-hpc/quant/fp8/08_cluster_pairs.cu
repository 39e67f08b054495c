// FP8 GEMM rung 08 — rung 06 in clusters of two CTAs that share each B tile (sm_90a).
//
// Idea: an FP8 tile of 128 x 128 reads as many bytes per K step as a bf16 tile of 128 x 64 does
// (two 128 x 128-byte boxes, 32 KiB) but asks the tensor cores for twice the FLOPs a cycle, so its
// loads must come twice as fast: a 128-deep step is 4.2 MFLOP, 512 cycles of the SM's FP8 tensor
// cores, for 32 KiB, 64 bytes a cycle an SM from L2 — about 13 TB/s over 132 SMs at 1.6 GHz, more
// than the L2 delivers. With one scale per tensor rung 05 runs wider tiles (128 x 192: 80 bytes per
// 1.5x the FLOPs); with block scales rungs 06 and 07 are held to 128 x 128 by their registers
// (two sets of scale factors, and with 07 two partial sums). Rung 07's profile (stage-3 README)
// puts most of the consumers' stalls on their own instructions and a few on the wait for a stage
// to land.
// A cluster of two CTAs working on tiles m and m + 1 of the same column needs the same B tile
// twice: each CTA loads half of it and TMA multicasts that half into both CTAs' shared memory, so
// the pair reads 16 + 16 + 16 KiB a step instead of 2 x 32 — a quarter less traffic from L2.
//
// What changed from rung 06: the cluster (Fp8GemmConfig's kClusterM = 2, the bf16 ladder's rung 08
// pieces: gemm/pipeline.cuh's multicast B slices and cluster-wide stage release,
// gemm/tile_scheduler.cuh's walk over pairs of tile rows, cluster_sync around the kernel's life),
// B's tensor map in 64-row boxes, a launch with the cluster attribute. The consumers' walk,
// scales and epilogue are rung 06's; with one scale per tensor rung 05 runs as before.
//
// Layouts and limits: rung 01's. Expected limiter: the tensor cores while a consumer promotes,
// as in rung 06, with the stage waits of the L2 traffic reduced. SASS to look for: rung 06's
// (QGMMA.64x128x32.F32.E4M3.E4M3, its FFMAs and LDGs in two copies of the step), plus
// UTMALDG.2D.MULTICAST, the remote arrive on the peer's empty barrier and UCGABAR_ARV /
// UCGABAR_WAIT; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/08_cluster_pairs --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/0[68]' --param scaling=1 --shapes 4096x4096x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_08_cluster_pairs(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block) {
    fp8_gemm_05_tile_per_shape(args, stream, cache);
    return;
  }
  launch_fp8_gemm<Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 128, /*stages*/ 6,
                                Fp8BlockScaleWalk::scales_ahead, /*cluster*/ 2>,
                  Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
