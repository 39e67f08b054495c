#include <nvtx3/nvtx3.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kc/common/device.hpp"
#include "kc/common/error.hpp"
#include "kc/common/timing.hpp"

namespace kc {
namespace {

__global__ void scrub_read_kernel(const float4* data, std::size_t count, float* sink) {
  float sum = 0.f;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float4 v = data[i];
    sum += v.x + v.y + v.z + v.w;
  }
  if (sum == 1234.5678f) *sink = sum;  // keeps the loads alive; never true for the zeroed buffer
}

// RAII pair of CUDA events.
class EventPair {
 public:
  EventPair() {
    KC_CUDA_CHECK(cudaEventCreate(&start_));
    KC_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventPair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }
  double elapsed_ms() const {
    KC_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    KC_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

double percentile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto lower = static_cast<std::size_t>(std::floor(position));
  const auto upper = static_cast<std::size_t>(std::ceil(position));
  const double fraction = position - static_cast<double>(lower);
  return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction;
}

}  // namespace

L2Scrubber::L2Scrubber(std::size_t l2_bytes)
    : buffer_((2 * l2_bytes + 4 * sizeof(float4)) / sizeof(float)), sink_(1) {
  KC_CUDA_CHECK(cudaMemset(buffer_.data(), 0, buffer_.bytes()));
}

void L2Scrubber::scrub(cudaStream_t stream) {
  const std::size_t count = buffer_.size() / 4;
  scrub_read_kernel<<<1024, 256, 0, stream>>>(reinterpret_cast<const float4*>(buffer_.data()),
                                              count, sink_.data());
  KC_CHECK_LAUNCH();
}

double TimingStats::spread_percent() const {
  return median_ms > 0.0 ? 100.0 * (p90_ms - p10_ms) / median_ms : 0.0;
}

TimingStats summarize_samples(std::vector<double> samples_ms) {
  require(!samples_ms.empty(), "summarize_samples needs at least one sample");
  TimingStats stats;
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  stats.samples_ms = std::move(samples_ms);
  stats.median_ms = percentile(sorted, 0.5);
  stats.min_ms = sorted.front();
  stats.max_ms = sorted.back();
  stats.p10_ms = percentile(sorted, 0.1);
  stats.p90_ms = percentile(sorted, 0.9);
  return stats;
}

namespace {

void require_valid(const TimingConfig& config) {
  require(config.min_samples >= 1 && config.max_samples >= config.min_samples,
          "TimingConfig: need 1 <= min_samples <= max_samples (got {} and {})", config.min_samples,
          config.max_samples);
}

// Runs the warm-up launches of `launch`; returns the time of the last one (the estimate).
double warm_up(const Launch& launch, cudaStream_t stream, const TimingConfig& config, EventPair& events) {
  double estimate_ms = 0.0;
  for (int i = 0; i < std::max(1, config.warmup_launches); ++i) {
    KC_CUDA_CHECK(cudaEventRecord(events.start(), stream));
    launch(stream);
    KC_CUDA_CHECK(cudaEventRecord(events.stop(), stream));
    estimate_ms = events.elapsed_ms();
  }
  return estimate_ms;
}

int sample_count(double estimate_ms, const TimingConfig& config) {
  int samples = config.max_samples;
  if (estimate_ms > 0.0) samples = static_cast<int>(std::ceil(config.target_total_ms / estimate_ms));
  return std::clamp(samples, config.min_samples, config.max_samples);
}

// One sample: scrub, then the launch between two events inside an NVTX range.
double timed_sample(const Launch& launch, cudaStream_t stream, L2Scrubber* scrubber,
                    const TimingConfig& config, const std::string& nvtx_name, EventPair& events) {
  if (config.scrub_l2 && scrubber != nullptr) scrubber->scrub(stream);
  nvtx3::scoped_range range{nvtx_name.c_str()};
  KC_CUDA_CHECK(cudaEventRecord(events.start(), stream));
  launch(stream);
  KC_CUDA_CHECK(cudaEventRecord(events.stop(), stream));
  return events.elapsed_ms();
}

}  // namespace

TimingStats time_launches(const Launch& launch, cudaStream_t stream, L2Scrubber* scrubber,
                          const TimingConfig& config, const std::string& nvtx_name,
                          const Launch& before_last_sample) {
  require_valid(config);
  EventPair events;
  const int samples = sample_count(warm_up(launch, stream, config, events), config);
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    if (i == samples - 1 && before_last_sample) before_last_sample(stream);
    times.push_back(timed_sample(launch, stream, scrubber, config, nvtx_name, events));
  }
  return summarize_samples(std::move(times));
}

PairedTimingStats time_launches_paired(const Launch& first, const std::string& first_nvtx_name,
                                       const Launch& second, const std::string& second_nvtx_name,
                                       cudaStream_t stream, L2Scrubber* scrubber,
                                       const TimingConfig& config,
                                       const Launch& before_last_first_sample) {
  require_valid(config);
  EventPair events;
  const double first_estimate = warm_up(first, stream, config, events);
  const double second_estimate = warm_up(second, stream, config, events);
  const int samples = sample_count(std::max(first_estimate, second_estimate), config);
  std::vector<double> first_times, second_times;
  first_times.reserve(static_cast<std::size_t>(samples));
  second_times.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    // A B, then B A: neither always runs right after the other (a cooler or hotter start).
    const bool first_leads = i % 2 == 0;
    if (i == samples - 1 && before_last_first_sample) before_last_first_sample(stream);
    if (first_leads) first_times.push_back(timed_sample(first, stream, scrubber, config, first_nvtx_name, events));
    second_times.push_back(timed_sample(second, stream, scrubber, config, second_nvtx_name, events));
    if (!first_leads) first_times.push_back(timed_sample(first, stream, scrubber, config, first_nvtx_name, events));
  }
  return {summarize_samples(std::move(first_times)), summarize_samples(std::move(second_times))};
}

double measure_copy_bandwidth_gbps(std::size_t bytes, cudaStream_t stream) {
  DeviceBuffer<std::byte> source(bytes);
  DeviceBuffer<std::byte> destination(bytes);
  KC_CUDA_CHECK(cudaMemsetAsync(source.data(), 1, bytes, stream));
  TimingConfig config;
  config.warmup_launches = 3;
  config.min_samples = 10;
  config.max_samples = 20;
  config.scrub_l2 = false;  // far larger than the L2 already
  const TimingStats stats = time_launches(
      [&](cudaStream_t s) {
        KC_CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), bytes,
                                      cudaMemcpyDeviceToDevice, s));
      },
      stream, nullptr, config, "common/copy/cudaMemcpyAsync");
  return 2.0 * static_cast<double>(bytes) / (stats.median_ms * 1e-3) / 1e9;
}

namespace {

constexpr int kCopyThreads = 256;
constexpr int kCopyUnroll = 4;

__global__ void __launch_bounds__(kCopyThreads) copy_vectors_kernel(int4* __restrict__ destination,
                                                                  const int4* __restrict__ source,
                                                                  std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kCopyThreads;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(kCopyThreads) + threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < count; i += kCopyUnroll * stride) {
    int4 values[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) values[u] = source[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) destination[i + u * stride] = values[u];
  }
  for (; i < count; i += stride) destination[i] = source[i];
}

}  // namespace

void copy_with_kernel(void* destination, const void* source, std::size_t bytes, cudaStream_t stream) {
  require(bytes % sizeof(int4) == 0 && reinterpret_cast<std::uintptr_t>(destination) % sizeof(int4) == 0 &&
              reinterpret_cast<std::uintptr_t>(source) % sizeof(int4) == 0,
          "copy_with_kernel copies 16-byte vectors: bytes ({}) and both pointers must be multiples of 16",
          bytes);
  const std::size_t count = bytes / sizeof(int4);
  if (count == 0) return;
  const int sms = current_device_sm_count();
  // Eight blocks of 256 threads per SM fill it (2048 threads); more would only add tail blocks.
  const std::size_t wanted = (count + kCopyThreads - 1) / kCopyThreads;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>(wanted, static_cast<std::size_t>(sms) * 8));
  copy_vectors_kernel<<<blocks, kCopyThreads, 0, stream>>>(static_cast<int4*>(destination),
                                                           static_cast<const int4*>(source), count);
  KC_CHECK_LAUNCH();
}

}  // namespace kc
