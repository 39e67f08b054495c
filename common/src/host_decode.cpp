#include <cstring>

#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/parallel.hpp"

namespace kc {

double decode_element(const std::byte* data, DType dtype, std::size_t index) {
  switch (dtype) {
    case DType::f64: {
      double v;
      std::memcpy(&v, data + index * 8, 8);
      return v;
    }
    case DType::f32:
    case DType::tf32: {
      float v;
      std::memcpy(&v, data + index * 4, 4);
      return v;
    }
    case DType::f16: {
      __half v;
      std::memcpy(&v, data + index * 2, 2);
      return __half2float(v);
    }
    case DType::bf16: {
      __nv_bfloat16 v;
      std::memcpy(&v, data + index * 2, 2);
      return __bfloat162float(v);
    }
    case DType::f8e4m3: {
      __nv_fp8_e4m3 v;
      std::memcpy(&v, data + index, 1);
      return static_cast<float>(v);
    }
    case DType::f8e5m2: {
      __nv_fp8_e5m2 v;
      std::memcpy(&v, data + index, 1);
      return static_cast<float>(v);
    }
    case DType::i32: {
      std::int32_t v;
      std::memcpy(&v, data + index * 4, 4);
      return v;
    }
    case DType::i8: return static_cast<double>(static_cast<std::int8_t>(data[index]));
    case DType::i4: {
      const int nibble = (std::to_integer<int>(data[index / 2]) >> ((index % 2) * 4)) & 0xF;
      return nibble >= 8 ? nibble - 16 : nibble;
    }
  }
  return 0.0;
}

std::vector<double> to_host_double(const void* device_data, DType dtype, std::size_t count,
                                   cudaStream_t stream) {
  std::vector<double> values(count);
  if (count == 0) return values;
  const std::size_t bytes = dtype_bytes(dtype, count);
  PinnedBuffer<std::byte> staging(bytes);
  KC_CUDA_CHECK(cudaMemcpyAsync(staging.data(), device_data, bytes, cudaMemcpyDeviceToHost, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  // Spread over the host's cores: the CPU references read hundreds of millions of elements.
  const std::byte* data = staging.data();
  parallel_for(static_cast<std::int64_t>(count), 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      values[static_cast<std::size_t>(i)] = decode_element(data, dtype, static_cast<std::size_t>(i));
  });
  return values;
}

}  // namespace kc
