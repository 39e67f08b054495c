// arch/util.hpp — small helpers every stage-3 kernel needs, defined once here:
//
//   ceil_div               how many pieces of size b cover a: grids, tile counts, K steps
//   aligned_16             whether a pointer may be read in 16-byte vectors (launch checks)
//   smem_u32               the 32-bit shared-memory address of a pointer into shared memory,
//                          the operand that ldmatrix, cp.async, mbarrier, TMA and the WGMMA
//                          descriptors take (a generic 64-bit pointer would need converting
//                          inside every instruction's asm)
//   aligned_dynamic_smem   the start of dynamic shared memory, rounded up to kSmemAlignment
//
// ceil_div and aligned_16 are plain arithmetic and work on the host too (the launch code and the CPU tests use
// it); the other two are device code and exist only where nvcc compiles the file.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kc::stage3 {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// True when `pointer` is a multiple of `bytes` (the widest load or store a kernel makes there).
inline bool aligned(const void* pointer, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}
inline bool aligned_16(const void* pointer) { return aligned(pointer, 16); }

// The 128-byte swizzle (gemm/gemm_layout.hpp) repeats every 8 rows of 128 bytes, and TMA and
// WGMMA apply it to the low address bits: every swizzled tile must start 1024-byte aligned.
inline constexpr int kSmemAlignment = 1024;

#if defined(__CUDACC__)

__device__ __forceinline__ std::uint32_t smem_u32(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// The kSmemAlignment-aligned start of the dynamic shared memory `raw` (the kernel's
// extern __shared__ array). The runtime only promises 16-byte alignment, so a launch requests
// kSmemAlignment bytes more than its tiles need. (The mma.sync kernels compute the same address
// in another form, mma_sync_dynamic_smem in gemm/mma_sync_common.cuh; it says why.)
__device__ __forceinline__ std::uint8_t* aligned_dynamic_smem(std::uint8_t* raw) {
  const std::uint32_t address = smem_u32(raw);
  const std::uint32_t aligned = (address + kSmemAlignment - 1) & ~std::uint32_t(kSmemAlignment - 1);
  return raw + (aligned - address);
}

#endif  // __CUDACC__

}  // namespace kc::stage3
