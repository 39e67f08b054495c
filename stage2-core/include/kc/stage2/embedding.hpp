// kc/stage2/embedding.hpp — embedding gather: out[t] = table[ids[t]], with checked token ids.
//
// An id outside [0, vocab) must never become a read outside the table. The kernels compare every
// id with the vocabulary size before touching the table; for a bad id they write a zero row, skip
// the read, and record the first bad position in `error_record` (an atomicMin, so the lowest
// position wins whatever the block order). embedding_lookup_checked() turns that record into a
// kc::Error naming the position, the id and the valid range.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace kc::stage2 {

inline constexpr int kNoBadToken = -1;  // error_record value while every id was valid

template <typename T>
struct EmbeddingArgs {
  int tokens = 0, vocab = 0, hidden = 0;
  const int* ids = nullptr;     // tokens
  const T* table = nullptr;     // vocab x hidden
  T* out = nullptr;             // tokens x hidden
  // One int in device memory. Must hold kNoBadToken before the launch; the kernel writes it only
  // when an id is out of range, then it holds the first such position.
  int* error_record = nullptr;
};

template <typename T> void embedding_01_naive(const EmbeddingArgs<T>& args, cudaStream_t stream);
template <typename T> void embedding_02_vectorized(const EmbeddingArgs<T>& args, cudaStream_t stream);

// Resets the error record, runs the gather, waits for it, and throws kc::Error if an id was out
// of range (rows of bad ids are zero-filled; nothing outside the table was read).
template <typename T> void embedding_lookup_checked(const EmbeddingArgs<T>& args, cudaStream_t stream);

// "token id 50000 at position 17 is outside the vocabulary [0, 32000)..."
std::string bad_token_message(std::int64_t position, std::int64_t id, std::int64_t vocab);

}  // namespace kc::stage2
