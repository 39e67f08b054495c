// Residual + RMSNorm rung 01 — unfused: an add kernel, then the best RMSNorm kernel.
//
// Idea: the obvious composition of two library calls. kc::core::map adds x and the residual into
// `sum` (16-byte accesses), then the rung-05 RMSNorm reads `sum` back and writes y.
//
// What to notice: each kernel is fast on its own, but `sum` makes a round trip through DRAM:
// the pair moves x, residual, sum (write), sum (read again), y: 5 row-sized transfers where
// 4 suffice. At best 4/5 of copy speed, before the second launch's tail is counted.
//
// Expected limiter: DRAM bandwidth spent on the extra read of `sum`.
//
// Run just this rung:  kc-bench --filter 'stage2/residual_rmsnorm/01_unfused'
#include "kc/core/elementwise.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

template <typename T>
void residual_rmsnorm_01_unfused(const ResidualRmsNormArgs<T>& args, cudaStream_t stream) {
  const auto matrix = [&](auto* data) { return core::contiguous_view(data, args.rows, args.cols); };
  core::map(matrix(args.sum), core::Add{}, stream, matrix(args.x), matrix(args.residual));
  RmsNormArgs<T> norm;
  norm.rows = args.rows;
  norm.cols = args.cols;
  norm.x = args.sum;
  norm.weight = args.weight;
  norm.y = args.y;
  norm.eps = args.eps;
  rmsnorm_05_row_in_registers(norm, stream);
}

template void residual_rmsnorm_01_unfused<float>(const ResidualRmsNormArgs<float>&, cudaStream_t);
template void residual_rmsnorm_01_unfused<__half>(const ResidualRmsNormArgs<__half>&, cudaStream_t);
template void residual_rmsnorm_01_unfused<__nv_bfloat16>(const ResidualRmsNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
