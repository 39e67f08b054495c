// kc/common/context.hpp — the GPU state one harness process shares: device facts, a stream,
// cuBLAS handles, the L2 scrubber and the measured copy bandwidth. Created once, passed by
// reference; nothing here is a hidden global.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "kc/common/blas.hpp"
#include "kc/common/device.hpp"
#include "kc/common/timing.hpp"

namespace kc {

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Context {
 public:
  // How many L2 sizes the scrub before each timed launch reads: four, a margin over the L2's
  // two partitions and its replacement policy (docs/notes/2026-12-01-harness-v2-run.md records
  // the experiment with two and four).
  static constexpr double kScrubL2Multiple = 4.0;

  // Selects the device, sets the persisting-L2 carve-out to 0 (no kernel gets a head start from
  // data pinned in the L2) and creates a stream. Throws kc::Error when there is no GPU.
  explicit Context(int ordinal = 0);

  const DeviceInfo& device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas();
  cublasLtHandle_t cublaslt();
  L2Scrubber& scrubber();
  // cudaMemcpyAsync device-to-device bandwidth over 1 GiB (read + write), measured on first use.
  double copy_bandwidth_gbps();

  // Problems whose work (e.g. M*N*K multiply-adds) is at most this use the CPU double reference;
  // larger ones use cuBLAS in FP64 on the GPU.
  std::int64_t cpu_reference_limit = std::int64_t{1} << 24;

 private:
  DeviceInfo device_;
  Stream stream_;
  std::unique_ptr<CublasHandle> cublas_;
  std::unique_ptr<CublasLtHandle> cublaslt_;
  std::unique_ptr<L2Scrubber> scrubber_;
  std::optional<double> copy_bandwidth_gbps_;
};

}  // namespace kc
