// The bytes a device tensor or buffer holds, copied to the host (synchronous): what the GEMV tests
// compare when a rung must write another rung's bits, or a refusal must write nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/common/error.hpp"
#include "kc/common/problem.hpp"

namespace kc::stage3::test_support {

inline std::vector<std::uint8_t> bytes_of(const void* device, std::size_t count) {
  std::vector<std::uint8_t> bytes(count);
  KC_CUDA_CHECK(cudaMemcpy(bytes.data(), device, count, cudaMemcpyDeviceToHost));
  return bytes;
}

inline std::vector<std::uint8_t> bytes_of(const Tensor& tensor) { return bytes_of(tensor.raw(), tensor.bytes()); }

template <typename T>
std::vector<std::uint8_t> bytes_of(const DeviceBuffer<T>& buffer) {
  return bytes_of(buffer.data(), buffer.bytes());
}

}  // namespace kc::stage3::test_support
