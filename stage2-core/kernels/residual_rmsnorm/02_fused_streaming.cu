// Residual + RMSNorm rung 02 — fused, streaming: RMSNorm's rung-03/04 kernel fed by a CombinedRow.
//
// Idea: do not write a new kernel. The RMSNorm kernel takes a RowSource; CombinedRow<T, Add>
// loads x and the residual, adds them, stores the rounded sum, and hands the sum to the norm. The
// second pass reads the stored sum back (from L2, as rung 04's second pass does).
//
// What changed from rung 01: one launch, no DRAM round trip of `sum` between kernels. The row is
// still streamed twice, and the sum is re-read in the second pass.
//
// Expected limiter: DRAM bandwidth plus the second pass's wait on L2.
//
// Run just this rung:  kc-bench --filter 'stage2/residual_rmsnorm/02_fused_streaming'
#include "../rmsnorm/rmsnorm_internal.cuh"

namespace kc::stage2 {

template <typename T>
void residual_rmsnorm_02_fused_streaming(const ResidualRmsNormArgs<T>& args, cudaStream_t stream) {
  rmsnorm_streaming(residual_source(args), args.weight, args.y, args.rows, args.cols, args.eps,
                    residual_vector_width(args), stream);
}

template void residual_rmsnorm_02_fused_streaming<float>(const ResidualRmsNormArgs<float>&, cudaStream_t);
template void residual_rmsnorm_02_fused_streaming<__half>(const ResidualRmsNormArgs<__half>&, cudaStream_t);
template void residual_rmsnorm_02_fused_streaming<__nv_bfloat16>(const ResidualRmsNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
