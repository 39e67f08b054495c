// attention_decode_gather.hpp — the attention_decode_paged op's FP64 device reference reads a
// sequence's pages through its block table into one contiguous tensor (src/attention_decode_gather.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kc/common/dtype.hpp"

namespace kc::stage3 {

// One sequence's keys (or values) in a pool [num_blocks, Hkv, block_size, D] of bf16 or f16.
struct PagedSequence {
  const void* pool = nullptr;
  DType dtype = DType::bf16;
  const std::int32_t* block_row = nullptr;  // device: the sequence's row of the block table
  std::int64_t length = 0;                  // keys to gather (the sequence's length)
  std::int64_t kv_heads = 0, block_size = 0, head_dim = 0;
};

// destination [Hkv, length, D] (device) = the sequence's first `length` rows of every kv head, in
// FP64: key j of head h from row j mod block_size of block block_row[j / block_size].
void gather_pages_to_double(const PagedSequence& sequence, double* destination, cudaStream_t stream);

}  // namespace kc::stage3
