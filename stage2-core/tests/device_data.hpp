// Test support: hand-made host values in and out of device tensors of any stage-2 dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kc/common/fill.hpp"
#include "kc/common/problem.hpp"
#include "kc/core/dtype_traits.hpp"

namespace kc::stage2::testing {

template <typename T>
void encode_as(const std::vector<double>& values, std::vector<std::byte>& bytes) {
  bytes.resize(values.size() * sizeof(T));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T v = core::from_float<T>(static_cast<float>(values[i]));
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
}

// Overwrites `tensor` with `values` rounded to its dtype (f32, f16, bf16 or i32), in order on
// `stream` (where make_operands filled it), and waits.
inline void upload(Tensor& tensor, const std::vector<double>& values, cudaStream_t stream) {
  require(values.size() == tensor.count(), "upload: {} values for tensor '{}' of {}", values.size(),
          tensor.name, tensor.count());
  std::vector<std::byte> bytes;
  switch (tensor.dtype) {
    case DType::f32: encode_as<float>(values, bytes); break;
    case DType::f16: encode_as<__half>(values, bytes); break;
    case DType::bf16: encode_as<__nv_bfloat16>(values, bytes); break;
    case DType::i32: {
      std::vector<std::int32_t> ints(values.begin(), values.end());
      bytes.resize(ints.size() * 4);
      std::memcpy(bytes.data(), ints.data(), bytes.size());
      break;
    }
    default: throw Error("upload: unsupported dtype");
  }
  tensor.upload(bytes.data(), bytes.size(), stream);
}

inline std::vector<double> download(const Tensor& tensor) {
  return to_host_double(tensor.raw(), tensor.dtype, tensor.count());
}

}  // namespace kc::stage2::testing
