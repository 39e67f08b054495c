// Embedding rung 02 — eight tokens per block, 16-byte copies; and the checked entry point.
//
// Idea: a block takes eight tokens, reads and checks their ids once, then its threads copy the
// eight table rows in 16-byte vectors (no conversion: the bytes are copied as they are): each
// thread first loads its vector of every row, then stores them, so eight loads are in flight per
// thread. A bad id zero-fills its output row without forming a single table address.
//
// What changed from rung 01: one id read and check per token instead of per element; 16-byte
// accesses (when hidden is a multiple of the vector width; scalar otherwise); several rows per
// block. A block of one token and hidden = 2048 bf16 moves one vector per thread: it waits for the
// id, then for that one load, and a block's life is two DRAM latencies long with 16 bytes per
// thread in flight for half of it. Eight rows per block put the id latency once in front of eight
// loads.
//
// Expected limiter: DRAM bandwidth (the gathered rows read once, the output written once).
//
// Run just this rung:  kc-bench --filter 'stage2/embedding/02_vectorized'
#include "kc/common/error.hpp"
#include "kc/core/launch.hpp"
#include "kc/core/vector_io.hpp"
#include "embedding_internal.cuh"

namespace kc::stage2 {
namespace {

constexpr int kThreads = 256;
constexpr int kTokensPerBlock = 8;

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) embedding_vectorized_kernel(EmbeddingArgs<T> args) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kTokensPerBlock;
  // The ids of this block's tokens (the same addresses in every thread: one broadcast load each),
  // checked once; a row pointer of nullptr means "zero-fill" (a bad id, or past the last token).
  const T* rows[kTokensPerBlock];
#pragma unroll
  for (int t = 0; t < kTokensPerBlock; ++t) {
    const std::int64_t token = first + t;
    rows[t] = nullptr;
    if (token < args.tokens) {
      const int id = args.ids[token];
      if (token_id_valid(id, args.vocab, token, args.error_record, threadIdx.x == 0))
        rows[t] = args.table + static_cast<std::int64_t>(id) * args.hidden;
    }
  }
  for (int h = static_cast<int>(threadIdx.x) * kVec; h < args.hidden; h += kThreads * kVec) {
    core::Vector<T, kVec> values[kTokensPerBlock];
#pragma unroll
    for (int t = 0; t < kTokensPerBlock; ++t) {
      if (rows[t] != nullptr) {
        values[t] = core::load_vector<T, kVec>(rows[t] + h);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) values[t][i] = T(0.f);
      }
    }
#pragma unroll
    for (int t = 0; t < kTokensPerBlock; ++t)
      if (first + t < args.tokens) core::store_vector<T, kVec>(args.out + (first + t) * args.hidden + h, values[t]);
  }
}

}  // namespace

template <typename T>
void embedding_02_vectorized(const EmbeddingArgs<T>& args, cudaStream_t stream) {
  constexpr int kFull = core::kVectorWidth<T>;
  core::dispatch_vector_width<kFull>(
      core::vector_width(args.hidden, sizeof(T), args.table, args.out) == kFull, [&](auto vec) {
        const auto blocks = static_cast<unsigned>((args.tokens + kTokensPerBlock - 1) / kTokensPerBlock);
        embedding_vectorized_kernel<T, decltype(vec)::value><<<blocks, kThreads, 0, stream>>>(args);
      });
}

template <typename T>
void embedding_lookup_checked(const EmbeddingArgs<T>& args, cudaStream_t stream) {
  require(args.error_record != nullptr, "embedding_lookup_checked needs an error record (one int of device memory)");
  KC_CUDA_CHECK(cudaMemsetAsync(args.error_record, 0xff, sizeof(int), stream));  // kNoBadToken
  embedding_02_vectorized(args, stream);
  KC_CHECK_LAUNCH();
  int first_bad = kNoBadToken;
  KC_CUDA_CHECK(cudaMemcpyAsync(&first_bad, args.error_record, sizeof(int), cudaMemcpyDeviceToHost, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (first_bad == kNoBadToken) return;
  int id = 0;
  KC_CUDA_CHECK(cudaMemcpyAsync(&id, args.ids + first_bad, sizeof(int), cudaMemcpyDeviceToHost, stream));
  KC_CUDA_CHECK(cudaStreamSynchronize(stream));
  throw Error(bad_token_message(first_bad, id, args.vocab));
}

template void embedding_02_vectorized<float>(const EmbeddingArgs<float>&, cudaStream_t);
template void embedding_02_vectorized<__half>(const EmbeddingArgs<__half>&, cudaStream_t);
template void embedding_02_vectorized<__nv_bfloat16>(const EmbeddingArgs<__nv_bfloat16>&, cudaStream_t);
template void embedding_lookup_checked<float>(const EmbeddingArgs<float>&, cudaStream_t);
template void embedding_lookup_checked<__half>(const EmbeddingArgs<__half>&, cudaStream_t);
template void embedding_lookup_checked<__nv_bfloat16>(const EmbeddingArgs<__nv_bfloat16>&, cudaStream_t);

}  // namespace kc::stage2
