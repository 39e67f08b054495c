#include "kc/common/context.hpp"

#include "kc/common/error.hpp"

#include <cstdlib>

namespace kc {

Stream::Stream() { KC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() { (void)cudaStreamDestroy(stream_); }

namespace {
DeviceInfo select_device(int ordinal) {
  require(has_gpu(), "no CUDA GPU is visible: {}", no_gpu_reason());
  KC_CUDA_CHECK(cudaSetDevice(ordinal));
  // Not every device supports persisting L2 accesses; where it is unsupported there is nothing
  // to turn off.
  if (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0) != cudaSuccess) (void)cudaGetLastError();
  return query_device(ordinal);
}
}  // namespace

Context::Context(int ordinal) : device_(select_device(ordinal)) {}

cublasHandle_t Context::cublas() {
  if (!cublas_) cublas_ = std::make_unique<CublasHandle>();
  return cublas_->get();
}

cublasLtHandle_t Context::cublaslt() {
  if (!cublaslt_) cublaslt_ = std::make_unique<CublasLtHandle>();
  return cublaslt_->get();
}

L2Scrubber& Context::scrubber() {
  if (!scrubber_) {
    // The scrub reads kScrubL2Multiple times the L2's size (L2Scrubber reads twice what it is
    // given). KC_L2_SCRUB_MULTIPLE overrides it, for experiments on how much is enough.
    double multiple = kScrubL2Multiple;
    if (const char* text = std::getenv("KC_L2_SCRUB_MULTIPLE"); text != nullptr && std::atof(text) >= 1.0)
      multiple = std::atof(text);
    scrubber_ = std::make_unique<L2Scrubber>(
        static_cast<std::size_t>(multiple / 2.0 * static_cast<double>(device_.l2_bytes)));
  }
  return *scrubber_;
}

double Context::copy_bandwidth_gbps() {
  if (!copy_bandwidth_gbps_) copy_bandwidth_gbps_ = measure_copy_bandwidth_gbps(std::size_t{1} << 30, stream());
  return *copy_bandwidth_gbps_;
}

}  // namespace kc
