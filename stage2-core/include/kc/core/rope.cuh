// kc/core/rope.cuh — the rotation of rotary position embeddings, shared by stage 2's RoPE rungs
// (stage2-core/kernels/rope/) and the engine's fused RoPE + cache write
// (stage4-inference/engine/engine_kernels.cu), so both rotate a pair the same way.
#pragma once

#ifndef __CUDACC__
#error "kc/core/rope.cuh holds device code: include it from .cu files compiled by nvcc"
#endif

namespace kc::core {

// (a, b) -> (a cos - b sin, b cos + a sin): one pair of a head rotated by its angle.
__device__ __forceinline__ void rotate_pair(float& a, float& b, float cos_angle, float sin_angle) {
  const float rotated_a = a * cos_angle - b * sin_angle;
  b = b * cos_angle + a * sin_angle;
  a = rotated_a;
}

}  // namespace kc::core
