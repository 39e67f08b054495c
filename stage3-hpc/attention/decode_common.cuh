// decode_common.cuh — what the paged decode rungs share: the checks before a launch, which keys a
// new token sees and where a key's row lives in the paged cache. The online softmax pieces (exp2, the -inf base, a finished row) are the prefill
// ladder's, from flash_common.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kc/stage3/decode_args.hpp"
#include "attention/flash_common.cuh"
#include "kc/common/error.hpp"
#include "kc/core/vector_io.hpp"

namespace kc::stage3 {

// A 16-byte piece of a row: 8 elements of a 16-bit type, what one LDG.E.128 / LDGSTS.128 moves.
inline constexpr int kDecodeChunkElements = 8;

// Checks a decode launch before it happens: kc::Error with a sentence a learner can act on.
template <typename T>
void require_decode_args(const DecodeArgs<T>& args, const char* rung) {
  require(args.head_dim == 64 || args.head_dim == 128,
          "{}: head dimension D = {} is not compiled; this rung supports D = 64 and D = 128", rung, args.head_dim);
  require(args.block_size == 16 || args.block_size == 32 || args.block_size == 64,
          "{}: block_size = {} tokens; the cache's blocks hold 16, 32 or 64", rung, args.block_size);
  require(args.batch >= 1 && args.q_heads >= 1 && args.kv_heads >= 1 && args.q_len >= 1 && args.max_blocks >= 1,
          "{}: B {}, Hq {}, Hkv {}, Sq {} and the table's slots per sequence {} must all be >= 1", rung, args.batch,
          args.q_heads, args.kv_heads, args.q_len, args.max_blocks);
  require(args.q_heads % args.kv_heads == 0, "{}: Hq = {} is not a multiple of Hkv = {}", rung, args.q_heads,
          args.kv_heads);
  require(args.max_blocks <= INT32_MAX / args.block_size,
          "{}: {} slots of {} keys exceed 32-bit key indices", rung, args.max_blocks, args.block_size);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  require(aligned(args.q) && aligned(args.k_cache) && aligned(args.v_cache) && aligned(args.o),
          "{}: Q, K_cache, V_cache and O must start 16-byte aligned (rows are moved in 16-byte pieces)", rung);
  require(args.block_table != nullptr && args.seq_lens != nullptr && args.lse != nullptr,
          "{}: block_table, seq_lens and LSE must not be null", rung);
}

// Keys new token `token` of a sequence of `length` keys sees: clamp(length - (Sq - 1 - token), 0,
// length) (attention_decode.hpp's decode_visible_keys). Keys j < this are visible.
__device__ __forceinline__ int decode_visible_keys(int length, int q_len, int token) {
  const int end = length - (q_len - 1 - token);
  return end < 0 ? 0 : end;  // never above length: token < q_len
}

// Row `row` (0 .. block_size - 1) of kv head `kv_head` in block `block` of a pool laid out
// [num_blocks, kv_heads, block_size, D].
template <typename T>
__device__ __forceinline__ const T* page_row(const T* pool, std::int32_t block, int kv_head, int row,
                                             const DecodeArgs<T>& args) {
  const std::int64_t page = static_cast<std::int64_t>(block) * args.kv_heads + kv_head;
  return pool + (page * args.block_size + row) * args.head_dim;
}

}  // namespace kc::stage3
