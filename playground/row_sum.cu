// Playground — your row reduction: out[r] = sum of row r (rows x cols, float accumulation).
//
// Write the kernel, launch it from my_row_sum(), and make my_row_sum_written() return true. Then
//   kc-bench --filter playground/row_sum/my_row_sum --dtype f32 --check-only
//   kc-bench --filter playground/row_sum/my_row_sum --dtype f32      # against CUB's BlockReduce
//   ctest --test-dir build/ci -L playground
// Registered for f32 (RowReduceArgs<float>, args.kind == RowReduction::sum). A sum of many floats
// carries rounding error; the check allows what an FP32 sum of `cols` terms legitimately gets
// wrong, no more. Start from stage2-core/kernels/row_reduce/01_naive.cu, then 02_warp_shuffle.cu.
#include "kc/playground/playground.hpp"

namespace kc::playground {
namespace {

__global__ void my_row_sum_kernel(stage2::RowReduceArgs<float> args) {
  // TODO: out[row] = x[row * cols + 0] + ... + x[row * cols + cols - 1].
  (void)args;
}

}  // namespace

bool my_row_sum_written() { return false; }

void my_row_sum(const stage2::RowReduceArgs<float>& args, cudaStream_t stream) {
  my_row_sum_kernel<<<(args.rows + 127) / 128, 128, 0, stream>>>(args);
}

}  // namespace kc::playground
