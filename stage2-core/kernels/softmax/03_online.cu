// Softmax rung 03 — online softmax: the max and the sum in one pass.
//
// Idea: each thread keeps a (max, sum) pair while it reads; when a value raises the max, the sum
// so far is multiplied by exp(old max - new max) (kc::core::online_softmax_update). The block
// combines the pairs in one reduction (block_reduce_max_sum), rescaling each sum to the larger
// max. Then one more pass writes exp(x - max) / sum.
//
// What changed from rung 02: two passes over the row instead of three, one block reduction
// instead of two.
//
// Expected limiter: instruction issue and latency. Per element the first loop issues two exps
// (nvcc predicates the `if`, so the rescale's exp is issued for every element), each wrapped in
// __expf's subnormal fix-up, and a chain of dependent instructions through the max and the sum;
// the pair reduction (MaxSumOp) issues two exps at each of its ten shuffle steps, a fixed cost
// that 512 threads pay for 8 elements each on a 4096-element row. These outweigh the pass saved:
// in bf16 and f16 this rung is slower than rung 02. Rung 04 widens the accesses; rungs 05 and 06
// take the max of a thread's values first and rescale once per thread (FlashAttention's
// block-wise form) and shrink the reduction's cost. The counts: stage2-core/README.md, softmax
// rung 03.
//
// Run just this rung:  kc-bench --filter 'stage2/softmax/03_online'
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/core/vector_io.hpp"
#include "softmax_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kMaxThreads = 512;  // streaming_row_threads() never asks for more

template <typename T, int kVec>
__global__ void __launch_bounds__(kMaxThreads) softmax_online_kernel(SoftmaxArgs<T> args) {
  __shared__ core::MaxSum warp_partials[core::kWarpSize];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * args.cols;
  const T* __restrict__ x = args.x + offset;
  const int first = static_cast<int>(threadIdx.x) * kVec;
  const int step = static_cast<int>(blockDim.x) * kVec;
  core::MaxSum state = core::MaxSumOp::identity();
  for (int c = first; c < args.cols; c += step) {
    float v[kVec];
    core::load_floats<T, kVec>(x + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) state = core::online_softmax_update(state, v[i]);
  }
  const core::MaxSum row = core::block_reduce_max_sum(state, warp_partials);
  const float inv_sum = 1.f / row.sum;
  for (int c = first; c < args.cols; c += step) {
    float v[kVec];
    core::load_floats<T, kVec>(x + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = __expf(v[i] - row.max) * inv_sum;
    core::store_floats<T, kVec>(args.y + offset + c, v);
  }
}

}  // namespace

template <typename T>
void softmax_online_streaming(const SoftmaxArgs<T>& args, int width, cudaStream_t stream) {
  const int threads = core::streaming_row_threads(args.cols, width);
  core::dispatch_vector_width<core::kVectorWidth<T>>(width == core::kVectorWidth<T>, [&](auto vec) {
    softmax_online_kernel<T, decltype(vec)::value>
        <<<static_cast<unsigned>(args.rows), threads, 0, stream>>>(args);
  });
}

template <typename T>
void softmax_03_online(const SoftmaxArgs<T>& args, cudaStream_t stream) {
  softmax_online_streaming(args, 1, stream);
}

template void softmax_03_online<float>(const SoftmaxArgs<float>&, cudaStream_t);
template void softmax_03_online<__half>(const SoftmaxArgs<__half>&, cudaStream_t);
template void softmax_03_online<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, cudaStream_t);

template void softmax_online_streaming<float>(const SoftmaxArgs<float>&, int, cudaStream_t);
template void softmax_online_streaming<__half>(const SoftmaxArgs<__half>&, int, cudaStream_t);
template void softmax_online_streaming<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, int, cudaStream_t);

}  // namespace kc::stage2
