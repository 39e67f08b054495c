// LayerNorm rung 01 — naive: one thread per row.
//
// Idea: the definition. y = (x - mean) / sqrt(var + eps) * weight + bias, with the variance taken
// around the mean in a second pass (E[x^2] - mean^2 cancels catastrophically when |mean| >> std).
// Thread r walks row r three times.
//
// What to notice: as in RMSNorm rung 01, a warp's loads are scattered over 32 rows and there are
// only rows / 128 blocks.
//
// Expected limiter: memory latency and sector waste.
//
// Run just this rung:  kc-bench --filter 'stage2/layernorm/01_naive'
#include "kc/core/dtype_traits.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 128;

template <typename T>
__global__ void layernorm_naive_kernel(LayerNormArgs<T> args) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= args.rows) return;
  const T* x = args.x + row * args.cols;
  T* y = args.y + row * args.cols;
  // Compensated (Kahan) sums: a plain running float sum over a long row drifts by ~n*eps.
  core::CompensatedSum sum;
  for (int c = 0; c < args.cols; ++c) sum.add(core::to_float(x[c]));
  const float mean = sum.value() / args.cols;
  core::CompensatedSum squares;
  for (int c = 0; c < args.cols; ++c) {
    const float d = core::to_float(x[c]) - mean;
    squares.add(d * d);
  }
  const float inv_std = rsqrtf(squares.value() / args.cols + args.eps);
  for (int c = 0; c < args.cols; ++c)
    y[c] = core::from_float<T>((core::to_float(x[c]) - mean) * inv_std * core::to_float(args.weight[c]) +
                               core::to_float(args.bias[c]));
}

}  // namespace

template <typename T>
void layernorm_01_naive(const LayerNormArgs<T>& args, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(core::ceil_div(args.rows, kThreads));
  layernorm_naive_kernel<T><<<blocks, kThreads, 0, stream>>>(args);
}

template void layernorm_01_naive<float>(const LayerNormArgs<float>&, cudaStream_t);
template void layernorm_01_naive<__half>(const LayerNormArgs<__half>&, cudaStream_t);
template void layernorm_01_naive<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
