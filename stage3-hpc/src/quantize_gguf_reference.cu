// The quantize_gguf op's references (kc/stage3/quantize_gguf.hpp): ggml's reference quantizers
// (quantize_row_q4_0_ref, _q4_1_ref, _q8_0_ref in ggml-quants.c) written again from their
// definition, one block at a time in ggml's order, in float. One function serves the host
// reference and the device one (a thread per block), so the two cannot drift apart; the rungs are
// written separately (in parallel, four lanes a block) and checked against it.
#include <cuda_bf16.h>
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/stage3/quantize_gguf.hpp"

namespace kc::stage3 {
namespace {

// One IEEE float operation, rounded on its own: nvcc would otherwise fuse a product and a sum into
// an FFMA (one rounding), which ggml's C does not do. The host build does not contract either
// (-ffp-contract=off for this file).
__host__ __device__ inline float rn_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ inline float rn_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ inline float rn_sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
__host__ __device__ inline float rn_div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

__host__ __device__ inline void put_bits(std::uint8_t* at, std::uint16_t bits) {
  at[0] = static_cast<std::uint8_t>(bits & 0xffu);
  at[1] = static_cast<std::uint8_t>(bits >> 8);
}

// One block of 32 floats to its bytes, as ggml's reference quantizer of `type` writes it.
__host__ __device__ __forceinline__ void quantize_block(GgufBlockType type, const float* x, std::uint8_t* out) {
  constexpr int kQk = kGgufBlockWeights;
  if (type == GgufBlockType::q8_0) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < kQk; ++j) {
      const float a = fabsf(x[j]);
      amax = amax > a ? amax : a;  // ggml's MAX(a, b): ((a) > (b) ? (a) : (b))
    }
    const float d = rn_div(amax, 127.0f);
    const float id = ggml_inverse_scale(d);
    put_bits(out, ggml_fp16_bits(d));
#pragma unroll
    for (int j = 0; j < kQk; ++j)
      out[2 + j] = static_cast<std::uint8_t>(ggml_float_to_int8(roundf(rn_mul(x[j], id))));
    return;
  }
  if (type == GgufBlockType::q4_0) {
    float amax = 0.0f, max = 0.0f;
#pragma unroll
    for (int j = 0; j < kQk; ++j)
      if (amax < fabsf(x[j])) {
        amax = fabsf(x[j]);
        max = x[j];
      }
    const float d = rn_div(max, -8.0f);
    const float id = ggml_inverse_scale(d);
    put_bits(out, ggml_fp16_bits(d));
#pragma unroll
    for (int j = 0; j < kQk / 2; ++j) {
      const auto low = static_cast<std::uint8_t>(ggml_nibble(rn_add(rn_mul(x[j], id), 8.5f)));
      const auto high = static_cast<std::uint8_t>(ggml_nibble(rn_add(rn_mul(x[kQk / 2 + j], id), 8.5f)));
      out[2 + j] = static_cast<std::uint8_t>(low | (high << 4));
    }
    return;
  }
  // q4_1
  float min = FLT_MAX, max = -FLT_MAX;
#pragma unroll
  for (int j = 0; j < kQk; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = rn_div(rn_sub(max, min), 15.0f);
  const float id = ggml_inverse_scale(d);
  put_bits(out, ggml_fp16_bits(d));
  put_bits(out + 2, ggml_fp16_bits(min));
#pragma unroll
  for (int j = 0; j < kQk / 2; ++j) {
    const auto low = static_cast<std::uint8_t>(ggml_nibble(rn_add(rn_mul(rn_sub(x[j], min), id), 0.5f)));
    const auto high = static_cast<std::uint8_t>(ggml_nibble(rn_add(rn_mul(rn_sub(x[kQk / 2 + j], min), id), 0.5f)));
    out[4 + j] = static_cast<std::uint8_t>(low | (high << 4));
  }
}

void check_type(GgufBlockType type, const char* who) {
  if (type != GgufBlockType::q4_0 && type != GgufBlockType::q4_1 && type != GgufBlockType::q8_0)
    throw Error(fmt::format("{}: ggml type {} is not q4_0 (2), q4_1 (3) or q8_0 (8)", who, static_cast<int>(type)));
}

void check_count(std::size_t count, const char* who) {
  if (count % kGgufBlockWeights != 0)
    throw Error(fmt::format("{}: {} values are not whole blocks of {}; quantize a multiple of {} values", who, count,
                            kGgufBlockWeights, kGgufBlockWeights));
}

// A thread per block: the block's bf16 widened exactly, quantized, its bytes written as the doubles
// of their signed values (the i8 output's comparison reads them so).
// The type is a template argument and every loop has a constant count, so the block's values and
// bytes stay in registers (no local memory: the stage's no-spill SASS contract covers this object).
template <GgufBlockType kType>
__global__ void quantize_reference_kernel(const __nv_bfloat16* x, long long blocks, double* out) {
  constexpr int kBytes = gguf_block_bytes(kType);
  const long long block = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (block >= blocks) return;
  float values[kGgufBlockWeights];
#pragma unroll
  for (int j = 0; j < kGgufBlockWeights; ++j) values[j] = __bfloat162float(x[block * kGgufBlockWeights + j]);
  std::uint8_t bytes[kBytes];
  quantize_block(kType, values, bytes);
#pragma unroll
  for (int i = 0; i < kBytes; ++i)
    out[block * kBytes + i] = static_cast<double>(static_cast<std::int8_t>(bytes[i]));
}

}  // namespace

std::vector<std::uint8_t> quantize_gguf_on_host(GgufBlockType type, const float* x, std::size_t count) {
  check_type(type, "quantize_gguf_on_host");
  check_count(count, "quantize_gguf_on_host");
  const std::size_t blocks = count / kGgufBlockWeights;
  const auto size = static_cast<std::size_t>(gguf_block_bytes(type));
  std::vector<std::uint8_t> out(blocks * size);
  for (std::size_t b = 0; b < blocks; ++b) quantize_block(type, x + b * kGgufBlockWeights, out.data() + b * size);
  return out;
}

std::vector<std::uint8_t> quantize_gguf_on_host(GgufBlockType type, const __nv_bfloat16* x, std::size_t count) {
  check_count(count, "quantize_gguf_on_host");
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = __bfloat162float(x[i]);
  return quantize_gguf_on_host(type, values.data(), count);
}

void quantize_gguf_reference_on_device(GgufBlockType type, const __nv_bfloat16* x, long long rows, int k, double* out,
                                       cudaStream_t stream) {
  check_type(type, "quantize_gguf_reference_on_device");
  const long long blocks = rows * (k / kGgufBlockWeights);
  constexpr int kThreads = 128;
  const auto grid = static_cast<unsigned>(core::ceil_div(blocks, kThreads));
  if (grid == 0) return;
  if (type == GgufBlockType::q8_0)
    quantize_reference_kernel<GgufBlockType::q8_0><<<grid, kThreads, 0, stream>>>(x, blocks, out);
  else if (type == GgufBlockType::q4_0)
    quantize_reference_kernel<GgufBlockType::q4_0><<<grid, kThreads, 0, stream>>>(x, blocks, out);
  else
    quantize_reference_kernel<GgufBlockType::q4_1><<<grid, kThreads, 0, stream>>>(x, blocks, out);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::stage3
