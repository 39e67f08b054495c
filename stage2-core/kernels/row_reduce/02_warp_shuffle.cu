// Row reductions rung 02 — a block per row, warp-shuffle reduction.
//
// Idea: a block per row with coalesced scalar accesses; partials combine through
// kc::core::block_reduce (shuffles inside each warp, one shared-memory exchange between warps).
//
// What changed from rung 01: coalescing and a block per row.
//
// Expected limiter: memory instructions (2- or 4-byte accesses).
//
// Run just this rung:  kc-bench --filter 'stage2/row_.*/02_warp_shuffle'
#include "kc/core/launch.hpp"
#include "kc/core/vector_io.hpp"
#include "row_reduction.cuh"

namespace kc::stage2 {
namespace {

constexpr int kMaxThreads = 512;

template <typename T, RowReduction kKind>
__global__ void __launch_bounds__(kMaxThreads) row_reduce_block_kernel(RowReduceArgs<T> args) {
  using Traits = RowReductionTraits<kKind>;
  __shared__ float warp_partials[core::kWarpSize];
  const T* x = args.x + static_cast<std::int64_t>(blockIdx.x) * args.cols;
  const typename Traits::Combine combine{};
  float total = Traits::Combine::identity();
  for (int c = threadIdx.x; c < args.cols; c += blockDim.x)
    total = combine(total, Traits::contribution(core::to_float(x[c])));
  total = core::block_reduce(total, combine, warp_partials);
  if (threadIdx.x == 0) args.out[blockIdx.x] = core::from_float<T>(Traits::finish(total, args.cols));
}

}  // namespace

template <typename T>
void row_reduce_02_warp_shuffle(const RowReduceArgs<T>& args, cudaStream_t stream) {
  const int threads = core::streaming_row_threads(args.cols, 1);
  dispatch_reduction(args.kind, [&](auto kind) {
    row_reduce_block_kernel<T, decltype(kind)::value>
        <<<static_cast<unsigned>(args.rows), threads, 0, stream>>>(args);
  });
}

template void row_reduce_02_warp_shuffle<float>(const RowReduceArgs<float>&, cudaStream_t);
template void row_reduce_02_warp_shuffle<__half>(const RowReduceArgs<__half>&, cudaStream_t);
template void row_reduce_02_warp_shuffle<__nv_bfloat16>(const RowReduceArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
