// LayerNorm rung 02 — a block per row, warp-shuffle reductions.
//
// Idea: a block per row, coalesced accesses, and kc::core::block_reduce_sum for both statistics:
// the mean, then the sum of squared deviations from it. Three passes over the row; the second
// and third hit the L2 for rows a block has just read.
//
// What changed from rung 01: coalescing and a block per row; shuffles instead of a shared-memory
// tree (the tree is RMSNorm rung 02's lesson and is not repeated here).
//
// Expected limiter: memory latency. As in RMSNorm rung 03, nvcc leaves the bf16 and f16 loops
// rolled (one 2-byte load in flight per thread, used before the next is issued; the f32 loops
// are unrolled by 4), so a row waits for one round trip per element a thread handles, in each of
// three passes.
//
// Run just this rung:  kc-bench --filter 'stage2/layernorm/02_warp_shuffle'
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/core/vector_io.hpp"
#include "layernorm_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kMaxThreads = 512;  // streaming_row_threads() never asks for more

template <typename T, int kVec>
__global__ void __launch_bounds__(kMaxThreads) layernorm_streaming_kernel(LayerNormArgs<T> args) {
  __shared__ float warp_partials[core::kWarpSize];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * args.cols;
  const T* __restrict__ x = args.x + offset;
  const int first = static_cast<int>(threadIdx.x) * kVec;
  const int step = static_cast<int>(blockDim.x) * kVec;
  float sum = 0.f;
  for (int c = first; c < args.cols; c += step) {
    float v[kVec];
    core::load_floats<T, kVec>(x + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) sum += v[i];
  }
  const float mean = core::block_reduce_sum(sum, warp_partials) / args.cols;
  float squares = 0.f;
  for (int c = first; c < args.cols; c += step) {
    float v[kVec];
    core::load_floats<T, kVec>(x + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) squares += (v[i] - mean) * (v[i] - mean);
  }
  const float inv_std = rsqrtf(core::block_reduce_sum(squares, warp_partials) / args.cols + args.eps);
  for (int c = first; c < args.cols; c += step) {
    float v[kVec], w[kVec], b[kVec];
    core::load_floats<T, kVec>(x + c, v);
    core::load_floats<T, kVec>(args.weight + c, w);
    core::load_floats<T, kVec>(args.bias + c, b);
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = (v[i] - mean) * inv_std * w[i] + b[i];
    core::store_floats<T, kVec>(args.y + offset + c, v);
  }
}

}  // namespace

template <typename T>
void layernorm_streaming(const LayerNormArgs<T>& args, int width, cudaStream_t stream) {
  const int threads = core::streaming_row_threads(args.cols, width);
  core::dispatch_vector_width<core::kVectorWidth<T>>(width == core::kVectorWidth<T>, [&](auto vec) {
    layernorm_streaming_kernel<T, decltype(vec)::value>
        <<<static_cast<unsigned>(args.rows), threads, 0, stream>>>(args);
  });
}

template <typename T>
void layernorm_02_warp_shuffle(const LayerNormArgs<T>& args, cudaStream_t stream) {
  layernorm_streaming(args, 1, stream);
}

template void layernorm_02_warp_shuffle<float>(const LayerNormArgs<float>&, cudaStream_t);
template void layernorm_02_warp_shuffle<__half>(const LayerNormArgs<__half>&, cudaStream_t);
template void layernorm_02_warp_shuffle<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&, cudaStream_t);

template void layernorm_streaming<float>(const LayerNormArgs<float>&, int, cudaStream_t);
template void layernorm_streaming<__half>(const LayerNormArgs<__half>&, int, cudaStream_t);
template void layernorm_streaming<__nv_bfloat16>(const LayerNormArgs<__nv_bfloat16>&, int, cudaStream_t);

}  // namespace kc::stage2
