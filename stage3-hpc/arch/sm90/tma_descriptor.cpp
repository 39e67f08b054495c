#include "arch/sm90/tma_descriptor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

constexpr std::uint64_t kElementBytes = 2;  // bf16
constexpr std::uint32_t kMaxBoxSide = 256;
constexpr std::uint64_t kMaxSwizzledBoxRowBytes = 128;
constexpr std::size_t kMaxCachedTensors = 1024;

}  // namespace

TmaEncoding tma_encoding(const TmaMatrix2d& m) {
  const auto address = reinterpret_cast<std::uintptr_t>(m.base);
  require(address % 16 == 0, "TMA needs a 16-byte aligned base address (got {})", m.base);
  require(m.rows >= 1 && m.cols >= 1, "TMA: empty matrix {}x{}", m.rows, m.cols);
  const std::uint64_t row_bytes = m.cols * kElementBytes;
  require(row_bytes % 16 == 0,
          "TMA needs rows that are a multiple of 16 bytes: {} bf16 columns are {} bytes; make the "
          "contiguous dimension a multiple of 8",
          m.cols, row_bytes);
  require(m.box_rows >= 1 && m.box_rows <= kMaxBoxSide && m.box_cols >= 1 && m.box_cols <= kMaxBoxSide,
          "TMA box sides must be 1..256 elements (got {}x{})", m.box_rows, m.box_cols);
  require((m.box_cols * kElementBytes) % 16 == 0,
          "a TMA box row must be a multiple of 16 bytes (got {} bf16 = {} bytes)", m.box_cols,
          m.box_cols * kElementBytes);
  require(!m.swizzle_128b || m.box_cols * kElementBytes <= kMaxSwizzledBoxRowBytes,
          "with the 128-byte swizzle a TMA box row holds at most 128 bytes (got {} bf16)", m.box_cols);
  TmaEncoding e;
  e.global_dim[0] = m.cols;
  e.global_dim[1] = m.rows;
  e.global_stride_bytes[0] = row_bytes;
  e.box_dim[0] = m.box_cols;
  e.box_dim[1] = m.box_rows;
  return e;
}

TmaEncoding4d tma_encoding(const TmaTensor4d& t) {
  require(reinterpret_cast<std::uintptr_t>(t.base) % 16 == 0,
          "TMA needs a 16-byte aligned base address (got {})", t.base);
  TmaEncoding4d e;
  for (int i = 0; i < 4; ++i) {
    require(t.dims[i] >= 1 && t.dims[i] <= (std::uint64_t{1} << 32),
            "TMA: dimension {} of a 4-D tensor is {}; each must be 1..2^32", i, t.dims[i]);
    require(t.box[i] >= 1 && t.box[i] <= kMaxBoxSide, "TMA box sides must be 1..256 elements (side {} is {})", i,
            t.box[i]);
    e.global_dim[i] = t.dims[i];
    e.box_dim[i] = t.box[i];
  }
  for (int i = 0; i < 3; ++i) {
    require(t.strides_bytes[i] % 16 == 0 && t.strides_bytes[i] < (std::uint64_t{1} << 40),
            "TMA needs strides that are multiples of 16 bytes below 2^40: the stride of dimension {} is {} "
            "bytes; make every stride a multiple of 8 elements",
            i + 1, t.strides_bytes[i]);
    e.global_stride_bytes[i] = t.strides_bytes[i];
  }
  require(t.box[0] * kElementBytes % 16 == 0 && t.box[0] * kElementBytes <= kMaxSwizzledBoxRowBytes,
          "with the 128-byte swizzle a TMA box row holds 16 to 128 bytes in steps of 16 (got {} elements)",
          t.box[0]);
  return e;
}

const CUtensorMap& HopperLaunchCache::tensor_map(const TmaMatrix2d& matrix) {
  const Key key{matrix.base, matrix.rows, matrix.cols, matrix.box_rows, matrix.box_cols,
                matrix.swizzle_128b};
  if (const auto found = maps_.find(key); found != maps_.end()) return found->second;

  const TmaEncoding e = tma_encoding(matrix);
  CUtensorMap map{};
  const CUresult status = encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(matrix.base), e.global_dim,
      e.global_stride_bytes, e.box_dim, e.element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE,
      matrix.swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out-of-bounds elements read as zero
  require(status == CUDA_SUCCESS,
          "cuTensorMapEncodeTiled failed (CUresult {}) for a {}x{} bf16 matrix with a {}x{} box",
          static_cast<int>(status), matrix.rows, matrix.cols, matrix.box_rows, matrix.box_cols);
  return maps_.emplace(key, map).first->second;
}

PFN_cuTensorMapEncodeTiled_v12000 HopperLaunchCache::encoder() {
  if (encode_ == nullptr) {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    KC_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                                   cudaEnableDefault, &query));
    require(query == cudaDriverEntryPointSuccess && function != nullptr,
            "the CUDA driver does not provide cuTensorMapEncodeTiled (TMA needs a CUDA 12 driver)");
    encode_ = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }
  return encode_;
}

const CUtensorMap& HopperLaunchCache::tensor_map(const TmaTensor4d& t) {
  const std::array<std::uint64_t, 12> key{reinterpret_cast<std::uintptr_t>(t.base),
                                          t.dims[0], t.dims[1], t.dims[2], t.dims[3],
                                          t.strides_bytes[0], t.strides_bytes[1], t.strides_bytes[2],
                                          t.box[0], t.box[1], t.box[2], t.box[3]};
  if (const auto found = maps_4d_.find(key); found != maps_4d_.end()) return found->second;
  // A caller whose lengths change from call to call (an engine's prefill chunks) would grow the
  // table without end: past kMaxCachedTensors it starts again. Launches copy the map they use.
  if (maps_4d_.size() >= kMaxCachedTensors) maps_4d_.clear();

  TmaEncoding4d e = tma_encoding(t);
  CUtensorMap map{};
  // The element type only sizes the copy (2 bytes) and the zero fill: bf16 serves f16 data too.
  const CUresult status = encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(t.base),
                                    e.global_dim, e.global_stride_bytes, e.box_dim, e.element_stride,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  require(status == CUDA_SUCCESS,
          "cuTensorMapEncodeTiled failed (CUresult {}) for a {}x{}x{}x{} tensor with a {}x{}x{}x{} box",
          static_cast<int>(status), t.dims[3], t.dims[2], t.dims[1], t.dims[0], t.box[3], t.box[2], t.box[1],
          t.box[0]);
  return maps_4d_.emplace(key, map).first->second;
}

HopperLaunchCache::~HopperLaunchCache() {
  for (const auto& entry : work_counters_) cudaFree(entry.second);  // at exit the runtime may be gone: no check
}

unsigned* HopperLaunchCache::work_counters(cudaStream_t stream) {
  unsigned*& counters = work_counters_[stream];
  if (counters == nullptr) {
    void* allocated = nullptr;
    KC_CUDA_CHECK(cudaMalloc(&allocated, 2 * sizeof(unsigned)));
    const cudaError_t zeroed = cudaMemset(allocated, 0, 2 * sizeof(unsigned));
    if (zeroed != cudaSuccess) cudaFree(allocated);
    KC_CUDA_CHECK(zeroed);
    KC_CUDA_CHECK(cudaDeviceSynchronize());  // zero before a launch on any stream reads them (once a stream)
    counters = static_cast<unsigned*>(allocated);
  }
  return counters;
}

void HopperLaunchCache::prepare_kernel(const void* kernel, int dynamic_smem_bytes) {
  const auto found = prepared_.find(kernel);
  if (found != prepared_.end() && found->second >= dynamic_smem_bytes) return;
  cudaFuncAttributes attributes{};
  KC_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  // An sm_80-only build still runs on an H100/H200 (sm_80 code is forward compatible), but the
  // Hopper kernels are empty there: refuse instead of returning garbage.
  require(attributes.binaryVersion == 90,
          "this Hopper kernel was not built for sm_90a (the loaded code is sm_{}); configure with "
          "-DCMAKE_CUDA_ARCHITECTURES=90a (or \"80;90a\")",
          attributes.binaryVersion);
  KC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     dynamic_smem_bytes));
  prepared_[kernel] = dynamic_smem_bytes;
}

int active_clusters(const void* kernel, int block_threads, std::size_t dynamic_smem_bytes, int cluster_size) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(cluster_size), 1, 1);
  config.blockDim = dim3(static_cast<unsigned>(block_threads), 1, 1);
  config.dynamicSmemBytes = dynamic_smem_bytes;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster_size);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  KC_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  return clusters;
}

int HopperLaunchCache::resident_blocks(const void* kernel, int block_threads,
                                       int dynamic_smem_bytes, int cluster_size) {
  if (const auto found = resident_.find(kernel); found != resident_.end()) return found->second;
  prepare_kernel(kernel, dynamic_smem_bytes);
  int blocks = 0;
  if (cluster_size == 1) {
    const int sm_count = current_device_sm_count();
    int per_sm = 0;
    KC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block_threads,
                                                                dynamic_smem_bytes));
    blocks = sm_count * per_sm;
  } else {
    // Clusters must fit inside one GPC; not every SM can always be paired, so ask the runtime how
    // many clusters are resident at once rather than assuming SMs / cluster_size.
    blocks = active_clusters(kernel, block_threads, static_cast<std::size_t>(dynamic_smem_bytes), cluster_size) *
             cluster_size;
  }
  require(blocks > 0, "no block of this kernel fits on the GPU ({} threads, {} bytes of shared memory)",
          block_threads, dynamic_smem_bytes);
  resident_[kernel] = blocks;
  return blocks;
}

}  // namespace kc::stage3
