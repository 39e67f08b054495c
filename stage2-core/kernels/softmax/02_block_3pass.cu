// Softmax rung 02 — a block per row, still three passes.
//
// Idea: the same three passes, each by a whole block with coalesced accesses: a block max
// (kc::core::block_reduce_max), a block sum of exp(x - max) (block_reduce_sum), then the write.
//
// What changed from rung 01: coalescing and a block per row. Still three trips over the row
// (the second and third mostly from L2) and two block reductions, i.e. four barriers.
//
// Expected limiter: latency. In the SASS the three loops are rolled (one load in flight per
// thread, used before the next is issued), so a row waits for one round trip per element a
// thread handles, in each of three passes; instruction issue comes close behind (two exps per
// element).
//
// Run just this rung:  kc-bench --filter 'stage2/softmax/02_block_3pass'
#include "kc/core/dtype_traits.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {
namespace {

constexpr int kMaxThreads = 512;

template <typename T>
__global__ void __launch_bounds__(kMaxThreads) softmax_block_3pass_kernel(SoftmaxArgs<T> args) {
  __shared__ float warp_partials[core::kWarpSize];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * args.cols;
  const T* __restrict__ x = args.x + offset;
  float m = -CUDART_INF_F;
  for (int c = threadIdx.x; c < args.cols; c += blockDim.x)
    m = core::max_propagate_nan(m, core::to_float(x[c]));
  m = core::block_reduce_max(m, warp_partials);
  float sum = 0.f;
  for (int c = threadIdx.x; c < args.cols; c += blockDim.x) sum += __expf(core::to_float(x[c]) - m);
  const float inv_sum = 1.f / core::block_reduce_sum(sum, warp_partials);
  for (int c = threadIdx.x; c < args.cols; c += blockDim.x)
    args.y[offset + c] = core::from_float<T>(__expf(core::to_float(x[c]) - m) * inv_sum);
}

}  // namespace

template <typename T>
void softmax_02_block_3pass(const SoftmaxArgs<T>& args, cudaStream_t stream) {
  const int threads = core::streaming_row_threads(args.cols, 1);
  softmax_block_3pass_kernel<T><<<static_cast<unsigned>(args.rows), threads, 0, stream>>>(args);
}

template void softmax_02_block_3pass<float>(const SoftmaxArgs<float>&, cudaStream_t);
template void softmax_02_block_3pass<__half>(const SoftmaxArgs<__half>&, cudaStream_t);
template void softmax_02_block_3pass<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
