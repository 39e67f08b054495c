// GGUF blocks on the GPU (kc/engine/gguf_blocks.hpp): one thread a block, bytes written one by one
// (blocks of 18, 20 or 34 bytes share no wider alignment); load-time work, not a step's.
#include "kc/engine/gguf_blocks.hpp"

#include <cuda_fp16.h>

#include "kc/common/error.hpp"
#include "kc/common/splitmix.hpp"

namespace kc::engine {
namespace {

constexpr int kThreads = 256;
constexpr int kBlockWeights = 32;


__device__ float unit(std::uint64_t bits) {  // [0, 1) from the top 24 bits
  return static_cast<float>(bits >> 40) * 0x1p-24f;
}

__device__ void put_half(std::uint8_t* at, float value) {
  const unsigned short bits = __half_as_ushort(__float2half_rn(value));
  at[0] = static_cast<std::uint8_t>(bits & 0xFF);
  at[1] = static_cast<std::uint8_t>(bits >> 8);
}

__device__ float half_at(const std::uint8_t* at) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(at[0] | (at[1] << 8))));
}

template <GgmlType kType>
__global__ void draw_kernel(std::uint8_t* blocks, std::size_t count, int block_bytes, std::uint64_t seed) {
  const std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= count) return;
  std::uint64_t state = splitmix64(seed ^ splitmix64(b));
  std::uint8_t* block = blocks + b * static_cast<std::size_t>(block_bytes);
  put_half(block, exp2f(-10.f + 6.f * unit(state = splitmix64(state))));
  int first = 2;
  if constexpr (kType == GgmlType::q4_1) {
    state = splitmix64(state);
    const float magnitude = exp2f(-10.f + 8.f * unit(state));
    put_half(block + 2, (state & 1u) != 0 ? -magnitude : magnitude);
    first = 4;
  }
  for (int i = first; i < block_bytes; i += 8) {
    state = splitmix64(state);
    for (int j = 0; j < 8 && i + j < block_bytes; ++j) block[i + j] = static_cast<std::uint8_t>(state >> (8 * j));
  }
}

// The arithmetic of the CPU reference (dequantize.cpp), rounding for rounding: d * (code +
// offset) + m, no fused multiply-add.
template <GgmlType kType>
__global__ void dequantize_kernel(const std::uint8_t* blocks, std::size_t count, int block_bytes,
                                  __nv_bfloat16* out) {
  const std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= count) return;
  const std::uint8_t* block = blocks + b * static_cast<std::size_t>(block_bytes);
  __nv_bfloat16* w = out + b * kBlockWeights;
  const float d = half_at(block);
  if constexpr (kType == GgmlType::q8_0) {
    for (int i = 0; i < kBlockWeights; ++i)
      w[i] = __float2bfloat16_rn(__fmul_rn(d, static_cast<float>(static_cast<std::int8_t>(block[2 + i]))));
  } else {
    const bool with_min = kType == GgmlType::q4_1;
    const float m = with_min ? half_at(block + 2) : 0.f;
    const float offset = with_min ? 0.f : -8.f;
    const std::uint8_t* qs = block + (with_min ? 4 : 2);
    for (int j = 0; j < kBlockWeights / 2; ++j) {
      const unsigned byte = qs[j];
      w[j] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(d, static_cast<float>(byte & 0x0Fu) + offset), m));
      w[j + kBlockWeights / 2] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(d, static_cast<float>(byte >> 4) + offset), m));
    }
  }
}

int checked_block_bytes(GgmlType type, const void* blocks, const void* other, const char* entry) {
  require(type == GgmlType::q4_0 || type == GgmlType::q4_1 || type == GgmlType::q8_0,
          "{}: type {} is not q4_0, q4_1 or q8_0", entry, ggml_type_name(type));
  require(blocks != nullptr && other != nullptr, "{}: a null pointer", entry);
  return static_cast<int>(ggml_type_info(type).block_bytes);
}

unsigned grid_for(std::size_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

}  // namespace

void draw_gguf_blocks(GgmlType type, std::uint8_t* blocks, std::size_t count, std::uint64_t seed,
                      cudaStream_t stream) {
  const int bytes = checked_block_bytes(type, blocks, blocks, "draw_gguf_blocks");
  if (count == 0) return;
  if (type == GgmlType::q4_0) draw_kernel<GgmlType::q4_0><<<grid_for(count), kThreads, 0, stream>>>(blocks, count, bytes, seed);
  if (type == GgmlType::q4_1) draw_kernel<GgmlType::q4_1><<<grid_for(count), kThreads, 0, stream>>>(blocks, count, bytes, seed);
  if (type == GgmlType::q8_0) draw_kernel<GgmlType::q8_0><<<grid_for(count), kThreads, 0, stream>>>(blocks, count, bytes, seed);
  KC_CUDA_CHECK(cudaGetLastError());
}

void dequantize_gguf_blocks(GgmlType type, const std::uint8_t* blocks, std::size_t count, __nv_bfloat16* out,
                            cudaStream_t stream) {
  const int bytes = checked_block_bytes(type, blocks, out, "dequantize_gguf_blocks");
  require(reinterpret_cast<std::uintptr_t>(out) % 2 == 0, "dequantize_gguf_blocks: out is not 2-byte aligned");
  if (count == 0) return;
  if (type == GgmlType::q4_0)
    dequantize_kernel<GgmlType::q4_0><<<grid_for(count), kThreads, 0, stream>>>(blocks, count, bytes, out);
  if (type == GgmlType::q4_1)
    dequantize_kernel<GgmlType::q4_1><<<grid_for(count), kThreads, 0, stream>>>(blocks, count, bytes, out);
  if (type == GgmlType::q8_0)
    dequantize_kernel<GgmlType::q8_0><<<grid_for(count), kThreads, 0, stream>>>(blocks, count, bytes, out);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::engine
