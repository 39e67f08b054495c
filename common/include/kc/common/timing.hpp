// kc/common/timing.hpp — timing GPU work honestly.
//
// Each sample is one launch bracketed by CUDA events on the stream, after the L2 has been
// scrubbed (a read pass over twice the L2 size), so every sample reads its inputs from DRAM the
// way a real workload meeting fresh data would. Warm-up launches come first (module load, clock
// ramp-up), the median of many samples is reported with its spread, and every timed launch sits
// inside an NVTX range named after the kernel id so `ncu --nvtx --nvtx-include "<id>/"` selects it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "kc/common/buffer.hpp"

namespace kc {

// Evicts the L2 by reading a buffer larger than it. Reading (not writing) leaves clean lines, so
// the timed kernel does not pay for write-backs of the scrub itself.
class L2Scrubber {
 public:
  explicit L2Scrubber(std::size_t l2_bytes);
  void scrub(cudaStream_t stream);
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer<float> buffer_;
  DeviceBuffer<float> sink_;
};

struct TimingConfig {
  int warmup_launches = 2;
  int min_samples = 5;
  int max_samples = 100;
  double target_total_ms = 300.0;  // sample count = target / (one launch), clamped to [min, max]
  bool scrub_l2 = true;
};

struct TimingStats {
  std::vector<double> samples_ms;
  double median_ms = 0.0;
  double min_ms = 0.0;
  double max_ms = 0.0;
  double p10_ms = 0.0;
  double p90_ms = 0.0;
  // (p90 - p10) / median, in percent: how much to trust a difference between two kernels.
  double spread_percent() const;
};

// Median, min, max and the 10th/90th percentiles of `samples_ms` (must not be empty).
TimingStats summarize_samples(std::vector<double> samples_ms);

using Launch = std::function<void(cudaStream_t)>;

// Warms up, then times launches one at a time on `stream`. `scrubber` may be null (no scrub).
// `before_last_sample`, when set, runs (untimed, before that sample's L2 scrub) ahead of the last
// timed launch: it restores the operands, so that the last timed launch's output can be checked.
TimingStats time_launches(const Launch& launch, cudaStream_t stream, L2Scrubber* scrubber,
                          const TimingConfig& config, const std::string& nvtx_name,
                          const Launch& before_last_sample = {});

// Two pieces of work timed in alternation, sample by sample (order A B B A A B ...), each sample
// after its own L2 scrub. A long or power-hungry run heats the GPU and lowers its clock as it
// goes (a large GEMM's time drifts within a single run; the figures are in
// docs/notes/2026-12-01-source-measurements.md), so two medians taken one after the other compare
// two temperatures as much as two kernels; taken in alternation, both see the same clocks. Each
// gets the sample count time_launches would give the slower of the two.
struct PairedTimingStats {
  TimingStats first;
  TimingStats second;
};
// `before_last_first_sample` as time_launches' before_last_sample, for `first`.
PairedTimingStats time_launches_paired(const Launch& first, const std::string& first_nvtx_name,
                                       const Launch& second, const std::string& second_nvtx_name,
                                       cudaStream_t stream, L2Scrubber* scrubber,
                                       const TimingConfig& config,
                                       const Launch& before_last_first_sample = {});

// Measures device-to-device copy bandwidth with cudaMemcpyAsync over `bytes` (read + write bytes
// counted), median of several copies: the ceiling memory-bound kernels are judged against.
double measure_copy_bandwidth_gbps(std::size_t bytes, cudaStream_t stream);

// kc's own device-to-device copy: a grid-stride kernel of 16-byte loads and stores, four in flight
// per thread (bytes and both pointers must be multiples of 16). The copy baseline uses it instead
// of cudaMemcpyAsync when KC_COPY_BASELINE=kernel, so that a profiler (which sees kernels, not
// the driver's copies) can count the DRAM bytes the baseline moves.
void copy_with_kernel(void* destination, const void* source, std::size_t bytes, cudaStream_t stream);

}  // namespace kc
