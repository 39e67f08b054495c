// RoPE rung 01 — one thread per rotated pair.
//
// Idea: thread i handles pair i of the flattened (token, head, pair) space: it finds the head in
// Q or K, reads the token's position, reads cos and sin of that pair's angle from the table,
// and rotates the two elements in place. Rotate-half pairs element i with i + head_dim/2;
// interleaved pairs 2i with 2i + 1.
//
// What to notice: each thread moves 2 elements with 2 scalar loads, 2 table loads and 2 stores;
// for rotate-half a warp's two loads each cover 64 contiguous bytes (bf16), for interleaved one
// 128-byte span is read with a stride of 2.
//
// Expected limiter: load/store instruction issue.
//
// Run just this rung:  kc-bench --filter 'stage2/rope_.*/01_naive'
#include "kc/core/dtype_traits.hpp"
#include "kc/core/launch.hpp"
#include "rope_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) rope_naive_kernel(RopeArgs<T> args) {
  const int half = args.head_dim / 2;
  const int heads = args.q_heads + args.kv_heads;
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= static_cast<std::int64_t>(args.tokens) * heads * half) return;
  const int pair = static_cast<int>(item % half);
  const int head = static_cast<int>(item / half % heads);
  const std::int64_t token = item / half / heads;
  T* x = rope_head(args, token, head);
  const float* table_row = args.cos_sin + static_cast<std::int64_t>(args.positions[token]) * args.head_dim;
  const bool rotate_half = args.layout == RopeLayout::rotate_half;
  T& a_ref = rotate_half ? x[pair] : x[2 * pair];
  T& b_ref = rotate_half ? x[pair + half] : x[2 * pair + 1];
  float a = core::to_float(a_ref), b = core::to_float(b_ref);
  rotate_pair(a, b, table_row[pair], table_row[half + pair]);
  a_ref = core::from_float<T>(a);
  b_ref = core::from_float<T>(b);
}

}  // namespace

template <typename T>
void rope_01_naive(const RopeArgs<T>& args, cudaStream_t stream) {
  const std::int64_t pairs = static_cast<std::int64_t>(args.tokens) * (args.q_heads + args.kv_heads) *
                             (args.head_dim / 2);
  rope_naive_kernel<T><<<static_cast<unsigned>(core::ceil_div(pairs, kThreads)), kThreads, 0, stream>>>(args);
}

template void rope_01_naive<float>(const RopeArgs<float>&, cudaStream_t);
template void rope_01_naive<__half>(const RopeArgs<__half>&, cudaStream_t);
template void rope_01_naive<__nv_bfloat16>(const RopeArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
