// arch/sm90/warpgroup.cuh — what lets the warpgroups of one CTA play different roles (warp
// specialization, rungs 06-10): setmaxnreg moves registers from warpgroups that need few (the
// producer) to warpgroups that need many (the consumers, 128 accumulators each), and named
// barriers synchronize a subset of the CTA's warps, where __syncthreads would stop them all.
#pragma once

#include "arch/sm90/sm90a.hpp"

namespace kc::stage3::sm90 {

#if KC_STAGE3_SM90A

// Hands registers back to (dec) or takes them from (inc) the CTA's pool; every warp of the
// warpgroup must execute the same instruction.
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// A barrier among `threads` threads (a multiple of 32) of the CTA; id 0 is __syncthreads'.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrives on named barrier `id` (counted towards `threads`) without waiting: how one group of
// warps tells another, waiting there with named_barrier_sync, that it may go on.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
