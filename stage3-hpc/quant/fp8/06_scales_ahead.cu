// FP8 GEMM rung 06 — block scales loaded two K steps ahead of their promotion (sm_90a).
//
// Idea: with block scaling each K step's promotion multiplies the step's sum by s_A x s_B, from
// four scales a thread loads from global memory (L2: s_A is [K/128, M] floats, s_B
// [N/128, K/128]). Rungs 01-05 issue the loads of step k + 1 just after step k's WGMMAs and form
// the products at once, so the warp stops on those products until the loads return, and a load
// from L2 under a full stream of TMA traffic can take longer than a K step's WGMMAs (a 128-deep step
// of a 128 x 128 tile is 4.2 MFLOP: 512 cycles of the SM's FP8 tensor cores). ncu's source view of
// rung 05's block-scaled kernel shows where: the FMUL after the scale loads (stage-3 README).
// Every tile's first step also started on a load, with nothing in flight.
//
// What changed from rung 05 (block scaling only; one scale per tensor runs rung 05 as it is):
//   - the consumer walks its K steps tile after tile as one sequence, two steps a trip of its loop
//     (consume_with_scales_ahead in fp8_gemm_kernel.cuh). Each of the two steps has its own
//     registers for its four scale factors; a step promotes with the factors it loaded two steps
//     earlier, then loads, into the same registers, those of the step two ahead — in this tile or
//     the next (Fp8ScaleLookahead), so no tile starts on a load. Three sets rotated through one step
//     a trip would be shorter to write, but they compile to register moves at the top of the loop,
//     and a move waits for its load just as the FMUL did.
//   - the 128 x 128 tile at every shape. Two sets of factors, the lookahead's place in the walk and
//     the epilogue inside the loop cost registers the 128 x 192 tile (96 + 96 accumulators a thread)
//     does not have: ptxas spills around its WGMMAs. 128 x 128 leaves 64 + 64.
// Stages, the promotion and the TMA-store epilogue are rung 05's narrow kernel's.
//
// Layouts and limits: rung 01's. Expected limiter: the tensor cores, idle now only while a consumer
// promotes. SASS to look for: the FMULs of a step's products ahead of its QGMMAs and the LDGs of
// the step two ahead right after them, in both copies of the step; 4 QGMMA.64x128x32.F32.E4M3.E4M3
// and 64 FFMA a step; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/06_scales_ahead --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/0[56]' --param scaling=1 --shapes 4096x4096x4096
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_06_scales_ahead(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block) {
    fp8_gemm_05_tile_per_shape(args, stream, cache);
    return;
  }
  launch_fp8_gemm<Fp8GemmConfig<128, /*promotion interval*/ 4, /*store pass columns*/ 128, /*stages*/ 6,
                                Fp8BlockScaleWalk::scales_ahead>,
                  Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
