// kc/core/dependent_launch.cuh — programmatic dependent launch, the device side and the launch.
//
// What it is and when it is used: kc/core/dependent_launch.hpp. A kernel written for it:
//
//   __global__ void k(Args args) {
//     core::let_dependent_grids_start();          // the next kernel's blocks may take free SM slots
//     core::prefetch_to_l2(my_weights, bytes);     // input no kernel of the stream writes
//     core::wait_for_previous_grids();             // the previous kernel is done, its writes visible
//     ... read the previous kernel's output, compute, write ...
//   }
//   core::launch_dependent(k, grid, block, smem, stream, args);
//
// SASS to look for (sm_90): ACQBULK for the wait, PREEXIT for let_dependent_grids_start, UBLKPF.L2
// for the bulk L2 prefetch. On sm_80 the three compile to nothing.
#pragma once

#if !defined(__CUDACC__)
#error "kc/core/dependent_launch.cuh holds device code: include it from .cu files compiled by nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kc/common/error.hpp"
#include "kc/core/dependent_launch.hpp"

namespace kc::core {

// Waits until every grid this one depends on has finished and its memory operations are visible.
// A no-op when the grid was launched the ordinary way (the stream already waited).
__device__ __forceinline__ void wait_for_previous_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// This block no longer needs its SM slot kept from the next kernel: once every block of the grid
// has called it (or exited), a programmatic dependent may launch. It says nothing about this
// grid's writes; the dependent's wait_for_previous_grids() still waits for them.
__device__ __forceinline__ void let_dependent_grids_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks the L2 to fetch [pointer, pointer + bytes) from DRAM, one instruction for the whole range
// (cp.async.bulk.prefetch.L2; a hint: nothing waits for it, nothing is written). `pointer` 16-byte
// aligned and `bytes` a multiple of 16. Nothing on sm_80.
__device__ __forceinline__ void prefetch_to_l2(const void* pointer, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pointer), "r"(bytes) : "memory");
#else
  (void)pointer;
  (void)bytes;
#endif
}

// Whether a launch_dependent() from this thread, now, goes as a programmatic dependent: asked
// for (a ProgrammaticLaunchScope) and the current device has compute capability 9.0 or newer.
// Called for every launch of a decode step: the capability is asked once per device and thread.
inline bool programmatic_launch_active() {
  if (!programmatic_launch_requested()) return false;
  thread_local int known_device = -1;
  thread_local bool known_supported = false;
  int device = 0;
  KC_CUDA_CHECK(cudaGetDevice(&device));
  if (device != known_device) {
    int major = 0;
    KC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    known_supported = major >= 9;
    known_device = device;
  }
  return known_supported;
}

// launch_dependent with the grid's x dimension in clusters of `cluster_x` CTAs (Hopper's thread
// block clusters; 1: no cluster). The caller makes sure the GPU and the kernel's code have them.
template <typename... Params, typename... Args>
bool launch_dependent_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster_x,
                                  std::size_t smem_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (cluster_x > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = cluster_x;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  const bool active = programmatic_launch_active();
  if (active) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (count > 0) {
    config.attrs = attributes;
    config.numAttrs = count;
  }
  KC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  return active;
}

// kernel<<<grid, block, smem_bytes, stream>>>(args...), as a programmatic dependent of the
// stream's previous work when programmatic_launch_active() (the kernel must keep the contract in
// kc/core/dependent_launch.hpp). Checks the launch. Returns whether it went programmatically.
template <typename... Params, typename... Args>
bool launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem_bytes, cudaStream_t stream,
                      Args&&... args) {
  return launch_dependent_in_clusters(kernel, grid, block, 1, smem_bytes, stream, std::forward<Args>(args)...);
}

}  // namespace kc::core
