// Row reductions peer — CUB: a block per row, 16-byte loads, cub::BlockReduce.
//
// The baseline of the row_* ops. CUB's BlockReduce is the well-kept library answer to "reduce
// across a block"; the kernel around it is the minimum to apply it per row (one block of 256
// threads per row, the same vector loads as rung 03). If kc's hand-written reductions are slower
// than this, the lesson has a bug.
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "kc/core/launch.hpp"
#include "kc/core/vector_io.hpp"
#include "row_reduction.cuh"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 256;

template <typename T, int kVec, RowReduction kKind>
__global__ void __launch_bounds__(kThreads) row_reduce_cub_kernel(RowReduceArgs<T> args) {
  using Traits = RowReductionTraits<kKind>;
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const T* x = args.x + static_cast<std::int64_t>(blockIdx.x) * args.cols;
  const typename Traits::Combine combine{};
  float total = Traits::Combine::identity();
  for (int c = static_cast<int>(threadIdx.x) * kVec; c < args.cols; c += kThreads * kVec) {
    float v[kVec];
    core::load_floats<T, kVec>(x + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) total = combine(total, Traits::contribution(v[i]));
  }
  if constexpr (kKind == RowReduction::max)
    total = BlockReduce(temp).Reduce(total, cuda::maximum<float>{});
  else
    total = BlockReduce(temp).Sum(total);
  if (threadIdx.x == 0) args.out[blockIdx.x] = core::from_float<T>(Traits::finish(total, args.cols));
}

}  // namespace

template <typename T>
void row_reduce_cub(const RowReduceArgs<T>& args, cudaStream_t stream) {
  constexpr int kFull = core::kVectorWidth<T>;
  const bool vectorized = core::vector_width(args.cols, sizeof(T), args.x) == kFull;
  const auto blocks = static_cast<unsigned>(args.rows);
  dispatch_reduction(args.kind, [&](auto kind) {
    core::dispatch_vector_width<kFull>(vectorized, [&](auto vec) {
      row_reduce_cub_kernel<T, decltype(vec)::value, decltype(kind)::value>
          <<<blocks, kThreads, 0, stream>>>(args);
    });
  });
}

template void row_reduce_cub<float>(const RowReduceArgs<float>&, cudaStream_t);
template void row_reduce_cub<__half>(const RowReduceArgs<__half>&, cudaStream_t);
template void row_reduce_cub<__nv_bfloat16>(const RowReduceArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
