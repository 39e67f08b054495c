// Softmax rung 06 — the same single read as rung 05, with well under half its instructions.
//
// Idea: rung 05 moves the minimum bytes, yet measured 79% of copy bandwidth at 32768 x 4096 bf16
// where RMSNorm rung 05, with the same row team, measured 97%. The SASS says why: rung 05 issued
// 949 instructions per thread for its 32 values (RMSNorm: 374). A row is 4 warps, an SM gets 248
// rows and has 4 schedulers issuing one instruction per cycle: 949 x 4 x 248 / 4 = 235 000 cycles,
// 119 us at 1.98 GHz, against 127 us for DRAM to move the same bytes at copy speed. Issue, not
// memory, was the limiter. Across the stage-2 register kernels measured on the H200, % of copy
// fell as instructions per byte rose (residual + RMSNorm 99%, RMSNorm 97%, LayerNorm 91%,
// softmax 79%).
// Three things cost the instructions:
//   1. __expf without -ftz: nvcc wraps each ex2.approx.f32 in a subnormal fix-up (compare,
//      predicate logic, two predicated multiplies). kc::core::exp_flush_to_zero issues the
//      flushing ex2.approx.ftz.f32 instead: one multiply and one MUFU.EX2.
//   2. The -inf guard per element (v == -inf ? 0 : exp(v - m)) exists only because a thread whose
//      values are all -inf would compute exp(-inf - -inf) = NaN. Subtracting 0 instead of the
//      maximum in that one case gives exp(-inf - 0) = 0: one select per thread, not per element.
//   3. The (max, sum) pair reduction pays two exps (each with its fix-up) at each of its ten
//      shuffle steps. kc::core::MaxThenSum agrees on the maximum first and rescales each lane's
//      sum once: one exp per lane per level, and a single barrier (reduce_once: the partials are
//      never reused, so block_reduce's trailing barrier goes).
// Each value is still e * exp(m_t - M) / S with one exp per element; the arithmetic is rung 05's.
//
// What changed from rung 05: only the three points above. (Both rungs also gained two library
// changes: bf16 widened with one integer instruction per element, and a kernel without per-slot
// bounds checks for rows that fill every slot, which 32768 x 4096 and x 8192 do.) SASS of the bf16
// block-team kernel for those rows (nvcc 13.0, sm_90a, without the division slow path): rung 05
// 895 instructions per thread, 54 MUFU, 2 barriers; this rung 378, 36 MUFU, 1 barrier; RMSNorm
// rung 05 294.
//
// Expected limiter: DRAM bandwidth. Predicted: at RMSNorm rung 05's level (97% of copy with 374
// instructions per thread), i.e. about 95% or more of copy, from 79%. Measured on the H200 (commit
// c8a51da, bf16): 4115 GB/s at 32768 x 4096 and 4182 at x 8192, 97.8% and 99.4% of the 4207 GB/s
// copy; rung 05 in the same run: 3575 and 3577.
//
// Run just this rung:  kc-bench --filter 'stage2/softmax_.*/06_lean_exp'
#include "kc/core/row_source.cuh"
#include "kc/core/row_team.cuh"
#include "softmax_internal.cuh"

namespace kc::stage2 {
namespace {

template <typename T, int kVec, core::RowTeam kTeam, bool kEverySlotFull>
__global__ void __launch_bounds__(core::Team<kTeam>::kMaxThreads)
    softmax_lean_exp_kernel(SoftmaxArgs<T> args) {
  using Team = core::Team<kTeam>;
  __shared__ core::MaxSum warp_partials[core::kWarpSize];
  const std::int64_t row = Team::row();
  if (row >= args.rows) return;  // a whole warp (warp team) or never (block team)
  const std::int64_t offset = row * args.cols;
  core::RowFragment<kVec, core::kRowVectorsPerThread, kEverySlotFull> fragment(
      Team::rank(), Team::size(), args.cols);
  fragment.load(core::PlainRow<T>{args.x}, offset);
  const float local_max = fragment.reduce(core::MaxOp{}, [](float v) { return v; }, -CUDART_INF_F);
  // All of this thread's values are -inf (or it holds none): exp(v - 0) = 0 for each of them.
  const float shift = local_max == -CUDART_INF_F ? 0.f : local_max;
  fragment.transform([shift](float v) { return core::exp_flush_to_zero(v - shift); });
  const float local_sum = fragment.reduce(core::SumOp{}, [](float e) { return e; }, 0.f);
  const core::MaxSum total =
      Team::reduce_once(core::MaxSum{local_max, local_sum}, core::MaxThenSum{}, warp_partials);
  // A thread of an all -inf row gets 1 / 0 = inf here and writes 0 * inf = NaN, as the formula.
  const float factor = core::rescale_factor_flush_to_zero(local_max, total.max) / total.sum;
  fragment.store(args.y + offset, [factor](const float (&e)[kVec], int, float (&out)[kVec]) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = e[i] * factor;
  });
}

}  // namespace

template <typename T>
void softmax_06_lean_exp(const SoftmaxArgs<T>& args, cudaStream_t stream) {
  const int width = core::vector_width(args.cols, sizeof(T), args.x, args.y);
  core::run_row_kernel<core::kVectorWidth<T>>(
      args.cols, width,
      [&](auto vec, auto team, auto full, const core::RowPlan& plan) {
        softmax_lean_exp_kernel<T, decltype(vec)::value, decltype(team)::value, decltype(full)::value>
            <<<static_cast<unsigned>(plan.blocks(args.rows)), plan.threads_per_block, 0, stream>>>(args);
      },
      [&] { softmax_online_streaming(args, width, stream); });
}

template void softmax_06_lean_exp<float>(const SoftmaxArgs<float>&, cudaStream_t);
template void softmax_06_lean_exp<__half>(const SoftmaxArgs<__half>&, cudaStream_t);
template void softmax_06_lean_exp<__nv_bfloat16>(const SoftmaxArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
