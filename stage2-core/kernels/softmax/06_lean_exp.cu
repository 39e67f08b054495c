// Softmax rung 06 — the same single read as rung 05, with well under half its instructions.
//
// Idea: rung 05 moves the minimum bytes, yet reached a clearly lower share of copy bandwidth at
// 32768 x 4096 bf16 than RMSNorm rung 05 with the same row team. The SASS says why: rung 05
// issued about two and a half times RMSNorm's instructions per thread for its 32 values. The time
// an SM needs to issue them is instructions per thread x 4 warps per row x the rows it gets / 4
// schedulers issuing one instruction per cycle; for rung 05 that came to about the time DRAM
// needs to move the same bytes at copy speed. Issue, not memory, was the limiter: across the
// stage-2 register kernels, % of copy fell as instructions per byte rose. (The counts and the
// figures: stage2-core/README.md, Softmax, and docs/notes/2026-12-01-source-measurements.md.)
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
// bounds checks for rows that fill every slot, which 32768 x 4096 and x 8192 do.) In the SASS of
// the bf16 block-team kernel for those rows this rung issues well under half of rung 05's
// instructions per thread, fewer MUFU, and one barrier instead of two (the counts:
// stage2-core/README.md, rung 06).
//
// Expected limiter: DRAM bandwidth. Predicted: close to RMSNorm rung 05's share of copy
// bandwidth, whose instruction count this rung approaches. Measured: stage2-core/README.md
// (Softmax) and docs/benchmarks/h200/stage2.md.
//
// Run just this rung:  kc-bench --filter 'stage2/softmax/06_lean_exp'
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
