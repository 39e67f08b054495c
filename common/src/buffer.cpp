#include "kc/common/buffer.hpp"

namespace kc::detail {

void* device_allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky; clear it
    std::size_t free_bytes = 0, total_bytes = 0;
    const bool have_info = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    (void)cudaGetLastError();
    throw CudaError(status,
                    have_info ? fmt::format("cudaMalloc({:.1f} MiB) with {:.1f} of {:.1f} MiB free",
                                            bytes / 1048576.0, free_bytes / 1048576.0,
                                            total_bytes / 1048576.0)
                                    .c_str()
                              : fmt::format("cudaMalloc({:.1f} MiB)", bytes / 1048576.0).c_str(),
                    __FILE__, __LINE__);
  }
  return pointer;
}

void device_free(void* pointer) noexcept {
  if (pointer != nullptr) (void)cudaFree(pointer);
}

void* pinned_allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* pointer = nullptr;
  KC_CUDA_CHECK(cudaMallocHost(&pointer, bytes));
  return pointer;
}

void pinned_free(void* pointer) noexcept {
  if (pointer != nullptr) (void)cudaFreeHost(pointer);
}

}  // namespace kc::detail
