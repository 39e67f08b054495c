// Playground — your softmax rung: y = exp(x - max) / sum(exp(x - max)) per row (rows x cols).
//
// Write the kernel, launch it from my_softmax(), and make my_softmax_written() return true. Then
//   kc-bench --filter playground/softmax/my_softmax --dtype f32 --check-only
//   kc-bench --filter playground/softmax/my_softmax --dtype f32     # against the copy bandwidth
//   ctest --test-dir build/ci -L playground
// The inputs are normal(0, 30): exp(x) without subtracting the row's maximum overflows, and the
// check catches it. Rows of 1 to 40000 elements are tested. This template is registered for f32
// (SoftmaxArgs<float>); stage 2's ladder (stage2-core/kernels/softmax/) shows bf16 and f16 too.
// Start from 01_naive_3pass.cu, then try the online (max, sum) recurrence of 03_online.cu.
#include "kc/playground/playground.hpp"

namespace kc::playground {
namespace {

__global__ void my_softmax_kernel(stage2::SoftmaxArgs<float> args) {
  // TODO: one thread (or warp, or block) per row: find the row's max, sum exp(x - max), write
  // exp(x - max) / sum.
  (void)args;
}

}  // namespace

bool my_softmax_written() { return false; }

void my_softmax(const stage2::SoftmaxArgs<float>& args, cudaStream_t stream) {
  my_softmax_kernel<<<(args.rows + 127) / 128, 128, 0, stream>>>(args);
}

}  // namespace kc::playground
