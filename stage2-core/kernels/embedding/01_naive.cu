// Embedding rung 01 — one thread per output element.
//
// Idea: out[t][h] = table[ids[t]][h]. Thread (t, h) reads the id, checks it against the
// vocabulary, and copies one element — or writes 0 and records the position if the id is out of
// range. The check comes before the table address is even formed: a bad id never becomes a read.
//
// What to notice: every thread re-reads its token's id (an L1 hit after the first) and moves
// 2 bytes (bf16) per load and store.
//
// Expected limiter: load/store instruction issue.
//
// Run just this rung:  kc-bench --filter 'stage2/embedding/01_naive'
#include "kc/core/launch.hpp"
#include "embedding_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) embedding_naive_kernel(EmbeddingArgs<T> args) {
  const std::int64_t element = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (element >= static_cast<std::int64_t>(args.tokens) * args.hidden) return;
  const std::int64_t token = element / args.hidden;
  const int h = static_cast<int>(element % args.hidden);
  const int id = args.ids[token];
  args.out[element] = token_id_valid(id, args.vocab, token, args.error_record, h == 0)
                          ? args.table[static_cast<std::int64_t>(id) * args.hidden + h]
                          : T(0.f);
}

}  // namespace

template <typename T>
void embedding_01_naive(const EmbeddingArgs<T>& args, cudaStream_t stream) {
  const std::int64_t elements = static_cast<std::int64_t>(args.tokens) * args.hidden;
  embedding_naive_kernel<T><<<static_cast<unsigned>(core::ceil_div(elements, kThreads)), kThreads, 0, stream>>>(args);
}

template void embedding_01_naive<float>(const EmbeddingArgs<float>&, cudaStream_t);
template void embedding_01_naive<__half>(const EmbeddingArgs<__half>&, cudaStream_t);
template void embedding_01_naive<__nv_bfloat16>(const EmbeddingArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
