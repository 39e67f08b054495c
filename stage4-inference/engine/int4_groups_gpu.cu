// 4-bit groups dequantized on the GPU (kc/engine/int4_groups_gpu.hpp): one thread a byte of
// qweight (two weights of one row, one group: G is even); load-time work, not a step's.
#include "kc/engine/int4_groups_gpu.hpp"

#include <cuda_fp16.h>

#include "kc/common/error.hpp"

namespace kc::engine {
namespace {

constexpr int kThreads = 256;

__global__ void dequantize_kernel(stage3::Int4GroupWeights w, __nv_bfloat16* out) {
  const std::size_t byte = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t row_bytes = static_cast<std::size_t>(w.k / 2);
  if (byte >= static_cast<std::size_t>(w.n) * row_bytes) return;
  const std::size_t row = byte / row_bytes;
  const int k = static_cast<int>(byte % row_bytes) * 2;
  const std::size_t entry = row * static_cast<std::size_t>(w.k / w.group_size) + static_cast<std::size_t>(k / w.group_size);
  const float scale = __half2float(__ushort_as_half(w.scales[entry]));
  const int zero = w.zeros[entry];
  const int pair = w.qweight[byte];
  __nv_bfloat16* to = out + row * static_cast<std::size_t>(w.k) + static_cast<std::size_t>(k);
  to[0] = __float2bfloat16_rn(scale * static_cast<float>((pair & 15) - zero));
  to[1] = __float2bfloat16_rn(scale * static_cast<float>((pair >> 4) - zero));
}

}  // namespace

void dequantize_int4_groups_on_device(const stage3::Int4GroupWeights& w, __nv_bfloat16* out, cudaStream_t stream) {
  stage3::check_int4_group_weights(w, "dequantize_int4_groups_on_device");
  require(out != nullptr && reinterpret_cast<std::uintptr_t>(out) % 2 == 0,
          "dequantize_int4_groups_on_device: out must be non-null and 2-byte aligned");
  const std::size_t bytes = static_cast<std::size_t>(w.n) * static_cast<std::size_t>(w.k / 2);
  const std::size_t blocks = (bytes + kThreads - 1) / kThreads;
  require(blocks <= 0x7fffffffu, "dequantize_int4_groups_on_device: {} x {} weights are too many for one grid", w.n,
          w.k);
  dequantize_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(w, out);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::engine
