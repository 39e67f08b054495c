// Softmax rung 05 — the row stays in registers: one read, one write, one exp per element.
//
// Idea: each thread loads its vectors once and, over its own values, finds its local max m_t,
// replaces every value x by e = exp(x - m_t) and sums them into s_t. The team combines the
// (m_t, s_t) pairs in a single reduction (kc::core::MaxSumOp) into the row's (M, S). Each value
// is then e * exp(m_t - M) / S: one multiply by a per-thread factor, no second exp per element.
// A warp per row for short rows, a block per row for long ones, the rung-04 kernel for rows too
// long to hold.
//
// What changed from rung 04: no second pass over the row, half the exps, one reduction. Rows that
// fill every slot of the team get a kernel without per-slot bounds checks
// (RowPlan::every_slot_full). Rung 06 shows what this rung's instruction count costs.
//
// Expected limiter: DRAM bandwidth (the exps go to the SFU, one per element).
//
// Run just this rung:  kc-bench --filter 'stage2/softmax/05_row_in_registers'
#include "kc/core/row_source.cuh"
#include "kc/core/row_team.cuh"
#include "softmax_internal.cuh"

namespace kc::stage2 {
namespace {

template <typename T, int kVec, core::RowTeam kTeam, bool kEverySlotFull>
__global__ void __launch_bounds__(core::Team<kTeam>::kMaxThreads)
    softmax_registers_kernel(SoftmaxArgs<T> args) {
  using Team = core::Team<kTeam>;
  __shared__ core::MaxSum warp_partials[core::kWarpSize];
  const std::int64_t row = Team::row();
  if (row >= args.rows) return;  // a whole warp (warp team) or never (block team)
  const std::int64_t offset = row * args.cols;
  core::RowFragment<kVec, core::kRowVectorsPerThread, kEverySlotFull> fragment(
      Team::rank(), Team::size(), args.cols);
  fragment.load(core::PlainRow<T>{args.x}, offset);
  const float local_max = fragment.reduce(core::MaxOp{}, [](float v) { return v; }, -CUDART_INF_F);
  // -inf contributes 0 even where local_max is -inf (exp(-inf - -inf) would be NaN).
  fragment.transform([local_max](float v) { return v == -CUDART_INF_F ? 0.f : __expf(v - local_max); });
  const float local_sum = fragment.reduce(core::SumOp{}, [](float e) { return e; }, 0.f);
  const core::MaxSum total = Team::reduce(core::MaxSum{local_max, local_sum}, core::MaxSumOp{}, warp_partials);
  const float factor = core::rescale_factor(local_max, total.max) / total.sum;
  fragment.store(args.y + offset, [factor](const float (&e)[kVec], int, float (&out)[kVec]) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = e[i] * factor;
  });
}

}  // namespace

template <typename T>
void softmax_05_row_in_registers(const SoftmaxArgs<T>& args, cudaStream_t stream) {
  const int width = core::vector_width(args.cols, sizeof(T), args.x, args.y);
  core::run_row_kernel<core::kVectorWidth<T>>(
      args.cols, width,
      [&](auto vec, auto team, auto full, const core::RowPlan& plan) {
        softmax_registers_kernel<T, decltype(vec)::value, decltype(team)::value, decltype(full)::value>
            <<<static_cast<unsigned>(plan.blocks(args.rows)), plan.threads_per_block, 0, stream>>>(args);
      },
      [&] { softmax_online_streaming(args, width, stream); });
}

template void softmax_05_row_in_registers<float>(const SoftmaxArgs<float>&, cudaStream_t);
template void softmax_05_row_in_registers<__half>(const SoftmaxArgs<__half>&, cudaStream_t);
template void softmax_05_row_in_registers<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
