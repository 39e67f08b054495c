// Rung 10 — a fused epilogue: C = gelu(alpha.A.B^T + beta.C + bias) in the GEMM (sm_90a).
//
// Idea: an MLP layer does not stop at the GEMM: a bias and an activation follow. As a separate
// kernel they cost one more read and write of C (for 8192 x 14336 BF16, 470 MB of DRAM traffic).
// Fused, they are a few FLOPs per element applied to the FP32 accumulators
// before the single BF16 store: bias[col] (read through L1, one 2-byte value per column) and the
// tanh form of GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with tanhf.
//
// What changed from rung 09: only the value transform of the epilogue (BiasGelu instead of
// LinearCombination, epilogue.cuh). It is measured as op gemm_bias_gelu_bf16, whose baseline is
// cublasGemmEx followed by a separate bias+GELU kernel (bias_gelu_baseline.cu).
//
// Layouts: A row-major M x K, B N x K, C row-major, bias a row vector of N. Any M, N; K a
// multiple of 8 (N % 8 != 0 falls back to direct stores, as in rung 09).
// Expected limiter: tensor-core throughput; the epilogue math overlaps the next tile's mainloop.
//
// Run just this rung:  kc-bench --filter stage3/gemm_bias_gelu_bf16/10_fused_bias_gelu
#include "warp_specialized_gemm.cuh"

namespace kc::stage3 {

void gemm_bias_gelu_10_fused(const BiasGeluArgs& args, cudaStream_t stream, HopperLaunchCache& cache) {
  using Config = WarpSpecializedConfig<1, EpilogueKind::tma_store, BiasGelu>;
  const BiasGelu transform{linear_combination(args.gemm), args.bias};
  launch_warp_specialized<Config>(args.gemm, transform, Schedule::persistent, stream, cache);
}

}  // namespace kc::stage3
