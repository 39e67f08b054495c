// The gather of the attention_decode_paged op's FP64 reference (attention_decode_gather.hpp): one
// sequence's pages, found through its row of the block table, copied into a contiguous FP64 tensor.
#include "attention_decode_gather.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <fmt/format.h>

#include <algorithm>

#include "kc/common/error.hpp"

namespace kc::stage3 {
namespace {

// One thread per destination element (grid-stride): index e = (h * length + j) * D + c.
template <typename T>
__global__ void gather_pages_kernel(const T* pool, const std::int32_t* block_row, std::int64_t length,
                                    std::int64_t kv_heads, std::int64_t block_size, std::int64_t head_dim,
                                    double* destination) {
  const std::int64_t count = kv_heads * length * head_dim;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t c = e % head_dim;
    const std::int64_t j = (e / head_dim) % length;
    const std::int64_t h = e / (head_dim * length);
    const std::int64_t block = block_row[j / block_size];
    const std::int64_t row = j % block_size;
    destination[e] = static_cast<double>(static_cast<float>(pool[((block * kv_heads + h) * block_size + row) * head_dim + c]));
  }
}

template <typename T>
void launch_gather(const PagedSequence& s, double* destination, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr std::int64_t kMaxBlocks = 4096;
  const std::int64_t count = s.kv_heads * s.length * s.head_dim;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(kMaxBlocks, (count + kThreads - 1) / kThreads));
  gather_pages_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(s.pool), s.block_row, s.length,
                                                          s.kv_heads, s.block_size, s.head_dim, destination);
  KC_CHECK_LAUNCH();
}

}  // namespace

void gather_pages_to_double(const PagedSequence& sequence, double* destination, cudaStream_t stream) {
  if (sequence.length == 0) return;
  if (sequence.dtype == DType::bf16)
    launch_gather<__nv_bfloat16>(sequence, destination, stream);
  else if (sequence.dtype == DType::f16)
    launch_gather<__half>(sequence, destination, stream);
  else
    throw Error(fmt::format("gather_pages_to_double: the paged cache holds bf16 or f16, not {}",
                            dtype_name(sequence.dtype)));
}

}  // namespace kc::stage3
