// RMSNorm rung 03 — warp-shuffle reductions (kc::core::block_reduce_sum).
//
// Idea: reduce inside each warp with __shfl_xor_sync (five register-to-register steps, no shared
// memory, no barrier), then combine the block's warps through one small shared-memory exchange.
// The kernel is written once for any RowSource and access width: this rung instantiates it with
// scalar accesses; rung 04 only changes the width.
//
// What changed from rung 02: the reduction costs 2 barriers instead of 9 and no thread idles
// through a halving tree. Being generic, the kernel changes two more things than the reduction:
// the block size follows the row (streaming_row_threads: up to 512 threads, so a 4096-element
// row gets twice rung 02's threads and each thread half its elements), and the loop stride is
// blockDim.x * kVec, known only at run time. In the SASS nvcc leaves the bf16 and f16 loops of
// this kernel rolled: one 2-byte load per iteration, used before the next one is issued, where
// rung 02's constant stride let it unroll its first loop by 16 (the f32 loops are unrolled by 4).
//
// Expected limiter: memory latency. In bf16 and f16 a thread has one load in flight, and a row
// waits for one round trip per element a thread handles, in each of the two passes; with the same
// 2048 threads per SM as rung 02, this rung is slower than rung 02 there. The counts, and the
// experiments that would separate the three changes: stage2-core/README.md, RMSNorm rung 03.
//
// Run just this rung:  kc-bench --filter 'stage2/rmsnorm/03_warp_shuffle'
#include "kc/core/launch.hpp"
#include "kc/core/reduce.cuh"
#include "kc/core/vector_io.hpp"
#include "rmsnorm_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kMaxThreads = 512;  // streaming_row_threads() never asks for more

template <typename T, int kVec, class Source>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_streaming_kernel(Source source, const T* __restrict__ weight, T* __restrict__ y,
                             int cols, float eps) {
  __shared__ float warp_partials[core::kWarpSize];
  const std::int64_t offset = static_cast<std::int64_t>(blockIdx.x) * cols;
  const int step = static_cast<int>(blockDim.x) * kVec;
  float sum_squares = 0.f;
  for (int c = static_cast<int>(threadIdx.x) * kVec; c < cols; c += step) {
    float v[kVec];
    source.template load<kVec>(offset + c, v);
#pragma unroll
    for (int i = 0; i < kVec; ++i) sum_squares += v[i] * v[i];
  }
  const float inv_rms = rsqrtf(core::block_reduce_sum(sum_squares, warp_partials) / cols + eps);
  for (int c = static_cast<int>(threadIdx.x) * kVec; c < cols; c += step) {
    float v[kVec], w[kVec];
    source.template reload<kVec>(offset + c, v);
    core::load_floats<T, kVec>(weight + c, w);
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = v[i] * inv_rms * w[i];
    core::store_floats<T, kVec>(y + offset + c, v);
  }
}

}  // namespace

template <typename T, class Source>
void rmsnorm_streaming(const Source& source, const T* weight, T* y, int rows, int cols, float eps,
                       int width, cudaStream_t stream) {
  const int threads = core::streaming_row_threads(cols, width);
  core::dispatch_vector_width<core::kVectorWidth<T>>(width == core::kVectorWidth<T>, [&](auto vec) {
    rmsnorm_streaming_kernel<T, decltype(vec)::value>
        <<<static_cast<unsigned>(rows), threads, 0, stream>>>(source, weight, y, cols, eps);
  });
}

template <typename T>
void rmsnorm_03_warp_shuffle(const RmsNormArgs<T>& args, cudaStream_t stream) {
  rmsnorm_streaming(core::PlainRow<T>{args.x}, args.weight, args.y, args.rows, args.cols, args.eps,
                    1, stream);
}

template void rmsnorm_03_warp_shuffle<float>(const RmsNormArgs<float>&, cudaStream_t);
template void rmsnorm_03_warp_shuffle<__half>(const RmsNormArgs<__half>&, cudaStream_t);
template void rmsnorm_03_warp_shuffle<__nv_bfloat16>(const RmsNormArgs<__nv_bfloat16>&, cudaStream_t);

// The sources rmsnorm and residual_rmsnorm use.
template void rmsnorm_streaming(const core::PlainRow<float>&, const float*, float*, int, int, float, int, cudaStream_t);
template void rmsnorm_streaming(const core::PlainRow<__half>&, const __half*, __half*, int, int, float, int, cudaStream_t);
template void rmsnorm_streaming(const core::PlainRow<__nv_bfloat16>&, const __nv_bfloat16*, __nv_bfloat16*, int, int, float, int, cudaStream_t);
template void rmsnorm_streaming(const core::CombinedRow<float>&, const float*, float*, int, int, float, int, cudaStream_t);
template void rmsnorm_streaming(const core::CombinedRow<__half>&, const __half*, __half*, int, int, float, int, cudaStream_t);
template void rmsnorm_streaming(const core::CombinedRow<__nv_bfloat16>&, const __nv_bfloat16*, __nv_bfloat16*, int, int, float, int, cudaStream_t);

}  // namespace kc::stage2
