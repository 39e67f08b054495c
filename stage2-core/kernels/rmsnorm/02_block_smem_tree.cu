// RMSNorm rung 02 — a block per row, shared-memory tree reduction.
//
// Idea: give each row to a block of 256 threads. Thread t reads elements t, t + 256, ... so a
// warp reads 32 adjacent elements: one 64-byte (bf16) access instead of 32 scattered ones. The
// 256 partial sums meet in shared memory and halve eight times (128, 64, ..., 1), with a
// __syncthreads after each step.
//
// What changed from rung 01: coalesced loads and a block per row (rows blocks instead of
// rows / 128): plenty of parallelism. The price is the reduction: eight barriers, and in the last
// five steps most of the block idles while a few threads add.
//
// Expected limiter: memory, at a fraction of copy speed — scalar 2-byte accesses need many
// instructions per byte, and x is read twice (the second time mostly from L2).
//
// Run just this rung:  kc-bench --filter 'stage2/rmsnorm/02_block_smem_tree'
#include "kc/core/dtype_traits.hpp"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 256;  // a power of two: the tree halves it down to 1

template <typename T>
__global__ void __launch_bounds__(kThreads) rmsnorm_smem_tree_kernel(RmsNormArgs<T> args) {
  __shared__ float partial[kThreads];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * args.cols;
  const T* x = args.x + offset;
  float sum_squares = 0.f;
  for (int c = threadIdx.x; c < args.cols; c += kThreads) {
    const float v = core::to_float(x[c]);
    sum_squares += v * v;
  }
  partial[threadIdx.x] = sum_squares;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / args.cols + args.eps);
  for (int c = threadIdx.x; c < args.cols; c += kThreads)
    args.y[offset + c] =
        core::from_float<T>(core::to_float(x[c]) * inv_rms * core::to_float(args.weight[c]));
}

}  // namespace

template <typename T>
void rmsnorm_02_block_smem_tree(const RmsNormArgs<T>& args, cudaStream_t stream) {
  rmsnorm_smem_tree_kernel<T><<<static_cast<unsigned>(args.rows), kThreads, 0, stream>>>(args);
}

template void rmsnorm_02_block_smem_tree<float>(const RmsNormArgs<float>&, cudaStream_t);
template void rmsnorm_02_block_smem_tree<__half>(const RmsNormArgs<__half>&, cudaStream_t);
template void rmsnorm_02_block_smem_tree<__nv_bfloat16>(const RmsNormArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
