// Row reductions rung 01 — naive: one thread per row.
//
// Idea: out[r] = sum / max / mean / sum of squares of row r, one thread walking its row.
//
// What to notice: the same scattered accesses and serial loops as every rung-01 row kernel.
//
// Expected limiter: memory latency and sector waste.
//
// Run just this rung:  kc-bench --filter 'stage2/row_.*/01_naive'
#include "kc/core/dtype_traits.hpp"
#include "kc/core/launch.hpp"
#include "row_reduction.cuh"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 128;

template <typename T, RowReduction kKind>
__global__ void row_reduce_naive_kernel(RowReduceArgs<T> args) {
  using Traits = RowReductionTraits<kKind>;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= args.rows) return;
  const T* x = args.x + row * args.cols;
  const typename Traits::Combine combine{};
  float total = Traits::Combine::identity();
  for (int c = 0; c < args.cols; ++c) total = combine(total, Traits::contribution(core::to_float(x[c])));
  args.out[row] = core::from_float<T>(Traits::finish(total, args.cols));
}

}  // namespace

template <typename T>
void row_reduce_01_naive(const RowReduceArgs<T>& args, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(core::ceil_div(args.rows, kThreads));
  dispatch_reduction(args.kind, [&](auto kind) {
    row_reduce_naive_kernel<T, decltype(kind)::value><<<blocks, kThreads, 0, stream>>>(args);
  });
}

template void row_reduce_01_naive<float>(const RowReduceArgs<float>&, cudaStream_t);
template void row_reduce_01_naive<__half>(const RowReduceArgs<__half>&, cudaStream_t);
template void row_reduce_01_naive<__nv_bfloat16>(const RowReduceArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
