// arch/sm90/mbarrier.cuh — the mbarrier: a shared-memory barrier that counts thread arrivals and
// transaction bytes (TMA copies complete on one), waited for by phase parity. The Hopper
// pipelines (gemm/pipeline.cuh) are rings of them.
//
// A phase completes when `count` arrivals have happened and every expected byte has landed; waiting
// is by phase parity (0, 1, 0, ...). A fresh barrier is in phase 0, so waiting for parity 1
// returns at once: that is how a producer's first pass over empty stages goes through.
#pragma once

#include <cstdint>

#include "arch/sm90/sm90a.hpp"
#include "arch/util.hpp"

namespace kc::stage3::sm90 {

#if KC_STAGE3_SM90A

__device__ __forceinline__ void mbarrier_init(std::uint64_t* barrier, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(barrier)), "r"(count)
               : "memory");
}

// Makes barrier initialisation visible to the async proxy (TMA) and to the other CTAs of the
// cluster; must be followed by __syncthreads or a cluster barrier.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The waits and the arrival take the barrier as a pointer or as its 32-bit shared-memory address
// (smem_u32): a loop that computes the addresses of its ring's barriers once passes the latter.
__device__ __forceinline__ bool mbarrier_try_wait(std::uint32_t barrier, std::uint32_t parity) {
  std::uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred complete;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
      "selp.u32 %0, 1, 0, complete;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ bool mbarrier_try_wait(std::uint64_t* barrier, std::uint32_t parity) {
  return mbarrier_try_wait(smem_u32(barrier), parity);
}

// Blocks until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t barrier, std::uint32_t parity) {
  while (!mbarrier_try_wait(barrier, parity)) {
  }
}

__device__ __forceinline__ void mbarrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  while (!mbarrier_try_wait(barrier, parity)) {
  }
}

// The same wait, asleep: try_wait with a suspend-time hint (in nanoseconds) lets the hardware park
// the thread until the phase completes or the hint's time has passed, instead of returning after
// its own short limit for the loop to try again. A thread that waits long (a producer waiting for a
// free stage while the consumers compute) then takes no issue slots from the warps that share its
// scheduler. The hint is an upper bound on one try, not a delay: the phase's completion wakes the
// thread. 10 ms, far longer than any wait here.
inline constexpr std::uint32_t kMbarrierSuspendHintNs = 10'000'000;

__device__ __forceinline__ bool mbarrier_try_wait_asleep(std::uint32_t barrier, std::uint32_t parity) {
  std::uint32_t done = 0;
  asm volatile(
      "{\n"
      ".reg .pred complete;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2, %3;\n"
      "selp.u32 %0, 1, 0, complete;\n"
      "}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity), "r"(kMbarrierSuspendHintNs)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void mbarrier_wait_asleep(std::uint64_t* barrier, std::uint32_t parity) {
  const std::uint32_t address = smem_u32(barrier);
  while (!mbarrier_try_wait_asleep(address, parity)) {
  }
}

// One arrival on a barrier of this CTA.
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* barrier) { mbarrier_arrive(smem_u32(barrier)); }

// One arrival on the barrier at the same shared-memory offset in CTA `cta_rank` of the cluster
// (which may be this CTA): mapa translates the address into the cluster window.
__device__ __forceinline__ void mbarrier_arrive_cluster(std::uint64_t* barrier, std::uint32_t cta_rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote_address;\n"
      "mapa.shared::cluster.u32 remote_address, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote_address];\n"
      "}\n" ::"r"(smem_u32(barrier)),
      "r"(cta_rank)
      : "memory");
}

// One arrival that also announces `bytes` of TMA traffic the current phase must wait for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* barrier, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(barrier)),
               "r"(bytes)
               : "memory");
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
