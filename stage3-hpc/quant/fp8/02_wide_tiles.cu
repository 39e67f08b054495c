// FP8 GEMM rung 02 — rung 01 with 128 x 192 tiles: less shared-memory traffic per FLOP (sm_90a).
//
// Idea: a WGMMA reads both operands from shared memory every time it runs. Per K step of 32 a
// consumer's m64n128k32 reads 2 KiB of A and 4 KiB of B for 64 x 128 x 32 multiply-adds; at the
// FP8 rate of an SM (about 4096 multiply-adds a clock) that is 64 clocks, so the two consumers
// together read 96 bytes a clock, and TMA writes the next stages at another 64 (32 KiB a 128 x 128
// x 128 step) — more than the 128 bytes a clock shared memory serves. The bf16 ladder never met
// this: the same tile at half the rate needs half the bandwidth. A wider tile reads B once for
// more columns: m64n192k32 reads 2 + 6 KiB for 1.5 times the work, 85 bytes a clock, and the TMA
// writes fall to 52: about 137 in all, within a few percent of what shared memory serves, against
// 160 at n128. (Arithmetic from the instruction shapes and the per-SM rates, not a profile.)
//
// What changed from rung 01: the tile's columns (kBlockN = 192: 96 accumulators a thread for the
// step's sum and 96 for the promoted one, 192 of the 232 registers setmaxnreg gives), five stages
// of 40 KiB instead of six of 32, and, with block scales, a tile that spans one and a half blocks of
// B's scales: the promotion picks, per 8-column slice, the scale of the block the slice lies in.
// n256, which would halve B's share again, does not fit: 256 accumulators a thread.
//
// Layouts and limits: rung 01's (kc/stage3/fp8_gemm_args.hpp). Expected limiter: the tensor
// cores, if the arithmetic above is right. SASS to look for: QGMMA.64x192x32.F32.E4M3.E4M3, 4 a K
// step, 96 FFMA a step (the promotion), no LDL/STL (192 + 192 accumulators fit, nothing spills).
//
// Run just this rung:  kc-bench --filter stage3/fp8_gemm/02_wide_tiles
//                      kc-bench --filter 'stage3/fp8_gemm/0[12]' --shapes 8192x8192x8192
#include "fp8_gemm_kernel.cuh"

namespace kc::stage3 {

void fp8_gemm_02_wide_tiles(const Fp8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_fp8_gemm_scaled<Fp8GemmConfig<192>, Fp8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
