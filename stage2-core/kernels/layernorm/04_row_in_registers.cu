// LayerNorm rung 04 — the row stays in registers: one read of x, one write of y.
//
// Idea: as RMSNorm rung 05. Each thread loads its vectors once; the team reduces the sum, then —
// over the values already in registers — the sum of squared deviations from the mean (the exact
// two-pass variance at no extra DRAM cost), then writes the normalized values. A warp per row for
// short rows, a block per row for long ones, the rung-03 kernel for rows too long to hold.
//
// What changed from rung 03: x leaves DRAM once; the two extra passes run over registers. Rows
// that fill every slot of the team get a kernel without per-slot bounds checks
// (RowPlan::every_slot_full).
//
// Expected limiter: DRAM bandwidth.
//
// Run just this rung:  kc-bench --filter 'stage2/layernorm/04_row_in_registers'
#include "kc/core/row_source.cuh"
#include "kc/core/row_team.cuh"
#include "layernorm_internal.cuh"

namespace kc::stage2 {
namespace {

template <typename T, int kVec, core::RowTeam kTeam, bool kEverySlotFull>
__global__ void __launch_bounds__(core::Team<kTeam>::kMaxThreads)
    layernorm_registers_kernel(LayerNormArgs<T> args) {
  using Team = core::Team<kTeam>;
  __shared__ float warp_partials[core::kWarpSize];
  const std::int64_t row = Team::row();
  if (row >= args.rows) return;  // a whole warp (warp team) or never (block team)
  const std::int64_t offset = row * args.cols;
  core::RowFragment<kVec, core::kRowVectorsPerThread, kEverySlotFull> fragment(
      Team::rank(), Team::size(), args.cols);
  fragment.load(core::PlainRow<T>{args.x}, offset);
  const auto identity = [](float v) { return v; };
  const float mean =
      Team::reduce(fragment.reduce(core::SumOp{}, identity, 0.f), core::SumOp{}, warp_partials) /
      args.cols;
  const auto squared_deviation = [mean](float v) { return (v - mean) * (v - mean); };
  const float squares =
      Team::reduce(fragment.reduce(core::SumOp{}, squared_deviation, 0.f), core::SumOp{}, warp_partials);
  const float inv_std = rsqrtf(squares / args.cols + args.eps);
  fragment.store(args.y + offset, [&](const float (&v)[kVec], int col, float (&out)[kVec]) {
    float w[kVec], b[kVec];
    core::load_floats<T, kVec>(args.weight + col, w);
    core::load_floats<T, kVec>(args.bias + col, b);
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = (v[i] - mean) * inv_std * w[i] + b[i];
  });
}

}  // namespace

template <typename T>
void layernorm_04_row_in_registers(const LayerNormArgs<T>& args, cudaStream_t stream) {
  const int width = core::vector_width(args.cols, sizeof(T), args.x, args.weight, args.bias, args.y);
  core::run_row_kernel<core::kVectorWidth<T>>(
      args.cols, width,
      [&](auto vec, auto team, auto full, const core::RowPlan& plan) {
        layernorm_registers_kernel<T, decltype(vec)::value, decltype(team)::value, decltype(full)::value>
            <<<static_cast<unsigned>(plan.blocks(args.rows)), plan.threads_per_block, 0, stream>>>(args);
      },
      [&] { layernorm_streaming(args, width, stream); });
}

template void layernorm_04_row_in_registers<float>(const LayerNormArgs<float>&, cudaStream_t);
template void layernorm_04_row_in_registers<__half>(const LayerNormArgs<__half>&, cudaStream_t);
template void layernorm_04_row_in_registers<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
