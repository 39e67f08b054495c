// INT8 GEMM rung 01 — TMA + integer WGMMA, s8 x s8 -> s32, with a dequantizing epilogue (sm_90a).
//
// Idea: 8-bit integers are the other one-byte format Hopper's tensor cores multiply at twice the
// bf16 rate (wgmma m64n256k32 s8, the same 32 bytes of a K step as 16 bf16), and integer sums are
// exact: 32-bit accumulators hold any sum of K <= 131071 products of two 8-bit values. So where
// FP8 has to promote its partial sums (quant/fp8/), INT8 needs nothing: the mainloop is the bf16
// ladder's rung 07 as it is, with one-byte operands and the full 128 x 256 tile. What INT8 costs
// is range, not precision: a value is one of 255 steps of its row's scale, so activations carry a
// scale per row (per token) and weights one per output channel (per row of B), and the epilogue
// applies both: C[m][n] = s_A[m] s_B[n] sum_k A[m][k] B[n][k].
//
// What changed from the bf16 ladder's rung 07: the instruction (s8.s8 -> s32, K = 32 a WGMMA,
// four per 128-byte row), the accumulators (int32), and the epilogue (s32 stores, or conversion
// to FP32 and the two scales before the bf16 stores). The kernel: int8_gemm_kernel.cuh.
//
// Layouts: A [M, K] and B [N, K] s8 row-major; C32 [M, N] s32 or C [M, N] bf16; s_A [M], s_B [N]
// FP32 (kc/stage3/int8_gemm_args.hpp). Any M and N; K a multiple of 16, at most 131071.
// Expected limiter: the tensor cores at the FP8/INT8 rate, as the bf16 ladder's rung 07 was at
// the bf16 rate; the s32 output is twice bf16's bytes, which shows on the smaller squares.
// SASS to look for: IGMMA.64x256x32.S8.S8 (4 a K step a consumer), UTMALDG.2D, SYNCS.* (the
// ring's mbarriers), WARPGROUP.DEPBAR.LE, USETMAXREG; I2F (s32 -> f32) and FMUL in the dequantizing
// epilogue; no LDL/STL.
//
// Run just this rung:  kc-bench --filter stage3/int8_gemm/01_tma_wgmma
//                      kc-bench --filter stage3/int8_gemm_dequant/01_tma_wgmma
#include "int8_gemm_kernel.cuh"

namespace kc::stage3 {

void int8_gemm_01_tma_wgmma(const Int8GemmArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  launch_int8_gemm<Int8Flaw::none>(args, stream, cache);
}

}  // namespace kc::stage3
