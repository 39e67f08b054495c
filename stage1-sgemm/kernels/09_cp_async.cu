// Rung 09 — a cp.async multi-stage pipeline. The idea, the kernel and what to look for in the
// SASS are in 09_cp_async.cuh; this rung runs it with 128 x 128 x 8 block tiles,
// 32 x 64 warp tiles, 8 x 8 thread tiles and 3 stages (entry kRung09Config of rung 10's search
// space, where the kernel is instantiated once for both rungs).
//
// Run just this rung:  kc-bench --filter stage1/sgemm/09_cp_async
#include <algorithm>
#include <cstdint>

#include "09_cp_async.cuh"
#include "kc/stage1/sgemm_autotune.hpp"

namespace kc::stage1 {
namespace {

__global__ void scale_c_kernel(SgemmArgs args) {
  const std::int64_t count = static_cast<std::int64_t>(args.m) * args.n;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int row = static_cast<int>(i / args.n);
    const int col = static_cast<int>(i % args.n);
    float* c = args.c + (row * args.ldc + col);
    *c = args.beta == 0.f ? 0.f : args.beta * *c;  // C unread when beta == 0
  }
}

}  // namespace

void scale_c_by_beta(const SgemmArgs& args, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kMaxBlocks = 4096;  // grid-stride beyond that
  const std::int64_t count = static_cast<std::int64_t>(args.m) * args.n;
  const int blocks = static_cast<int>(std::min<std::int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
  scale_c_kernel<<<blocks, kThreads, 0, stream>>>(args);
  KC_CHECK_LAUNCH();
}

void sgemm_09_cp_async(const SgemmArgs& args, cudaStream_t stream) {
  sgemm_search_space_launch(kRung09Config, /*splits=*/1, args, stream);
}

}  // namespace kc::stage1
