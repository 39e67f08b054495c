// Row reductions rung 03 — 16-byte loads, a warp or a block per row by length.
//
// Idea: 16-byte vector loads where vector_width allows, and the team chosen by plan_row: a warp
// per row (four rows per block, shuffles only) for rows up to 128 vectors, a block per row above.
// The row is read once and never needed again, so nothing is held: each thread streams its
// vectors into a running partial.
//
// What changed from rung 02: vector accesses, and short rows no longer waste a whole block.
//
// Expected limiter: DRAM bandwidth (the output, one value per row, is negligible).
//
// Run just this rung:  kc-bench --filter 'stage2/row_.*/03_vectorized'
#include "kc/core/row_team.cuh"
#include "row_reduction.cuh"

namespace kc::stage2 {
namespace {

template <typename T, int kVec, core::RowTeam kTeam, RowReduction kKind>
__global__ void __launch_bounds__(core::Team<kTeam>::kMaxThreads)
    row_reduce_vectorized_kernel(RowReduceArgs<T> args) {
  using Team = core::Team<kTeam>;
  using Traits = RowReductionTraits<kKind>;
  __shared__ float warp_partials[core::kWarpSize];
  const std::int64_t row = Team::row();
  if (row >= args.rows) return;  // a whole warp (warp team) or never (block team)
  const T* x = args.x + row * args.cols;
  const typename Traits::Combine combine{};
  float total = Traits::Combine::identity();
  for (int c = Team::rank() * kVec; c < args.cols; c += Team::size() * kVec) {
    float v[kVec];
    core::load_floats<T, kVec>(x + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) total = combine(total, Traits::contribution(v[i]));
  }
  total = Team::reduce(total, combine, warp_partials);
  if (Team::rank() == 0) args.out[row] = core::from_float<T>(Traits::finish(total, args.cols));
}

}  // namespace

template <typename T>
void row_reduce_03_vectorized(const RowReduceArgs<T>& args, cudaStream_t stream) {
  constexpr int kFull = core::kVectorWidth<T>;
  const bool vectorized = core::vector_width(args.cols, sizeof(T), args.x) == kFull;
  const core::RowPlan plan = core::plan_row(args.cols, vectorized ? kFull : 1);
  dispatch_reduction(args.kind, [&](auto kind) {
    core::dispatch_row_kernel<kFull>(plan, vectorized, [&](auto vec, auto team) {
      row_reduce_vectorized_kernel<T, decltype(vec)::value, decltype(team)::value, decltype(kind)::value>
          <<<static_cast<unsigned>(plan.blocks(args.rows)), plan.threads_per_block, 0, stream>>>(args);
    });
  });
}

template void row_reduce_03_vectorized<float>(const RowReduceArgs<float>&, cudaStream_t);
template void row_reduce_03_vectorized<__half>(const RowReduceArgs<__half>&, cudaStream_t);
template void row_reduce_03_vectorized<__nv_bfloat16>(const RowReduceArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
