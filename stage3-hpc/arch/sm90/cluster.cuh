// arch/sm90/cluster.cuh — thread-block clusters (sm_90): CTAs launched together on neighbouring
// SMs of one GPC, which can read, write and arrive on each other's shared memory (rung 08). Here:
// a CTA's rank in its cluster, the cluster's index and count in the grid, the cluster-wide
// barrier (whole, or its arrival and wait apart), a 16-byte load from another CTA's shared memory
// (hgemm rung 16) and stores to it (GGUF GEMV rung 12). Multicast loads are in arch/sm90/tma.cuh, remote arrivals in arch/sm90/mbarrier.cuh.
#pragma once

#include <cuda_runtime.h>

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

// The cluster barrier's two halves, for threads that arrive early and wait later (GGUF GEMV rung
// 12): barrier.cluster.wait returns once every non-exited thread of the cluster has arrived, and a
// thread must wait before it arrives again. The relaxed arrival orders nothing (a "has started"
// signal); the release/acquire pair makes the writes before the arrival, to this CTA's shared
// memory or another's, visible to the threads past the wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

// Every thread of every CTA in the cluster arrives and waits (release/acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive_release();
  cluster_wait_acquire();
}

// The 16 bytes `v` stored at shared-memory address `local` (this CTA's address of the variable)
// in the shared memory of CTA `rank` of the cluster; and a float the same way. The other CTA must
// have started (a cluster barrier's wait since its threads arrived) and be still running.
__device__ __forceinline__ void st_shared_cluster_u32x4(std::uint32_t local, std::uint32_t rank, const uint4& v) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "st.shared::cluster.v4.b32 [remote], {%2, %3, %4, %5};\n"
      "}\n" ::"r"(local),
      "r"(rank), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
      : "memory");
}
__device__ __forceinline__ void st_shared_cluster_f32(std::uint32_t local, std::uint32_t rank, float v) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "st.shared::cluster.f32 [remote], %2;\n"
      "}\n" ::"r"(local),
      "r"(rank), "f"(v)
      : "memory");
}

// The 16 bytes at shared-memory address `local` (this CTA's address of the variable) in the shared
// memory of CTA `rank` of the cluster (distributed shared memory: mapa translates the address into
// the cluster window, ld.shared::cluster reads it). The other CTA must still be running: a
// cluster_sync after the last such read keeps it from exiting.
__device__ __forceinline__ float4 ld_shared_cluster_f32x4(std::uint32_t local, std::uint32_t rank) {
  float4 v;
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %4, %5;\n"
      "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [remote];\n"
      "}\n"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "r"(local), "r"(rank)
      : "memory");
  return v;
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
