#include <cstring>

#include "kc/common/error.hpp"
#include "kc/common/fill.hpp"
#include "kc/common/splitmix.hpp"

namespace kc {
namespace {

constexpr int kThreads = 256;

// Uniform double in [0, 1) from 53 hash bits.
__device__ inline double unit_uniform(std::uint64_t seed, std::uint64_t index, std::uint64_t stream) {
  const std::uint64_t bits = splitmix64(splitmix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) + index);
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

__device__ inline double draw(std::uint64_t seed, std::uint64_t index, FillSpec spec) {
  if (spec.distribution == Distribution::uniform)
    return spec.a + (spec.b - spec.a) * unit_uniform(seed, index, 0);
  // Box-Muller; 1 - u keeps the logarithm finite.
  const double u1 = 1.0 - unit_uniform(seed, index, 1);
  const double u2 = unit_uniform(seed, index, 2);
  return spec.a + spec.b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
}

__device__ inline long long draw_integer(std::uint64_t seed, std::uint64_t index, FillSpec spec,
                                         long long low, long long high) {
  long long lo = static_cast<long long>(ceil(spec.a));
  long long hi = static_cast<long long>(floor(spec.b));
  lo = lo < low ? low : lo;
  hi = hi > high ? high : hi;
  if (hi < lo) hi = lo;
  const double u = unit_uniform(seed, index, 3);
  long long value = lo + static_cast<long long>(u * static_cast<double>(hi - lo + 1));
  return value > hi ? hi : value;
}

template <typename T>
__device__ inline T from_double(double x) { return static_cast<T>(x); }
template <>
__device__ inline __half from_double<__half>(double x) { return __double2half(x); }
template <>
__device__ inline __nv_bfloat16 from_double<__nv_bfloat16>(double x) { return __double2bfloat16(x); }
template <>
__device__ inline __nv_fp8_e4m3 from_double<__nv_fp8_e4m3>(double x) { return __nv_fp8_e4m3(x); }
template <>
__device__ inline __nv_fp8_e5m2 from_double<__nv_fp8_e5m2>(double x) { return __nv_fp8_e5m2(x); }

template <typename T>
__device__ inline double to_double(T x) { return static_cast<double>(x); }
template <>
__device__ inline double to_double<__half>(__half x) { return static_cast<double>(__half2float(x)); }
template <>
__device__ inline double to_double<__nv_bfloat16>(__nv_bfloat16 x) {
  return static_cast<double>(__bfloat162float(x));
}
template <>
__device__ inline double to_double<__nv_fp8_e4m3>(__nv_fp8_e4m3 x) {
  return static_cast<double>(static_cast<float>(x));
}
template <>
__device__ inline double to_double<__nv_fp8_e5m2>(__nv_fp8_e5m2 x) {
  return static_cast<double>(static_cast<float>(x));
}

template <typename T>
__global__ void fill_float_kernel(T* out, std::size_t count, std::uint64_t seed, FillSpec spec) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = from_double<T>(draw(seed, i, spec));
}

template <typename T>
__global__ void fill_integer_kernel(T* out, std::size_t count, std::uint64_t seed, FillSpec spec,
                                    long long low, long long high) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(draw_integer(seed, i, spec, low, high));
}

// i4: element 2j in the low nibble of byte j, element 2j+1 in the high nibble.
__global__ void fill_int4_kernel(std::uint8_t* out, std::size_t count, std::uint64_t seed,
                                 FillSpec spec) {
  const std::size_t bytes = (count + 1) / 2;
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < bytes;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const long long lo = draw_integer(seed, 2 * j, spec, -7, 7);
    const long long hi = 2 * j + 1 < count ? draw_integer(seed, 2 * j + 1, spec, -7, 7) : 0;
    out[j] = static_cast<std::uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
  }
}

template <typename Word>
__global__ void pattern_kernel(Word* out, std::size_t count, Word pattern) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = pattern;
}

template <typename T>
__global__ void to_double_kernel(const T* in, std::size_t count, double* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = to_double<T>(in[i]);
}

__global__ void int4_to_double_kernel(const std::uint8_t* in, std::size_t count, double* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int nibble = (in[i / 2] >> ((i % 2) * 4)) & 0xF;
    out[i] = static_cast<double>(nibble >= 8 ? nibble - 16 : nibble);
  }
}

unsigned grid_for(std::size_t count) {
  const std::size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks == 0 ? 1 : blocks) : 65536);
}

template <typename Word>
void fill_pattern(void* data, std::size_t count, Word pattern, cudaStream_t stream) {
  if (count == 0) return;
  pattern_kernel<Word><<<grid_for(count), kThreads, 0, stream>>>(static_cast<Word*>(data), count,
                                                                 pattern);
  KC_CHECK_LAUNCH();
}

}  // namespace

void fill_random(void* data, DType dtype, std::size_t count, std::uint64_t seed, FillSpec spec,
                 cudaStream_t stream) {
  if (count == 0) return;
  const unsigned grid = grid_for(count);
  switch (dtype) {
    case DType::f64:
      fill_float_kernel<<<grid, kThreads, 0, stream>>>(static_cast<double*>(data), count, seed, spec);
      break;
    case DType::f32:
    case DType::tf32:
      fill_float_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(data), count, seed, spec);
      break;
    case DType::f16:
      fill_float_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(data), count, seed, spec);
      break;
    case DType::bf16:
      fill_float_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count,
                                                       seed, spec);
      break;
    case DType::f8e4m3:
      fill_float_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data), count,
                                                       seed, spec);
      break;
    case DType::f8e5m2:
      fill_float_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_fp8_e5m2*>(data), count,
                                                       seed, spec);
      break;
    case DType::i32:
      fill_integer_kernel<<<grid, kThreads, 0, stream>>>(static_cast<std::int32_t*>(data), count,
                                                         seed, spec, -2147483647LL, 2147483647LL);
      break;
    case DType::i8:
      fill_integer_kernel<<<grid, kThreads, 0, stream>>>(static_cast<std::int8_t*>(data), count,
                                                         seed, spec, -127, 127);
      break;
    case DType::i4:
      fill_int4_kernel<<<grid_for((count + 1) / 2), kThreads, 0, stream>>>(
          static_cast<std::uint8_t*>(data), count, seed, spec);
      break;
  }
  KC_CHECK_LAUNCH();
}

void poison(void* data, DType dtype, std::size_t count, cudaStream_t stream) {
  switch (dtype) {
    case DType::f64: fill_pattern<std::uint64_t>(data, count, 0x7FF8000000000000ull, stream); break;
    case DType::f32:
    case DType::tf32: fill_pattern<std::uint32_t>(data, count, 0x7FC00000u, stream); break;
    case DType::f16: fill_pattern<std::uint16_t>(data, count, 0x7E00u, stream); break;
    case DType::bf16: fill_pattern<std::uint16_t>(data, count, 0x7FC0u, stream); break;
    case DType::f8e4m3: fill_pattern<std::uint8_t>(data, count, 0x7Fu, stream); break;
    case DType::f8e5m2: fill_pattern<std::uint8_t>(data, count, 0x7Fu, stream); break;
    case DType::i32: fill_pattern<std::uint32_t>(data, count, 0x80000000u, stream); break;
    case DType::i8: fill_pattern<std::uint8_t>(data, count, 0x80u, stream); break;
    case DType::i4: fill_pattern<std::uint8_t>(data, (count + 1) / 2, 0x88u, stream); break;
  }
}

void convert_to_double(const void* source, DType dtype, std::size_t count, double* destination,
                       cudaStream_t stream) {
  if (count == 0) return;
  const unsigned grid = grid_for(count);
  switch (dtype) {
    case DType::f64:
      KC_CUDA_CHECK(cudaMemcpyAsync(destination, source, count * sizeof(double),
                                    cudaMemcpyDeviceToDevice, stream));
      return;
    case DType::f32:
    case DType::tf32:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const float*>(source), count,
                                                      destination);
      break;
    case DType::f16:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __half*>(source), count,
                                                      destination);
      break;
    case DType::bf16:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(source),
                                                      count, destination);
      break;
    case DType::f8e4m3:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_fp8_e4m3*>(source),
                                                      count, destination);
      break;
    case DType::f8e5m2:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_fp8_e5m2*>(source),
                                                      count, destination);
      break;
    case DType::i32:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const std::int32_t*>(source),
                                                      count, destination);
      break;
    case DType::i8:
      to_double_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const std::int8_t*>(source),
                                                      count, destination);
      break;
    case DType::i4:
      int4_to_double_kernel<<<grid, kThreads, 0, stream>>>(
          static_cast<const std::uint8_t*>(source), count, destination);
      break;
  }
  KC_CHECK_LAUNCH();
}

}  // namespace kc
