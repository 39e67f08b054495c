// arch/sm90/tma_descriptor.hpp — TMA tensor maps and the launch facts the Hopper rungs compute once.
//
// A TMA copy is described by a CUtensorMap ("tensor map", 128 bytes) built on the host by the
// driver function cuTensorMapEncodeTiled: the matrix's base address, sizes and row stride, the
// box (tile) one copy moves and how the box is swizzled in shared memory. kc executables do not
// link libcuda (they must start on machines without a driver), so the function is fetched at run
// time through the runtime's cudaGetDriverEntryPointByVersion.
//
// Encoding costs a few microseconds of host time. HopperLaunchCache keeps the maps it has built,
// keyed by every input of the encoding, so a repeated launch on the same operands (every timed
// launch of kc-bench) reuses them; a changed pointer or shape simply gets a new entry.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums: types only, no libcuda symbol is linked
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

namespace kc::stage3 {

// How many clusters of `cluster_size` blocks of `kernel` (block_threads threads,
// dynamic_smem_bytes of shared memory, which the kernel must already allow) fit on the current GPU
// at once: cudaOccupancyMaxActiveClusters, since a cluster must fit within one GPC and not every
// SM can always be paired. Asked every call (HopperLaunchCache::resident_blocks keeps its answer).
int active_clusters(const void* kernel, int block_threads, std::size_t dynamic_smem_bytes, int cluster_size);

// A row-major matrix of 2-byte elements and the box one TMA copy moves.
struct TmaMatrix2d {
  const void* base = nullptr;
  std::uint64_t rows = 0, cols = 0;     // cols is the contiguous dimension
  std::uint32_t box_rows = 0, box_cols = 0;
  bool swizzle_128b = true;             // rows of the box swizzled as in gemm_layout.hpp
};

// The arrays cuTensorMapEncodeTiled takes, innermost dimension first.
struct TmaEncoding {
  cuuint64_t global_dim[2] = {0, 0};     // {cols, rows}
  cuuint64_t global_stride_bytes[1] = {0};  // stride of dimension 1 (a row), in bytes
  cuuint32_t box_dim[2] = {0, 0};        // {box_cols, box_rows}
  cuuint32_t element_stride[2] = {1, 1};
};

// A 4-D tensor of 2-byte elements, innermost (contiguous) dimension first, with its own strides,
// and the box one TMA copy moves, swizzled by 128 bytes: the attention rungs' [D, S, H, B] view of
// a [B, H, S, D] tensor (any head and batch strides), so that a box past a head's last row reads
// zeros rather than the next head.
struct TmaTensor4d {
  const void* base = nullptr;
  std::uint64_t dims[4] = {0, 0, 0, 0};
  std::uint64_t strides_bytes[3] = {0, 0, 0};  // of dimensions 1, 2 and 3
  std::uint32_t box[4] = {0, 0, 0, 0};
};

// The arrays cuTensorMapEncodeTiled takes for a TmaTensor4d, innermost dimension first.
struct TmaEncoding4d {
  cuuint64_t global_dim[4] = {0, 0, 0, 0};
  cuuint64_t global_stride_bytes[3] = {0, 0, 0};
  cuuint32_t box_dim[4] = {0, 0, 0, 0};
  cuuint32_t element_stride[4] = {1, 1, 1, 1};
};

// Checks the TMA rules for `tensor` (16-byte aligned base, sizes 1..2^32, strides multiples of 16
// bytes below 2^40, box sides 1..256, a box row of 16..128 bytes in steps of 16 for the 128-byte
// swizzle) and returns the encoding; kc::Error with the rule that failed. No CUDA call.
TmaEncoding4d tma_encoding(const TmaTensor4d& tensor);

// Checks the TMA rules for `matrix` and returns the encoding; throws kc::Error with the rule that
// failed (16-byte aligned base and row stride, box sides 1..256, a 128-byte-swizzled box row of at
// most 128 bytes, box row a multiple of 16 bytes).
TmaEncoding tma_encoding(const TmaMatrix2d& matrix);

// Tensor maps, TMA-independent launch facts, and the checks a Hopper launch needs, made once.
class HopperLaunchCache {
 public:
  HopperLaunchCache() = default;
  HopperLaunchCache(const HopperLaunchCache&) = delete;
  HopperLaunchCache& operator=(const HopperLaunchCache&) = delete;
  ~HopperLaunchCache();

  // The tensor map for `matrix` (bf16, zero fill out of bounds), built on first use.
  const CUtensorMap& tensor_map(const TmaMatrix2d& matrix);

  // The tensor map for `tensor` (2-byte elements, 128-byte swizzle, zero fill), built on first use
  // (at most 1024 kept: past that the table starts again, so copy the map before the next call);
  // kc::Error naming the rule a stride, size or box breaks.
  const CUtensorMap& tensor_map(const TmaTensor4d& tensor);

  // Before the first launch of `kernel`: checks that this build holds sm_90a code for it and
  // allows `dynamic_smem_bytes` of shared memory. Cheap on later calls.
  void prepare_kernel(const void* kernel, int dynamic_smem_bytes);

  // How many blocks of `kernel` (block_threads threads, dynamic_smem_bytes) fit on the GPU at
  // once, in whole clusters of cluster_size blocks: the grid of a persistent kernel.
  int resident_blocks(const void* kernel, int block_threads, int dynamic_smem_bytes,
                      int cluster_size);

  // Two 32-bit counters in device memory, zero, for a persistent kernel launched on `stream` that
  // hands out its work items as its CTAs ask for them (attention rung 25: it leaves them zero when
  // it ends). One pair per stream, allocated on the current device at a stream's first call: the
  // launches of one stream run one after another, and two streams never share counters.
  unsigned* work_counters(cudaStream_t stream);

 private:
  using Key = std::tuple<const void*, std::uint64_t, std::uint64_t, std::uint32_t, std::uint32_t, bool>;
  std::map<Key, CUtensorMap> maps_;
  std::map<std::array<std::uint64_t, 12>, CUtensorMap> maps_4d_;
  std::map<const void*, int> prepared_;   // kernel -> dynamic smem allowed
  std::map<const void*, int> resident_;   // kernel -> resident blocks
  PFN_cuTensorMapEncodeTiled_v12000 encoder();        // encode_, fetched on first use
  PFN_cuTensorMapEncodeTiled_v12000 encode_ = nullptr;
  std::map<cudaStream_t, unsigned*> work_counters_;  // work_counters(), cudaFree'd by the destructor
};

}  // namespace kc::stage3
