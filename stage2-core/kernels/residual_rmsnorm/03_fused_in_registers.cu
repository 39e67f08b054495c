// Residual + RMSNorm rung 03 — fused, the row in registers: RMSNorm rung 05 fed by a CombinedRow.
//
// Idea: the rung-05 RMSNorm kernel with CombinedRow<T, Add> as its source. Each thread loads its
// vectors of x and residual, adds, stores the sum (the new residual stream) and keeps it in
// registers; the team reduces the sum of squares and the thread writes y from registers.
// Traffic: x and residual read once, sum and y written once — the minimum, 4 row-sized transfers.
//
// What changed from rung 02: the sum never leaves registers between the reduction and the write.
//
// Expected limiter: DRAM bandwidth.
//
// Run just this rung:  kc-bench --filter 'stage2/residual_rmsnorm/03_fused_in_registers'
#include "../rmsnorm/rmsnorm_internal.cuh"

namespace kc::stage2 {

template <typename T>
void residual_rmsnorm_03_fused_in_registers(const ResidualRmsNormArgs<T>& args, cudaStream_t stream) {
  rmsnorm_in_registers(residual_source(args), args.weight, args.y, args.rows, args.cols, args.eps,
                       residual_vector_width(args), stream);
}

template void residual_rmsnorm_03_fused_in_registers<float>(const ResidualRmsNormArgs<float>&, cudaStream_t);
template void residual_rmsnorm_03_fused_in_registers<__half>(const ResidualRmsNormArgs<__half>&, cudaStream_t);
template void residual_rmsnorm_03_fused_in_registers<__nv_bfloat16>(const ResidualRmsNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
