// LayerNorm rung 05 — rung 04's exact two-pass statistics with half the barriers.
//
// Idea: rung 04 reads x once, yet first reached a lower share of copy bandwidth at 32768 x 4096
// bf16 than RMSNorm rung 05: rung 04 issued many more instructions per thread and waited at four
// barriers per row (RMSNorm: two). (The counts and the figures: stage2-core/README.md, LayerNorm,
// and docs/notes/2026-12-01-source-measurements.md.) The softmax ladder (rung 06) shows why
// instructions matter at one row per block; this rung takes on the barriers and what is left of
// the instructions:
//   1. Each statistic gets its own shared-memory partials (Team::reduce_once). No array is
//      reused, so neither reduction needs block_reduce's trailing barrier: two barriers per row
//      instead of four, and every warp waits for the slowest one of its block half as often.
//   2. The deviations d = x - mean replace the held values once; the variance is a sum of d * d
//      and the output d * inv_std * weight + bias. Rung 04 subtracted the mean twice per element.
//   3. 1 / cols is computed once, while the loads are in flight, instead of two divisions after
//      the reductions.
// The variance stays the exact two-pass form around the mean (no E[x^2] - mean^2 cancellation):
// the second pass runs over registers, so it costs instructions, not DRAM traffic.
//
// What changed from rung 04: the three points above; same traffic, same statistics. (Both rungs
// also gained two library changes: bf16 widened with one integer instruction per element, and a
// kernel without per-slot bounds checks for rows that fill every slot, as 32768 x 4096 and x 8192
// do.) In the SASS of the bf16 block-team kernel, for rows that fill every slot both rungs issue
// as many instructions per thread, because nvcc already merges rung 04's two subtractions there,
// so the difference is 2 barriers instead of 4; for other rows this rung issues fewer (the counts:
// docs/notes/2026-12-01-source-measurements.md).
//
// Expected limiter: DRAM bandwidth. With the library changes rung 04 already comes close to copy
// bandwidth at 32768 x 4096 and x 8192, and the two barriers this rung saves do not show at those
// sizes. Measured: stage2-core/README.md (LayerNorm) and docs/benchmarks/h200/stage2.md.
//
// Run just this rung:  kc-bench --filter 'stage2/layernorm/05_lean_two_pass'
#include "kc/core/row_source.cuh"
#include "kc/core/row_team.cuh"
#include "layernorm_internal.cuh"

namespace kc::stage2 {
namespace {

template <typename T, int kVec, core::RowTeam kTeam, bool kEverySlotFull>
__global__ void __launch_bounds__(core::Team<kTeam>::kMaxThreads)
    layernorm_lean_kernel(LayerNormArgs<T> args) {
  using Team = core::Team<kTeam>;
  __shared__ float warp_partials[2][core::kWarpSize];  // one array per reduction
  const std::int64_t row = Team::row();
  if (row >= args.rows) return;  // a whole warp (warp team) or never (block team)
  const std::int64_t offset = row * args.cols;
  const float inv_cols = 1.f / static_cast<float>(args.cols);
  core::RowFragment<kVec, core::kRowVectorsPerThread, kEverySlotFull> fragment(
      Team::rank(), Team::size(), args.cols);
  fragment.load(core::PlainRow<T>{args.x}, offset);
  const float sum = fragment.reduce(core::SumOp{}, [](float v) { return v; }, 0.f);
  const float mean = Team::reduce_once(sum, core::SumOp{}, warp_partials[0]) * inv_cols;
  fragment.transform([mean](float v) { return v - mean; });
  const float squares = fragment.reduce(core::SumOp{}, [](float d) { return d * d; }, 0.f);
  const float inv_std =
      rsqrtf(Team::reduce_once(squares, core::SumOp{}, warp_partials[1]) * inv_cols + args.eps);
  fragment.store(args.y + offset, [&](const float (&d)[kVec], int col, float (&out)[kVec]) {
    float w[kVec], b[kVec];
    core::load_floats<T, kVec>(args.weight + col, w);
    core::load_floats<T, kVec>(args.bias + col, b);
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = d[i] * inv_std * w[i] + b[i];
  });
}

}  // namespace

template <typename T>
void layernorm_05_lean_two_pass(const LayerNormArgs<T>& args, cudaStream_t stream) {
  const int width = core::vector_width(args.cols, sizeof(T), args.x, args.weight, args.bias, args.y);
  core::run_row_kernel<core::kVectorWidth<T>>(
      args.cols, width,
      [&](auto vec, auto team, auto full, const core::RowPlan& plan) {
        layernorm_lean_kernel<T, decltype(vec)::value, decltype(team)::value, decltype(full)::value>
            <<<static_cast<unsigned>(plan.blocks(args.rows)), plan.threads_per_block, 0, stream>>>(args);
      },
      [&] { layernorm_streaming(args, width, stream); });
}

template void layernorm_05_lean_two_pass<float>(const LayerNormArgs<float>&, cudaStream_t);
template void layernorm_05_lean_two_pass<__half>(const LayerNormArgs<__half>&, cudaStream_t);
template void layernorm_05_lean_two_pass<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
