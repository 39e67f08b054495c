// RMSNorm rung 05 — the row stays in registers: one read of x, one write of y.
//
// Idea: a thread loads its share of the row (at most kRowVectorsPerThread 16-byte vectors, all
// issued before any is used) into registers, the team reduces the sum of squares, and the thread
// scales and writes the values it already holds. DRAM sees x once and y once: the minimum.
// Who shares a row depends on its length (kc::core::plan_row): a warp per row up to 128 vectors
// (1024 bf16 elements; four rows per block, reduction by shuffles only), otherwise a block per row
// sized to hold it (4096 bf16 elements: 128 threads x 4 vectors). Rows longer than 1024 threads x
// 4 vectors cannot stay in registers and go to the rung-04 kernel.
//
// What changed from rung 04: no second pass over the row, no loop-carried loads, a team sized to
// the row, and __launch_bounds__ so that the held row cannot spill. Rows that fill every slot of
// the team (32768 x 4096 and x 8192) get a kernel without per-slot bounds checks
// (RowPlan::every_slot_full), which issues fewer instructions per thread (the SASS counts:
// docs/notes/2026-12-01-source-measurements.md).
//
// Expected limiter: DRAM bandwidth.
//
// Run just this rung:  kc-bench --filter 'stage2/rmsnorm/05_row_in_registers'
#include "kc/core/row_team.cuh"
#include "rmsnorm_internal.cuh"

namespace kc::stage2 {
namespace {

template <typename T, int kVec, core::RowTeam kTeam, bool kEverySlotFull, class Source>
__global__ void __launch_bounds__(core::Team<kTeam>::kMaxThreads)
    rmsnorm_registers_kernel(Source source, const T* __restrict__ weight, T* __restrict__ y,
                             int rows, int cols, float eps) {
  using Team = core::Team<kTeam>;
  __shared__ float warp_partials[core::kWarpSize];
  const std::int64_t row = Team::row();
  if (row >= rows) return;  // a whole warp (warp team) or never (block team: one block per row)
  const std::int64_t offset = row * cols;
  core::RowFragment<kVec, core::kRowVectorsPerThread, kEverySlotFull> fragment(
      Team::rank(), Team::size(), cols);
  fragment.load(source, offset);
  const float sum_squares = Team::reduce(
      fragment.reduce(core::SumOp{}, [](float v) { return v * v; }, 0.f), core::SumOp{},
      warp_partials);
  const float inv_rms = rsqrtf(sum_squares / cols + eps);
  fragment.store(y + offset, [&](const float (&v)[kVec], int col, float (&out)[kVec]) {
    float w[kVec];
    core::load_floats<T, kVec>(weight + col, w);
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = v[i] * inv_rms * w[i];
  });
}

}  // namespace

template <typename T, class Source>
void rmsnorm_in_registers(const Source& source, const T* weight, T* y, int rows, int cols,
                          float eps, int width, cudaStream_t stream) {
  core::run_row_kernel<core::kVectorWidth<T>>(
      cols, width,
      [&](auto vec, auto team, auto full, const core::RowPlan& plan) {
        rmsnorm_registers_kernel<T, decltype(vec)::value, decltype(team)::value, decltype(full)::value>
            <<<static_cast<unsigned>(plan.blocks(rows)), plan.threads_per_block, 0, stream>>>(
                source, weight, y, rows, cols, eps);
      },
      [&] { rmsnorm_streaming(source, weight, y, rows, cols, eps, width, stream); });
}

template <typename T>
void rmsnorm_05_row_in_registers(const RmsNormArgs<T>& args, cudaStream_t stream) {
  const int width = core::vector_width(args.cols, sizeof(T), args.x, args.weight, args.y);
  rmsnorm_in_registers(core::PlainRow<T>{args.x}, args.weight, args.y, args.rows, args.cols,
                       args.eps, width, stream);
}

template void rmsnorm_05_row_in_registers<float>(const RmsNormArgs<float>&, cudaStream_t);
template void rmsnorm_05_row_in_registers<__half>(const RmsNormArgs<__half>&, cudaStream_t);
template void rmsnorm_05_row_in_registers<__nv_bfloat16>(const RmsNormArgs<__nv_bfloat16>&, cudaStream_t);

// The sources rmsnorm and residual_rmsnorm use.
template void rmsnorm_in_registers(const core::PlainRow<float>&, const float*, float*, int, int, float, int, cudaStream_t);
template void rmsnorm_in_registers(const core::PlainRow<__half>&, const __half*, __half*, int, int, float, int, cudaStream_t);
template void rmsnorm_in_registers(const core::PlainRow<__nv_bfloat16>&, const __nv_bfloat16*, __nv_bfloat16*, int, int, float, int, cudaStream_t);
template void rmsnorm_in_registers(const core::CombinedRow<float>&, const float*, float*, int, int, float, int, cudaStream_t);
template void rmsnorm_in_registers(const core::CombinedRow<__half>&, const __half*, __half*, int, int, float, int, cudaStream_t);
template void rmsnorm_in_registers(const core::CombinedRow<__nv_bfloat16>&, const __nv_bfloat16*, __nv_bfloat16*, int, int, float, int, cudaStream_t);

}  // namespace kc::stage2
