// Embedding rung 02 — a block per token, 16-byte copies; and the checked entry point.
//
// Idea: a block takes one token, reads and checks its id once, then its threads copy the table
// row in 16-byte vectors (no conversion: the bytes are copied as they are). A bad id zero-fills
// the output row without forming a single table address.
//
// What changed from rung 01: one id read and check per token instead of per element, and
// 16-byte accesses (when hidden is a multiple of the vector width; scalar otherwise).
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

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) embedding_vectorized_kernel(EmbeddingArgs<T> args) {
  const std::int64_t token = blockIdx.x;
  const int id = args.ids[token];
  const bool valid = token_id_valid(id, args.vocab, token, args.error_record, threadIdx.x == 0);
  T* out = args.out + token * args.hidden;
  if (valid) {
    const T* row = args.table + static_cast<std::int64_t>(id) * args.hidden;
    for (int h = static_cast<int>(threadIdx.x) * kVec; h < args.hidden; h += kThreads * kVec)
      core::store_vector<T, kVec>(out + h, core::load_vector<T, kVec>(row + h));
  } else {
    core::Vector<T, kVec> zeros;
#pragma unroll
    for (int i = 0; i < kVec; ++i) zeros[i] = T(0.f);
    for (int h = static_cast<int>(threadIdx.x) * kVec; h < args.hidden; h += kThreads * kVec)
      core::store_vector<T, kVec>(out + h, zeros);
  }
}

}  // namespace

template <typename T>
void embedding_02_vectorized(const EmbeddingArgs<T>& args, cudaStream_t stream) {
  constexpr int kFull = core::kVectorWidth<T>;
  core::dispatch_vector_width<kFull>(
      core::vector_width(args.hidden, sizeof(T), args.table, args.out) == kFull, [&](auto vec) {
        embedding_vectorized_kernel<T, decltype(vec)::value>
            <<<static_cast<unsigned>(args.tokens), kThreads, 0, stream>>>(args);
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
