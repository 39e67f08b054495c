// rope_internal.cuh — indexing shared by the RoPE rungs: Q and K are walked as one list of
// heads per token (the q_heads of Q, then the kv_heads of K), and one rotation (kc/core/rope.cuh).
#pragma once

#include <cstdint>

#include "kc/core/rope.cuh"
#include "kc/stage2/kernels.hpp"

namespace kc::stage2 {

// The first element of head `head` (0 .. q_heads + kv_heads - 1) of `token`.
template <typename T>
__device__ __forceinline__ T* rope_head(const RopeArgs<T>& args, std::int64_t token, int head) {
  return head < args.q_heads
             ? args.q + (token * args.q_heads + head) * args.head_dim
             : args.k + (token * args.kv_heads + (head - args.q_heads)) * args.head_dim;
}

// (a, b) -> (a cos - b sin, b cos + a sin): kc/core/rope.cuh, shared with the engine.
using core::rotate_pair;

}  // namespace kc::stage2
