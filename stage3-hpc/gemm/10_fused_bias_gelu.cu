// Rung 10 — a fused epilogue: C = gelu(alpha.A.B^T + beta.C + bias) in the GEMM (sm_90a).
//
// Idea: an MLP layer does not stop at the GEMM: a bias and an activation follow. As a separate
// kernel they cost one more read and write of C (for 8192 x 14336 BF16, 470 MB of DRAM traffic).
// Fused, they are a few FLOPs per element applied to the FP32 accumulators before the single
// BF16 store. Fused is only faster if those FLOPs are cheap, because in this kernel they are not
// hidden: the consumer warpgroups run the epilogue while their tensor cores wait (only the
// producer's loads for the next tile overlap it). So:
// - GELU (tanh form) is evaluated as x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): the
//   same function as 0.5 x (1 + tanh(u)), in six FMA-pipe instructions and two MUFU ops (ex2,
//   rcp) per element, without tanhf's longer sequence and without the cancellation of
//   1 + tanh(u) for negative x (epilogue.cuh, gelu_tanh; the separate baseline kernel calls the
//   same function);
// - the bias is read once per column pair a thread owns, as one 4-byte load, one store pass ahead
//   (the first pass's 16 before the tile's mainloop, the second pass's while the first computes),
//   not once per element with a dependent load in front of every GELU;
// - alpha.acc + beta.C is applied to the whole tile under one test of beta, and the GELUs run
//   without a bounds test (TMA clips what lies outside C): straight-line code, in which the
//   compiler overlaps the MUFU latency of one element with the work of the next ones. A test per
//   element pair made one basic block per pair and exposed that latency 64 times per pass.
// The floor is then the MUFU pipe: 16 results per clock per SM, two per element, so 4096 clocks
// for a 128 x 256 tile, 2.1-2.3 us at 1.8-2 GHz.
//
// What changed from rung 09: only the activation of the epilogue (BiasGelu instead of Identity,
// epilogue.cuh); the kernel configuration is rung 09's (TmaStoreConfig). It is
// measured as op gemm_bias_gelu_bf16, whose baseline is cublasGemmEx followed by a separate
// bias+GELU kernel (bias_gelu_baseline.cu).
//
// Layouts: A row-major M x K, B N x K, C row-major, bias a 4-byte aligned row vector of N. Any M,
// N; K a multiple of 8 (N % 8 != 0 falls back to direct stores, as in rung 09).
// SASS to look for, besides rung 09's: 16 predicated LDG.E.CONSTANT (the first pass's bias pairs;
// 16 LDG.E.U16.CONSTANT beside them only run for the last column of an odd N) before the tile's
// first HGMMA; per store pass, with no branch, 64 MUFU.EX2 and 64 MUFU.RCP among FMUL/FFMA/FADD
// (the next pass's loads in between) and 32 F2FP.BF16.F32.PACK_AB, then the named barrier and
// 32 STS.
// Expected limiter: tensor-core throughput in the mainloop, the MUFU pipe in the epilogue.
//
// Run just this rung:  kc-bench --filter stage3/gemm_bias_gelu_bf16/10_fused_bias_gelu
#include <cstdint>

#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void gemm_bias_gelu_10_fused(const BiasGeluArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  require(reinterpret_cast<std::uintptr_t>(args.bias) % 4 == 0,
          "the bias must be 4-byte aligned (it is read as bf16 pairs); got {}",
          static_cast<const void*>(args.bias));
  using Config = TmaStoreConfig<BiasGelu>;
  launch_warp_specialized<Config>(args.gemm, BiasGelu{args.bias}, Schedule::persistent, stream,
                                  cache);
}

}  // namespace kc::stage3
