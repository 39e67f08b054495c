// arch/sm90/tma.cuh — TMA, the Tensor Memory Accelerator (cp.async.bulk.tensor): one instruction
// from one thread copies a whole 2-D box between global and shared memory, described by a tensor
// map (CUtensorMap, built on the host: arch/sm90/tma_descriptor.hpp). Loads complete their bytes
// on an mbarrier (arch/sm90/mbarrier.cuh) and may be multicast to every CTA of a cluster; stores
// are tracked in bulk groups, like cp.async's groups.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "arch/sm90/sm90a.hpp"
#include "arch/util.hpp"

namespace kc::stage3::sm90 {

#if KC_STAGE3_SM90A

// Copies the box at element coordinates (col, row) of the matrix `map` describes into shared
// memory at `destination`; the bytes count against `barrier`'s transaction count. Out-of-bounds
// parts of the box are written as zeros.
__device__ __forceinline__ void tma_load_2d(void* destination, const CUtensorMap* map,
                                            std::uint64_t* barrier, int col, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(destination)),
      "l"(map), "r"(col), "r"(row), "r"(smem_u32(barrier))
      : "memory");
}

// The 4-D form: the box at element coordinates (c0, c1, c2, c3), c0 the contiguous dimension (the
// attention rungs' [D, S, H, B] view of a [B, H, S, D] tensor with its own strides). Zeros
// outside the tensor in every dimension, so a tile past the end of a head reads no other head.
__device__ __forceinline__ void tma_load_4d(void* destination, const CUtensorMap* map,
                                            std::uint64_t* barrier, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_u32(destination)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(barrier))
      : "memory");
}

// The plain bulk copy (cp.async.bulk, no tensor map): `bytes` contiguous bytes from global memory
// to shared memory, both addresses 16-byte aligned and `bytes` a multiple of 16, completing on
// `barrier` like a box. For data with no 2-D shape to describe (a stream already laid out for its
// reader, as the GGUF GEMV's repacked weights).
__device__ __forceinline__ void bulk_load(void* destination, const void* source, std::uint32_t bytes,
                                          std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_u32(destination)),
      "l"(source), "r"(bytes), "r"(smem_u32(barrier))
      : "memory");
}

// The same box written to the same offset in the shared memory of every CTA in `cta_mask`, each
// completing bytes on its own barrier at `barrier`'s offset: one L2 read feeds several SMs.
__device__ __forceinline__ void tma_load_2d_multicast(void* destination, const CUtensorMap* map,
                                                      std::uint64_t* barrier, int col, int row,
                                                      std::uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(destination)),
      "l"(map), "r"(col), "r"(row), "r"(smem_u32(barrier)), "h"(cta_mask)
      : "memory");
}

// Shared -> global copy of one box at (col, row); TMA clips what falls outside the matrix.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* source, int col,
                                             int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map),
               "r"(col), "r"(row), "r"(smem_u32(source))
               : "memory");
}

__device__ __forceinline__ void tma_store_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until the committed stores of this thread have finished reading shared memory (the buffer
// may be overwritten); their global writes may still be in flight.
__device__ __forceinline__ void tma_store_wait_smem_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// Waits until the committed stores of this thread are complete.
__device__ __forceinline__ void tma_store_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Orders this thread's ordinary shared-memory writes before later async-proxy (TMA) reads of them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#endif  // KC_STAGE3_SM90A

}  // namespace kc::stage3::sm90
