// arch/sm90/cluster.cuh — thread-block clusters (sm_90): CTAs launched together on neighbouring
// SMs of one GPC, which can read, write and arrive on each other's shared memory (rung 08). Here:
// a CTA's rank in its cluster, the cluster's index and count in the grid, and the cluster-wide
// barrier. Multicast loads are in arch/sm90/tma.cuh, remote arrivals in arch/sm90/mbarrier.cuh.
#pragma once

#include <cstdint>

#include "arch/sm90/sm90a.hpp"

namespace kc::stage3::sm90 {

#if KC_STAGE3_SM90A

__device__ __forceinline__ std::uint32_t cluster_cta_rank() {
  std::uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ std::uint32_t cluster_id_x() {
  std::uint32_t id;
  asm volatile("mov.u32 %0, %%clusterid.x;\n" : "=r"(id));
  return id;
}
__device__ __forceinline__ std::uint32_t cluster_count_x() {
  std::uint32_t count;
  asm volatile("mov.u32 %0, %%nclusterid.x;\n" : "=r"(count));
  return count;
}

// Every thread of every CTA in the cluster arrives and waits (release/acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
