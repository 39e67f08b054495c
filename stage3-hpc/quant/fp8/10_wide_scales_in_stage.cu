// FP8 GEMM rung 10 — rung 09's scales in the stage on 128 x 192 tiles (sm_90a).
//
// Idea: with one scale per tensor the 128 x 192 tile (rung 02) beat the 128 x 128 one at the large
// shapes: each K step's fixed work — the barrier waits, the stage's bookkeeping, A's share of the
// shared-memory reads — spreads over 1.5 times the columns. With block scales the wide tile was
// held back by the scales' loads (rung 05's wide kernel waited on them every step; rung 06's
// lookahead spilled at n192, and rung 07's two `partial` sets of 96 accumulators do not fit beside
// the 96 of `total`). Rung 09 took the loads out of the consumers: the producer brings each step's
// scales into the stage. Here the wide tile gets that, on the step-by-step walk of rungs 01-05 (one
// `partial` set: each step waited for, then promoted, while the other consumer's WGMMAs run).
//
// What changed from rung 09 (Fp8BlockScaleWalk::wide_scales_in_stage; produce_tiles_and_scales and
// the step-by-step loop in fp8_gemm_kernel.cuh): 128 x 192 tiles in rung 04's layout (four stages
// of 40 KiB, 192-column store passes); the producer also writes the next block of B's scales
// (s_B[n block + 1][kb]), since a 192-wide tile's last 64 or 128 columns lie there; a consumer reads
// its four factors with LDS once the stage has landed, before issuing the step's WGMMAs (B's two by
// lane 0, the lane whose arrive frees the stage, passed to the warp by shuffles, which the compiler
// places among the WGMMAs: read after them, the shuffles waited there for lane 0's loads), and
// promotes once the WGMMAs are done.
//
// Layouts and limits: rung 01's, and rung 09's for s_A (M % 4 == 0 and s_A 16-byte aligned);
// anything else, and one scale per tensor, runs rung 09 (which runs rung 07, then rung 05).
// Expected limiter: the tensor cores; the promotion (96 FFMA a thread and step) on the consumer's
// path between its steps, under the other consumer's WGMMAs. SASS to look for: 4
// QGMMA.64x192x32.F32.E4M3.E4M3 a step, four LDS of the scales before them (two predicated to lane
// 0) and two SHFL.IDX, no LDG in the consumers (the producer's two LDG of B's scales), 96 FFMA a
// step, no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/10_wide_scales_in_stage --param scaling=1
//                      kc-bench --filter 'stage3/fp8_gemm/(09|10)_' --param scaling=1
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_10_wide_scales_in_stage(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  if (args.scaling != Fp8Scaling::block || !fp8_scale_a_rows_take_tma(args)) {
    fp8_gemm_09_scales_in_stage(args, stream, cache);
    return;
  }
  launch_fp8_gemm<Fp8GemmConfig<192, /*promotion interval*/ 4, /*store pass columns*/ 192, /*stages*/ 4,
                                Fp8BlockScaleWalk::wide_scales_in_stage>,
                  Fp8Scaling::block, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
