// FP8 GEMM rung 04 — rung 03 promoting every four K steps with one scale per tensor (sm_90a).
//
// Idea: the promotion is a wait. After each 128-deep K step a consumer waits for its own WGMMAs
// (wgmma.wait_group 0), then adds the step's sum into FP32 registers with 96 FFMAs before it can
// issue the next step: its WGMMAs drain, and only the other consumer's keep the tensor cores busy
// meanwhile. How often must the sum leave the tensor cores? Block scales change every K step, so
// then every step. With one scale per tensor nothing changes between steps; what bounds the window
// is precision: the tensor cores add FP8 products into an accumulator narrower than FP32 (the
// kernel header), and the longer the sum stays there, the more low bits it loses. Four steps is
// DeepGEMM's "every few k-blocks" — 512 values of K, where a sum over all of K (the no-promotion
// negative control: 8192 at most in the checks) fails the check.
//
// What changed from rung 03: with scaling=0 a promotion window of four K steps. Inside the window
// each step accumulates onto the previous (the first starts from zero), the consumer waits only for
// the step before (wgmma.wait_group 1) and frees its stage, so one step is always queued behind
// the running one; at the window's end it waits for all and promotes. Block scaling runs rung 03's
// kernel unchanged.
//
// Layouts and limits: rung 01's. Precision: the error table in the stage README (the relative
// Frobenius error against the FP64 product, next to rung 03's). Expected limiter: the tensor cores.
// SASS to look for: WARPGROUP.DEPBAR.LE gsb0, 0x1 (the wait inside the window) beside the 0x0 of
// the window's end; still 4 QGMMA.64x192x32.F32.E4M3.E4M3 a K step and 96 FFMA a promotion.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/04_promotion_window
//                      kc-bench --filter 'stage3/fp8_gemm/0[34]' --shapes 8192x8192x8192
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_04_promotion_window(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_fp8_gemm_scaled<Fp8GemmConfig<192, /*promotion interval*/ 4, /*store pass columns*/ 192, /*stages*/ 4>,
                         Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
