// Guard bytes around every operand (problem.hpp): written with a pattern, checked after a run.
#include "kc/common/problem.hpp"

namespace kc {
namespace {

constexpr unsigned char kGuardPattern = 0xA5;
constexpr int kThreads = 256;

__global__ void count_damaged_kernel(const unsigned char* front, const unsigned char* back,
                                     std::size_t bytes, unsigned long long* damaged) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < bytes;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += (front[i] != kGuardPattern) + (back[i] != kGuardPattern);
  if (local != 0) atomicAdd(damaged, local);
}

}  // namespace

void Tensor::fill_guards(cudaStream_t stream) {
  std::byte* front = storage.data();
  std::byte* back = front + kGuardBytes + bytes();
  KC_CUDA_CHECK(cudaMemsetAsync(front, kGuardPattern, kGuardBytes, stream));
  KC_CUDA_CHECK(cudaMemsetAsync(back, kGuardPattern, kGuardBytes, stream));
}

std::size_t Tensor::damaged_guard_bytes(cudaStream_t stream) const {
  const auto* front = reinterpret_cast<const unsigned char*>(storage.data());
  const unsigned char* back = front + kGuardBytes + bytes();
  DeviceBuffer<unsigned long long> damaged(1);
  KC_CUDA_CHECK(cudaMemsetAsync(damaged.data(), 0, sizeof(unsigned long long), stream));
  count_damaged_kernel<<<(kGuardBytes + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      front, back, kGuardBytes, damaged.data());
  KC_CHECK_LAUNCH();
  return static_cast<std::size_t>(damaged.to_host(stream)[0]);
}

}  // namespace kc
