// kc/engine/gpu_sampler.hpp — the sampler on the GPU: temperature, top-k and top-p over rows of
// logits, with the draw of the CPU reference (kc/engine/sampling.hpp), so that a request gives
// the tokens the reference gives, whatever runs it.
//
// Per row (one sequence that samples): the vocabulary sorted by logit, largest first, ties by the
// lower id (CUB's segmented radix sort, which is stable); the top-k cut; the weights
// exp((logit - max) / T) summed as a running (prefix) sum along that order in FP32; the top-p cut
// where the running sum first reaches top_p of the total; the draw u from Philox4x32-10 keyed by
// the request's seed with the token's index as counter (the reference's bits exactly); the token
// is the first whose running sum exceeds u times the kept total. Greedy rows (temperature 0 or
// top_k 1) take the argmax, ties to the lower id. A row holding a NaN, or whose largest logit is
// not finite, gives -1 (the reference refuses both).
//
// The reference sums in double, this sampler in FP32 and in another order: where u times the
// total falls within rounding of a boundary between two tokens the two may pick neighbours in the
// order (the test allows exactly that); everywhere else they agree.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kc/common/buffer.hpp"
#include "kc/engine/sampling.hpp"

namespace kc::engine {

// One row's parameters and draw counter, as the kernels read them (device memory).
struct GpuSamplingRow {
  float temperature = 0.f;
  std::int32_t top_k = 0;
  float top_p = 1.f;
  std::uint32_t pad = 0;
  std::uint64_t seed = 0;
  std::uint64_t index = 0;  // the token's index in its request's output (the draw's counter)
};

// A request's sampling parameters as the sampler's row for token number `index` of its output.
inline GpuSamplingRow gpu_sampling_row(const SamplingParams& params, std::uint64_t index) {
  GpuSamplingRow row;
  row.temperature = params.temperature;
  row.top_k = params.top_k;
  row.top_p = params.top_p;
  row.seed = params.seed;
  row.index = index;
  return row;
}

class GpuSampler {
 public:
  // Scratch for `rows_per_pass` rows of `vocab` logits at a time (keys, ids and their sorted
  // copies: 16 bytes a logit, plus CUB's temporary storage). Throws kc::CudaError without memory.
  GpuSampler(int vocab, int rows_per_pass = 32);

  // tokens[r] for r < rows: rows of `logits` ([rows, vocab] bf16), parameters in `params`
  // (device, rows of them, each validated on the host by the caller with
  // validate_sampling_params). Asynchronous on `stream`.
  void sample(const __nv_bfloat16* logits, int rows, const GpuSamplingRow* params, std::int32_t* tokens,
              cudaStream_t stream);

  int vocab() const { return vocab_; }

 private:
  int vocab_, rows_per_pass_;
  DeviceBuffer<float> keys_, sorted_keys_;
  DeviceBuffer<std::int32_t> ids_, sorted_ids_, offsets_;
  DeviceBuffer<std::byte> sort_storage_;
};

// The sampler's uniform draws on the GPU, for the test against sampling_uniform(): out[i] =
// the draw of (seeds[i], indices[i]) (device arrays of n).
void gpu_sampling_uniforms(const std::uint64_t* seeds, const std::uint64_t* indices, int n, float* out,
                           cudaStream_t stream);

}  // namespace kc::engine
