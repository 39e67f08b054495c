// INT8 GEMM rung 03 — the same op without Hopper: cp.async + ldmatrix + mma.sync m16n8k32 s8,
// for sm_80 and later.
//
// Idea: rungs 01-02 need sm_90a (TMA, integer WGMMA); an A100 multiplies 8-bit integers on its
// tensor cores too, at twice its bf16 rate, through the instruction the bf16 ladder's rungs 02-03
// use — mma.sync, now in its m16n8k32 s8 form. Nothing else has to change, because the bf16
// ladder's rung 03 moves bytes: a K step is 128 bytes of a row of A and of B, copied by cp.async in
// 16-byte chunks into swizzled shared memory and read back by ldmatrix as 8 x 16-byte rows. Where
// those bytes were 64 bf16 values they are now 128 s8 values, and where a 32-byte k-slice fed
// mma.sync m16n8k16 bf16 it feeds m16n8k32 s8: the same registers, each holding four values
// instead of two (arch/sm80/mma.cuh). So this rung is the bf16 rung 03 kernel, handed A and B as
// rows of K / 2 two-byte elements, with 32-bit integer accumulators (exact: no promotion, as on
// WGMMA) and the INT8 epilogues.
//
// What changed from the bf16 ladder's rung 03 (gemm/03_cp_async.cuh): the MMA (picked by the
// accumulators' type, gemm/mma_sync_common.cuh), the epilogue (s32 pairs, or s32 -> FP32 x s_A[row]
// x s_B[col] -> bf16 pairs: quant/int8/int8_mma_sync_kernel.cuh), and three stages rather than
// tuned ones (the 145 KiB of 128 x 256 tiles fit an A100's 163 KiB). What changed from rungs 01-02:
// everything below the epilogue — no producer warp, no mbarriers, one block a tile; every warp
// copies, waits at one barrier a K step and multiplies.
//
// Layouts and limits: rung 01's (kc/stage3/int8_gemm_args.hpp); A and B 16-byte aligned. Expected
// limiter: on an A100 the tensor cores, as the bf16 rung 03 is there; on a Hopper GPU the
// mma.sync path itself — the warp issues every MMA and every ldmatrix, where WGMMA reads shared
// memory on its own — so this rung is the reference point rungs 01-02 climb from, not a Hopper
// kernel.
// SASS to look for: LDGSTS.E.BYPASS.LTC128B.128 (12 a K step), LDSM.16.M88.4 (32) and
// IMMA.16832.S8.S8 (128 a K step: 4 slices x 4 x 8 fragments), one BAR.SYNC a K step; I2FP.F32.S32
// in the dequantizing epilogue; no LDL/STL.
//
// Run just this rung:  kc-bench --filter 'stage3/int8_gemm(_dequant)?/03_mma_sync'
//                      kc-bench --filter 'stage3/int8_gemm/0[13]' --shapes 4096x4096x4096
#include "int8_mma_sync_kernel.cuh"

namespace kc::stage3 {

void int8_gemm_03_mma_sync(const Int8GemmArgs& args, cudaStream_t stream) {
  launch_int8_gemm_mma_sync<Int8Flaw::none>(args, stream);
}

}  // namespace kc::stage3
