// FP8 GEMM rung 07 — rung 06 promoting one K step while the next one's WGMMAs run (sm_90a).
//
// Idea: with block scales rung 06 still waits, every K step, for its own WGMMAs before it promotes
// (wgmma.wait_group 0): both consumers issue a step together, finish it together and promote
// together, and the tensor cores idle while they do. ncu's source view of rung 06 puts the most
// stall samples on that wait (stage-3 README). If a consumer had a second `partial` set, it could
// issue step t + 1 into one set and then promote step t from the other while step t + 1 runs.
//
// What changed from rung 06: two `partial` sets, one for each of the two copies of the step in the
// loop (consume_promoting_behind in fp8_gemm_kernel.cuh). A step issues its WGMMAs into its own
// set, waits only for the step before (wgmma.wait_group 1), frees that one's stage and promotes its
// set with its scales; a tile's last step then waits for its own WGMMAs and promotes them before
// the epilogue. 64 more registers a thread (64 + 64 + 64 accumulators on the 128 x 128 tile).
//
// Layouts and limits: rung 01's; block scaling only (one scale per tensor runs rung 05).
// Expected limiter: the tensor cores. SASS to look for: WARPGROUP.DEPBAR.LE gsb0, 0x1 in both
// copies of the step, 8 QGMMA.64x128x32.F32.E4M3.E4M3 and 128 FFMA in the kernel, no LDL/STL, and
// no ptxas warning that the WGMMAs are serialized.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/07_promote_behind --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/0[67]' --param scaling=1 --shapes 4096x4096x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_07_promote_behind(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block) {
    fp8_gemm_05_tile_per_shape(args, stream, cache);
    return;
  }
  launch_fp8_gemm<Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 128, /*stages*/ 6,
                                Fp8BlockScaleWalk::promote_behind>,
                  Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
