// RoPE rung 02 — a block per token, 16-byte accesses, cos/sin shared by all heads.
//
// Idea: all heads of a token turn by the same angles, so a block takes one token: its position
// and its row of the cos/sin table (head_dim floats, an L1-resident 256 to 512 bytes) are read
// once and reused by every head of Q and K. Each thread rotates kPairs adjacent pairs with
// 16-byte accesses: for rotate-half a vector of a's (elements i..i+7 for bf16) and the matching
// vector of b's half a head later; for interleaved one vector holding 4 (a, b) pairs.
// Shapes whose head_dim does not split into such vectors fall back to one pair per thread.
//
// What changed from rung 01: 16-byte loads and stores of Q/K, table reads amortized over the
// heads, and no per-element division to find the head.
//
// Expected limiter: DRAM bandwidth (Q and K read and written once).
//
// Run just this rung:  kc-bench --filter 'stage2/rope_.*/02_vectorized'
#include "kc/core/launch.hpp"
#include "kc/core/vector_io.hpp"
#include "rope_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 128;

template <typename T, int kPairs, RopeLayout kLayout>
__global__ void __launch_bounds__(kThreads) rope_vectorized_kernel(RopeArgs<T> args) {
  const int half = args.head_dim / 2;
  const int chunks_per_head = half / kPairs;
  const int items = (args.q_heads + args.kv_heads) * chunks_per_head;
  const std::int64_t token = blockIdx.x;
  const float* table_row = args.cos_sin + static_cast<std::int64_t>(args.positions[token]) * args.head_dim;
  for (int item = threadIdx.x; item < items; item += kThreads) {
    const int first_pair = (item % chunks_per_head) * kPairs;
    T* x = rope_head(args, token, item / chunks_per_head);
    float cos_angle[kPairs], sin_angle[kPairs];
    core::load_floats<float, kPairs>(table_row + first_pair, cos_angle);
    core::load_floats<float, kPairs>(table_row + half + first_pair, sin_angle);
    if constexpr (kLayout == RopeLayout::rotate_half) {
      float a[kPairs], b[kPairs];
      core::load_floats<T, kPairs>(x + first_pair, a);
      core::load_floats<T, kPairs>(x + half + first_pair, b);
#pragma unroll
      for (int i = 0; i < kPairs; ++i) rotate_pair(a[i], b[i], cos_angle[i], sin_angle[i]);
      core::store_floats<T, kPairs>(x + first_pair, a);
      core::store_floats<T, kPairs>(x + half + first_pair, b);
    } else {
      float ab[2 * kPairs];  // a0 b0 a1 b1 ...
      core::load_floats<T, 2 * kPairs>(x + 2 * first_pair, ab);
#pragma unroll
      for (int i = 0; i < kPairs; ++i) rotate_pair(ab[2 * i], ab[2 * i + 1], cos_angle[i], sin_angle[i]);
      core::store_floats<T, 2 * kPairs>(x + 2 * first_pair, ab);
    }
  }
}

template <typename T, RopeLayout kLayout>
void launch_rope(const RopeArgs<T>& args, cudaStream_t stream) {
  // 16 bytes of Q/K per access: kVectorWidth a's (rotate-half) or half as many (a, b) pairs.
  constexpr int kPairs = kLayout == RopeLayout::rotate_half ? core::kVectorWidth<T> : core::kVectorWidth<T> / 2;
  const int half = args.head_dim / 2;
  const bool vectorized = half % kPairs == 0 && core::is_aligned(args.q, core::kVectorBytes) &&
                          core::is_aligned(args.k, core::kVectorBytes) &&
                          core::is_aligned(args.cos_sin, core::kVectorBytes);
  const auto blocks = static_cast<unsigned>(args.tokens);
  if (vectorized)
    rope_vectorized_kernel<T, kPairs, kLayout><<<blocks, kThreads, 0, stream>>>(args);
  else
    rope_vectorized_kernel<T, 1, kLayout><<<blocks, kThreads, 0, stream>>>(args);
}

}  // namespace

template <typename T>
void rope_02_vectorized(const RopeArgs<T>& args, cudaStream_t stream) {
  if (args.layout == RopeLayout::rotate_half)
    launch_rope<T, RopeLayout::rotate_half>(args, stream);
  else
    launch_rope<T, RopeLayout::interleaved>(args, stream);
}

template void rope_02_vectorized<float>(const RopeArgs<float>&, cudaStream_t);
template void rope_02_vectorized<__half>(const RopeArgs<__half>&, cudaStream_t);
template void rope_02_vectorized<__nv_bfloat16>(const RopeArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
