// Rung 10 — a fused epilogue: C = gelu(alpha.A.B^T + beta.C + bias) in the GEMM (sm_90a).
//
// Idea: an MLP layer does not stop at the GEMM: a bias and an activation follow. As a separate
// kernel they cost one more read and write of C (for 8192 x 14336 BF16, 470 MB of DRAM traffic).
// Fused, they are a few FLOPs per element on the results before the single store. But the GELU
// is not free: two MUFU ops per element (ex2 and rcp, epilogue.cuh, gelu_tanh), and the MUFU pipe
// does 16 per clock per SM, so a 128 x 256 tile costs 4096 MUFU clocks. Run by the consumer
// warpgroups after each tile's mainloop (the first version of this rung), those clocks were
// clocks in which the tensor cores waited: on the MLP shapes, fused lost to cuBLAS plus a
// separate bias+GELU kernel. Here the activation moves to warps that have nothing else to do:
// warps 1-3 of the producer warpgroup (warp 0 issues the TMA loads), the epilogue warps.
// - The consumers compute alpha.acc + beta.C, round it to BF16 and write it into their swizzled
//   store buffer (as rung 09 does, but with no activation), then arrive on an mbarrier and go on
//   with the next tile's mainloop. The handoff has full/empty mbarriers per buffer, like the
//   pipeline stages (epilogue_offloaded_activation.cuh: hand_over_pass, run_offloaded_activation).
// - The epilogue warps (96 threads, 40 registers) read the buffer in 16-byte chunks through the
//   same swizzle, add the bias (loaded once per pass, 8 columns per thread), apply gelu_tanh in
//   FP32, write BF16 back in place, fence against the async proxy and issue the TMA stores; once
//   TMA has read the buffer they release it to the consumer.
// - A consumer's 64 x 256 result leaves in two 128-column passes through one 16 KiB buffer, so
//   the second pass would wait until the epilogue warps had finished the first. The consumer
//   keeps the second pass instead (32 registers of packed BF16) and writes it halfway through
//   the next tile's mainloop, while that K step's WGMMAs run.
// - The CTA's last tile has no next mainloop to hide behind: there the consumers apply the
//   activation themselves, exactly as in the first version (store_accumulators_tma with BiasGelu:
//   bias pairs loaded before the mainloop, straight-line GELUs, TMA stores).
// So for every tile but a CTA's last, the tensor cores no longer wait for MUFU: the consumers'
// epilogue is 128 multiplies, 64 conversions, 32 shared stores and a barrier per tile, and the
// epilogue warps' MUFU work (65536 ops per tile; on three of the four SM sub-partitions at least
// 5461 clocks, more where one warp per sub-partition is latency-bound) runs beside a mainloop of
// 1024 tensor-core clocks per 64-deep K step (128 x 256 x 64 MACs at 2048 per clock per SM):
// 65536 clocks at K = 4096.
// Numerics: the epilogue warps compute gelu(float(bf16(alpha.acc + beta.C)) + bias), which is
// exactly what the unfused peer computes (cuBLAS rounds its result to BF16 in C, and the
// separate kernel applies gelu(float(C) + bias) with the same gelu_tanh). On the last tile the
// value is not rounded before the GELU, as in the first version; both are within the BF16
// tolerance of the double reference.
//
// What changed from rung 09: the activation (BiasGelu instead of Identity, epilogue.cuh) and the
// epilogue kind (EpilogueKind::tma_store_offloaded instead of tma_store); every other knob is
// rung 09's (OffloadedActivationConfig follows TmaStoreConfig). It is measured as op
// gemm_bias_gelu, whose baseline is cuBLASLt's matmul with its GELU_BIAS epilogue (one launch);
// cublasGemmEx followed by a separate bias+GELU kernel (bias_gelu_baseline.cu), the two launches
// this rung replaces, is timed as a peer.
//
// Layouts: A row-major M x K, B N x K, C row-major, bias a 4-byte aligned row vector of N. Any M,
// N; K a multiple of 8. N % 8 != 0 falls back to direct stores by the consumers, activation
// included, as in rung 09; the epilogue warps then do nothing.
// SASS to look for, besides rung 09's: USETMAXREG.DEALLOC.CTAPOOL 0x28 followed by the epilogue
// warps' loop — SYNCS.PHASECHK.TRANS64.TRYWAIT (epilogue_full), LDS.128, 8 MUFU.EX2 and 8
// MUFU.RCP among FADD/FMUL/FFMA, 4 F2FP.BF16.F32.PACK_AB, STS.128, then FENCE.VIEW.ASYNC.S,
// BAR.SYNC.DEFER_BLOCKING 0x3, 0x60 (the 96 epilogue threads), UTMASTG.2D, UTMACMDFLUSH,
// DEPBAR.LE SB0, 0x0 and SYNCS.ARRIVE.TRANS64.A1T0 (epilogue_empty), with no register above R39
// and no LDL/STL; in the consumers' mainloop, between the last HGMMA of a K step and
// WARPGROUP.DEPBAR.LE gsb0, 0x1, the held pass's 32 STS, a named BAR.SYNC and one
// SYNCS.ARRIVE.TRANS64.A1T0 under a branch. The consumers' MUFU ops remain only in the last-tile
// and direct-store paths.
// Expected limiter: tensor-core throughput; the MUFU pipe only in each CTA's last tile.
//
// Run just this rung:  kc-bench --filter stage3/gemm_bias_gelu/10_fused_bias_gelu
#include <cstdint>

#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void gemm_bias_gelu_10_fused(const BiasGeluArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require(reinterpret_cast<std::uintptr_t>(args.bias) % 4 == 0,
          "the bias must be 4-byte aligned (it is read as bf16 pairs); got {}",
          static_cast<const void*>(args.bias));
  using Config = OffloadedActivationConfig<BiasGelu>;
  launch_warp_specialized<Config>(args.gemm, BiasGelu{args.bias}, Schedule::persistent, stream,
                                  cache);
}

}  // namespace kc::stage3
