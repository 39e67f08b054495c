// kc/engine/gpu_sampler.hpp — the sampler on the GPU: temperature, top-k and top-p over rows of
// logits, with the draw of the CPU reference (kc/engine/sampling.hpp), so that a request gives
// the tokens the reference gives, whatever runs it.
//
// Per row (one sequence that samples): the vocabulary sorted by logit, largest first, ties by the
// lower id (a stable radix sort: GpuSortMethod below); the top-k cut; the weights
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

// How the rows of a pass are sorted; both give the same order, bit for bit.
//   segmented_per_row: CUB's segmented radix sort on the float logits, a segment a row. It sorts
//     each segment in one thread block: one or a few rows of a large vocabulary keep one SM busy
//     while the others idle (the sample_rows op's rung 01).
//   one_sort: one device-wide radix sort of the whole pass (CUB's onesweep, every SM), each key
//     the row's index in its high 32 bits above the logit's bits, turned so that an ascending sort
//     orders a row largest first (-0 below +0, as CUB's float keys). The sort reads only the
//     bits the row index needs above the 32 of the logit. Then one pass turns the sorted keys
//     back into floats for the cuts and the draw (rung 02, what the engine runs).
enum class GpuSortMethod { segmented_per_row, one_sort };

class GpuSampler {
 public:
  // Scratch for `rows_per_pass` rows of `vocab` logits at a time: for segmented_per_row the float
  // keys, the ids and their sorted copies (16 bytes a logit), for one_sort 64-bit keys and their
  // sorted copy, the ids and theirs and the sorted floats (28 bytes a logit); plus CUB's temporary
  // storage. Throws kc::CudaError without memory.
  GpuSampler(int vocab, int rows_per_pass = 32, GpuSortMethod method = GpuSortMethod::one_sort);

  // tokens[r] for r < rows: rows of `logits` ([rows, vocab] bf16), parameters in `params`
  // (device, rows of them, each validated on the host by the caller with
  // validate_sampling_params). Asynchronous on `stream`.
  void sample(const __nv_bfloat16* logits, int rows, const GpuSamplingRow* params, std::int32_t* tokens,
              cudaStream_t stream);

  int vocab() const { return vocab_; }
  GpuSortMethod method() const { return method_; }

 private:
  int vocab_, rows_per_pass_;
  GpuSortMethod method_;
  DeviceBuffer<float> keys_, sorted_keys_;  // keys_: segmented_per_row only
  DeviceBuffer<std::uint64_t> row_keys_, sorted_row_keys_;  // one_sort only
  DeviceBuffer<std::int32_t> ids_, sorted_ids_, offsets_;
  DeviceBuffer<std::byte> sort_storage_;
};

// The bits of the key one_sort orders by, above the logit's 32: enough for row indices below
// `rows` (0 for one row).
int gpu_sampler_row_bits(int rows);

// The sampler's uniform draws on the GPU, for the test against sampling_uniform(): out[i] =
// the draw of (seeds[i], indices[i]) (device arrays of n).
void gpu_sampling_uniforms(const std::uint64_t* seeds, const std::uint64_t* indices, int n, float* out,
                           cudaStream_t stream);

}  // namespace kc::engine
