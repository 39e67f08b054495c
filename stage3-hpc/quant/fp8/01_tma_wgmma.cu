// FP8 GEMM rung 01 — TMA + FP8 WGMMA with FP32 promotion every 128-deep K step (sm_90a).
//
// Idea: an FP8 tensor-core instruction does twice the multiply-adds of a bf16 one in the same
// time (wgmma m64n128k32 e4m3 against m64n128k16 bf16) on operands half the size, so at the same
// data movement the GEMM can run at twice the bf16 rate. What FP8 costs is precision, twice:
// the inputs keep 3 mantissa bits (scales carry their range: one per tensor, or DeepSeek-V3's one
// per 1 x 128 activation piece and per 128 x 128 weight block), and the tensor cores add the
// products into an accumulator that keeps fewer bits than FP32. The second is the kernel's
// business: every K step of 128 starts a fresh sum on the tensor cores, and the consumer adds it
// into FP32 registers (promotion), applying that step's block scales in the same FFMA.
//
// What changed from the bf16 ladder's rung 07 (persistent, warp-specialized, direct stores): the
// instruction (e4m3, K = 32 a WGMMA, four per 128-byte row as before), 128 x 128 tiles instead of
// 128 x 256 (the promoted sum needs a second set of 64 accumulators per thread), six stages of
// 32 KiB, and the promotion after each K step, which makes each consumer wait for its own WGMMAs
// every step (wgmma.wait_group 0): the other consumer warpgroup's WGMMAs keep the tensor cores
// busy meanwhile, when they are queued.
// The kernel and its reasoning: fp8_gemm_kernel.cuh.
//
// Layouts: A [M, K] and B [N, K] e4m3 row-major, C [M, N] bf16; scales as kc/stage3/fp8_gemm_args.hpp
// says. Any M and N; K a multiple of 16 (TMA moves 16-byte pieces); a K tail reads zeros.
// Expected limiter: the tensor cores, less the gaps the per-step wait leaves when the other
// consumer has nothing queued; the promotion's 64 FFMA a thread a step are cheap beside them.
// SASS to look for: QGMMA.64x128x32.F32.E4M3.E4M3 (FP8 WGMMA disassembles as QGMMA; 4 per K
// step per consumer), UTMALDG.2D, SYNCS.* (the ring's mbarriers), WARPGROUP.DEPBAR.LE (the wait
// before promoting), 64 FFMA a K step (the promotion), USETMAXREG; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/01_tma_wgmma
//                      kc-bench --filter stage3/fp8_gemm/01_tma_wgmma --param scaling=1
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_01_tma_wgmma(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_fp8_gemm_scaled<Fp8GemmConfig<128>, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
