// RMSNorm rung 01 — naive: one thread per row.
//
// Idea: the definition, transcribed. y = x / sqrt(mean(x^2) + eps) * weight. Thread r walks row r
// twice: once for the sum of squares, once to scale and write. The sum is compensated (Kahan): a
// single thread adding 40000 squares into one float would drift by ~1e-4 relative, too much for an
// f32 result.
//
// What to notice: a warp's 32 threads read 32 different rows, cols elements apart, so each load
// instruction touches 32 separate sectors and uses 2 bytes of each 32-byte sector (bf16). The L1
// catches some of the waste, but the grid has only rows / 128 blocks and each thread runs a long
// serial loop: few bytes in flight, latency everywhere.
//
// Expected limiter: memory latency and sector waste — a few percent of copy bandwidth.
//
// Run just this rung:  kc-bench --filter 'stage2/rmsnorm/01_naive'
#include "kc/core/dtype_traits.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 128;

template <typename T>
__global__ void rmsnorm_naive_kernel(RmsNormArgs<T> args) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= args.rows) return;
  const T* x = args.x + row * args.cols;
  T* y = args.y + row * args.cols;
  core::CompensatedSum sum_squares;  // a plain running float sum drifts on long rows
  for (int c = 0; c < args.cols; ++c) {
    const float v = core::to_float(x[c]);
    sum_squares.add(v * v);
  }
  const float inv_rms = rsqrtf(sum_squares.value() / args.cols + args.eps);
  for (int c = 0; c < args.cols; ++c)
    y[c] = core::from_float<T>(core::to_float(x[c]) * inv_rms * core::to_float(args.weight[c]));
}

}  // namespace

template <typename T>
void rmsnorm_01_naive(const RmsNormArgs<T>& args, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(core::ceil_div(args.rows, kThreads));
  rmsnorm_naive_kernel<T><<<blocks, kThreads, 0, stream>>>(args);
}

template void rmsnorm_01_naive<float>(const RmsNormArgs<float>&, cudaStream_t);
template void rmsnorm_01_naive<__half>(const RmsNormArgs<__half>&, cudaStream_t);
template void rmsnorm_01_naive<__nv_bfloat16>(const RmsNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
