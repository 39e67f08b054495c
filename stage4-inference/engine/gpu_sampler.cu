// The sampler on the GPU (kc/engine/gpu_sampler.hpp).
#include "kc/engine/gpu_sampler.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <type_traits>

#include "kc/common/error.hpp"

namespace kc::engine {
namespace {

constexpr int kThreads = 1024;

// Philox4x32-10, as kc::engine::philox4x32_10 (sampling.cpp) computes it.
__device__ uint4 philox4x32_10(uint4 counter, uint2 key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.x += 0x9E3779B9u;
      key.y += 0xBB67AE85u;
    }
    const unsigned high0 = __umulhi(0xD2511F53u, counter.x), low0 = 0xD2511F53u * counter.x;
    const unsigned high1 = __umulhi(0xCD9E8D57u, counter.z), low1 = 0xCD9E8D57u * counter.z;
    counter = make_uint4(high1 ^ counter.y ^ key.x, low1, high0 ^ counter.w ^ key.y, low0);
  }
  return counter;
}

__device__ float uniform_draw(std::uint64_t seed, std::uint64_t index) {
  const uint4 bits = philox4x32_10(make_uint4(static_cast<unsigned>(index), static_cast<unsigned>(index >> 32), 0u, 0u),
                                   make_uint2(static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32)));
  return static_cast<float>(bits.x >> 8) * 0x1.0p-24f;
}

__global__ void uniforms_kernel(const std::uint64_t* seeds, const std::uint64_t* indices, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = uniform_draw(seeds[i], indices[i]);
}

// one_sort's keys: the row above the logit's bits, the bits turned so that an ascending sort puts
// the larger logit first: first the float's bits made to order as unsigned integers (the sign bit
// flipped for a positive value, every bit for a negative one: CUB's own float keys), then all of
// them inverted.
__device__ __forceinline__ std::uint32_t descending_bits(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  const std::uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

__device__ __forceinline__ float from_descending_bits(std::uint32_t key) {
  const std::uint32_t ascending = ~key;
  return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending);
}

// The sort's input for `rows` rows: a key and an id a logit, the key the logit as a float
// (segmented_per_row, which also gets its segments' offsets) or one_sort's 64-bit key. A NaN
// anywhere in a row is recorded as tokens[row] = -1 (the caller set every row to another value
// first).
template <class Key>
__global__ void prepare_kernel(const __nv_bfloat16* logits, int vocab, Key* keys, std::int32_t* ids,
                               std::int32_t* offsets, int rows, std::int32_t* tokens) {
  constexpr bool kRowKeys = std::is_same_v<Key, std::uint64_t>;
  const int row = blockIdx.y;
  __shared__ int nan_seen;
  if (threadIdx.x == 0) nan_seen = 0;
  __syncthreads();
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < vocab; c += gridDim.x * blockDim.x) {
    const std::size_t at = static_cast<std::size_t>(row) * vocab + c;
    const float value = __bfloat162float(logits[at]);
    if (value != value) nan_seen = 1;
    if constexpr (kRowKeys)
      keys[at] = (static_cast<std::uint64_t>(row) << 32) | descending_bits(value);
    else
      keys[at] = value;
    ids[at] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0 && nan_seen) tokens[row] = -1;
  if constexpr (!kRowKeys)
    if (blockIdx.x == 0 && threadIdx.x == 0 && row == 0)
      for (int r = 0; r <= rows; ++r) offsets[r] = r * vocab;
}

// The sorted keys as the logits they were, for choose_kernel.
__global__ void unpack_sorted_kernel(const std::uint64_t* keys, std::size_t n, float* values) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    values[i] = from_descending_bits(static_cast<std::uint32_t>(keys[i]));
}

// One block a row, on the row sorted largest first: running sums of the weights written over the
// sorted keys, then the cuts and the draw (binary searches over the nondecreasing running sums).
__global__ void __launch_bounds__(kThreads)
    choose_kernel(float* sorted, const std::int32_t* sorted_ids, int vocab, const GpuSamplingRow* params,
                  std::int32_t* tokens) {
  const int row = blockIdx.x;
  if (tokens[row] == -1) return;  // a NaN in the row
  const GpuSamplingRow p = params[row];
  float* cum = sorted + static_cast<std::size_t>(row) * vocab;
  const std::int32_t* order = sorted_ids + static_cast<std::size_t>(row) * vocab;
  if (p.temperature == 0.f || p.top_k == 1) {  // greedy: the first of the order
    if (threadIdx.x == 0) tokens[row] = order[0];
    return;
  }
  const int kept = p.top_k > 0 && p.top_k < vocab ? p.top_k : vocab;
  const float max_logit = cum[0];
  if (!isfinite(max_logit)) {  // every token masked, or an overflow: as the reference, refuse
    if (threadIdx.x == 0) tokens[row] = -1;
    return;
  }
  using Scan = cub::BlockScan<float, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ float carry;
  if (threadIdx.x == 0) carry = 0.f;
  __syncthreads();
  for (int base = 0; base < kept; base += kThreads) {
    const int i = base + threadIdx.x;
    const float weight = i < kept ? expf((cum[i] - max_logit) / p.temperature) : 0.f;
    float running = 0.f, chunk_total = 0.f;
    Scan(scan_storage).InclusiveSum(weight, running, chunk_total);
    if (i < kept) cum[i] = carry + running;
    __syncthreads();
    if (threadIdx.x == 0) carry += chunk_total;
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  // The running sums come from a tree scan, each added in its own order, so in FP32 a later one
  // may come out an ulp below an earlier one; the binary searches then may land one position
  // off, which is the rounding-boundary case the header admits.
  const float total = cum[kept - 1];
  // top-p: the shortest prefix whose running sum reaches top_p of the total (at least one).
  int prefix = kept;
  if (p.top_p < 1.f) {
    const float target = p.top_p * total;
    int low = 0, high = kept - 1;  // the first i with cum[i] >= target
    while (low < high) {
      const int mid = (low + high) / 2;
      if (cum[mid] >= target) high = mid;
      else low = mid + 1;
    }
    prefix = low + 1;
  }
  const float threshold = uniform_draw(p.seed, p.index) * cum[prefix - 1];
  int low = 0, high = prefix - 1;  // the first i with threshold < cum[i] (the last if none)
  while (low < high) {
    const int mid = (low + high) / 2;
    if (threshold < cum[mid]) high = mid;
    else low = mid + 1;
  }
  tokens[row] = order[low];
}

}  // namespace

int gpu_sampler_row_bits(int rows) {
  int bits = 0;
  while (bits < 31 && (1 << bits) < rows) ++bits;
  return bits;
}

GpuSampler::GpuSampler(int vocab, int rows_per_pass, GpuSortMethod method)
    : vocab_(vocab), rows_per_pass_(rows_per_pass), method_(method) {
  require(vocab >= 1 && rows_per_pass >= 1, "GpuSampler: vocab ({}) and rows_per_pass ({}) must be >= 1", vocab,
          rows_per_pass);
  const std::size_t n = static_cast<std::size_t>(vocab) * rows_per_pass;
  require(n <= static_cast<std::size_t>(INT32_MAX), "GpuSampler: {} rows of {} logits exceed 2^31 - 1 keys",
          rows_per_pass, vocab);
  sorted_keys_ = DeviceBuffer<float>(n);
  ids_ = DeviceBuffer<std::int32_t>(n);
  sorted_ids_ = DeviceBuffer<std::int32_t>(n);
  std::size_t bytes = 0;
  if (method == GpuSortMethod::segmented_per_row) {
    keys_ = DeviceBuffer<float>(n);
    offsets_ = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(rows_per_pass) + 1);
    KC_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        nullptr, bytes, keys_.data(), sorted_keys_.data(), ids_.data(), sorted_ids_.data(), static_cast<int>(n),
        rows_per_pass, offsets_.data(), offsets_.data() + 1));
  } else {
    row_keys_ = DeviceBuffer<std::uint64_t>(n);
    sorted_row_keys_ = DeviceBuffer<std::uint64_t>(n);
    // The most items and the most bits a pass sorts: CUB's temporary storage grows with both.
    KC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, row_keys_.data(), sorted_row_keys_.data(),
                                                  ids_.data(), sorted_ids_.data(), static_cast<int>(n), 0,
                                                  32 + gpu_sampler_row_bits(rows_per_pass)));
  }
  sort_storage_ = DeviceBuffer<std::byte>(bytes > 0 ? bytes : 1);
}

void GpuSampler::sample(const __nv_bfloat16* logits, int rows, const GpuSamplingRow* params, std::int32_t* tokens,
                        cudaStream_t stream) {
  require(logits != nullptr && params != nullptr && tokens != nullptr && rows >= 1,
          "GpuSampler::sample: logits, params and tokens must be non-null and rows >= 1");
  for (int first = 0; first < rows; first += rows_per_pass_) {
    const int count = std::min(rows_per_pass_, rows - first);
    const std::size_t n = static_cast<std::size_t>(count) * vocab_;
    // 0xfefefefe, anything but -1: no NaN seen yet
    KC_CUDA_CHECK(cudaMemsetAsync(tokens + first, 0xfe, count * sizeof(std::int32_t), stream));
    const dim3 grid(static_cast<unsigned>(std::min((vocab_ + 255) / 256, 64)), static_cast<unsigned>(count));
    const __nv_bfloat16* pass_logits = logits + static_cast<std::size_t>(first) * vocab_;
    std::size_t bytes = sort_storage_.size();
    if (method_ == GpuSortMethod::segmented_per_row) {
      prepare_kernel<<<grid, 256, 0, stream>>>(pass_logits, vocab_, keys_.data(), ids_.data(), offsets_.data(), count,
                                              tokens + first);
      KC_CUDA_CHECK(cudaGetLastError());
      KC_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
          sort_storage_.data(), bytes, keys_.data(), sorted_keys_.data(), ids_.data(), sorted_ids_.data(),
          static_cast<int>(n), count, offsets_.data(), offsets_.data() + 1, 0, 32, stream));
    } else {
      prepare_kernel<<<grid, 256, 0, stream>>>(pass_logits, vocab_, row_keys_.data(), ids_.data(), nullptr, count,
                                              tokens + first);
      KC_CUDA_CHECK(cudaGetLastError());
      KC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_storage_.data(), bytes, row_keys_.data(),
                                                    sorted_row_keys_.data(), ids_.data(), sorted_ids_.data(),
                                                    static_cast<int>(n), 0, 32 + gpu_sampler_row_bits(count), stream));
      const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 1024));
      unpack_sorted_kernel<<<blocks, 256, 0, stream>>>(sorted_row_keys_.data(), n, sorted_keys_.data());
      KC_CUDA_CHECK(cudaGetLastError());
    }
    choose_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
        sorted_keys_.data(), sorted_ids_.data(), vocab_, params + first, tokens + first);
    KC_CUDA_CHECK(cudaGetLastError());
  }
}

void gpu_sampling_uniforms(const std::uint64_t* seeds, const std::uint64_t* indices, int n, float* out,
                           cudaStream_t stream) {
  require(seeds != nullptr && indices != nullptr && out != nullptr && n >= 1,
          "gpu_sampling_uniforms: non-null arrays and n >= 1");
  uniforms_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(seeds, indices, n, out);
  KC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kc::engine
