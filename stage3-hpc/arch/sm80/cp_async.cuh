// arch/sm80/cp_async.cuh — cp.async (sm_80): 16-byte copies from global to shared memory that
// bypass the registers and do not block the thread. A thread's copies are grouped
// (commit_group) and waited for by age (wait_group N: all but the N newest groups have landed),
// which is what a multi-stage pipeline of K steps needs (rung 03).
#pragma once

#include <cstdint>

namespace kc::stage3::sm80 {

// 16 bytes global -> shared, bypassing L1 (.cg); valid = false writes 16 zero bytes instead
// (src-size 0: nothing is read, but `source` must still be a valid global address).
__device__ __forceinline__ void cp_async_16(std::uint32_t destination, const void* source, bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source),
               "r"(source_bytes)
               : "memory");
}

// 4 bytes global -> shared (.ca: copies under 16 bytes go through L1); valid = false writes 4 zero
// bytes. For a destination that scatters what is contiguous in global memory (the GGUF GEMV's rung
// 10 places each pair of x's values where the WGMMA's k order wants it).
__device__ __forceinline__ void cp_async_4(std::uint32_t destination, const void* source, bool valid) {
  const int source_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(destination), "l"(source), "r"(source_bytes)
               : "memory");
}

// The same without the zero fill: 4 bytes always read.
__device__ __forceinline__ void cp_async_4(std::uint32_t destination, const void* source) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(destination), "l"(source) : "memory");
}

// 16 bytes always read (no zero fill).
__device__ __forceinline__ void cp_async_16(std::uint32_t destination, const void* source) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(destination), "l"(source) : "memory");
}

// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit_group() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kNewestGroupsInFlight of this thread's committed groups are still in flight.
template <int kNewestGroupsInFlight>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kNewestGroupsInFlight) : "memory");
}

}  // namespace kc::stage3::sm80
